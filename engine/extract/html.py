"""HTML and XHTML: a saved page's main content, with its headings as sections.

trafilatura finds the article (dropping navigation, footers, cookie banners,
scripts and styles); its body tree is walked here so headings land as
sections exactly where their text is. The text opens with the page's title
(the headline a reader sees first; trafilatura's cleaned title, else
<title>), which is also `Extracted.title`.

- No main content found: all visible text (scripts, styles and templates
  dropped) is indexed instead, and a note says so.
- Main content found but tiny (under `_THIN_CHARS` letters, e.g. a page
  saved before its article loaded, as scmp.com.playbook.html, whose "body"
  is one photo caption): the page is ingested with what it has (title, the
  page's own summary line, the caption) and a note says the article body
  is missing. Refusing would lose a page the user chose to keep, and its
  headline and summary are real, visible text; falling back to all visible
  text would index menus instead.

- trafilatura drops short lines of the article it found (a release date
  above the headline, a "Sponsor:" pair of <div>s): they are put back from
  the page's own tree, menus and other boilerplate kept out
  (engine/extract/html_recover.py). A table's label cell ("Ages Eligible
  for Study:") runs into its value cell as the reader reads the row.

`visible_blocks` is also the EPUB path's reader (engine/extract/epub.py).
Runs in an extraction worker process (engine/extract/pool.py).
"""

from __future__ import annotations

import dataclasses
import re

from ..errors import invalid
from ..formats import HTML, media_type
from .base import Extracted, Section
from .dtd import expand_internal_subset

EXTRACTOR_VERSION = 2  # 2: label cells run into their values; dropped main-content lines recovered
# Above this size a page skips trafilatura's main-content detection (its cost grows faster than the page:
# a 40 MB saved page outlasted the 60 s extraction limit) for the linear flat pass (~5 s for 40 MB here).
FLAT_ABOVE_BYTES = 8 * 2**20
_THIN_CHARS = 200
_DROP = {"script", "style", "noscript", "template", "svg", "iframe", "object", "canvas", "button", "select",
         "nav", "math"}
_BLOCKS = {"p", "div", "li", "item", "ul", "ol", "list", "dl", "dt", "dd", "tr", "row", "table", "blockquote", "quote",
           "pre", "section", "article", "main", "aside", "header", "footer", "figure", "figcaption", "address",
           "form", "fieldset", "details", "summary", "hr", "body", "html", "doc", "caption", "thead", "tbody"}
_BREAKS = {"br", "lb"}
_CELLS = {"td", "th", "cell"}
_HEADING = re.compile(r"^h([1-6])$")


def extractor_id() -> str:
    import trafilatura

    return f"html/trafilatura-{trafilatura.__version__}/{EXTRACTOR_VERSION}"


def extract_html(data: bytes, label: str, limits=None) -> Extracted:
    """The page's text; an internal DTD subset's entities are expanded as text first (engine/extract/dtd.py)."""
    data, subset_notes = expand_internal_subset(data, label)
    extracted = _extract_page(data, label)
    if not subset_notes:
        return extracted
    return dataclasses.replace(extracted, notes=subset_notes + extracted.notes)


def _extract_page(data: bytes, label: str) -> Extracted:
    import trafilatura

    if len(data) > FLAT_ABOVE_BYTES:
        return _flat_extract(data, label, f"{label}: the page is {len(data) / 2**20:.0f} MB, over the "
                                          f"{FLAT_ABOVE_BYTES // 2**20} MB above which main-content detection "
                                          "would outlast the extraction time limit")
    page, too_deep = _parse_checked(data, label)
    if too_deep:
        return _flat_extract(data, label, f"{label}: its elements nest deeper than 256 levels, more than the HTML "
                                          "parser builds a tree for")
    page_title = _page_title(page)
    try:  # trafilatura prunes the tree it is given: the fallback below parses the bytes afresh
        found = trafilatura.bare_extraction(page, with_metadata=True,
                                            include_comments=False, include_tables=True, as_dict=False)
    except Exception:  # trafilatura gives up on some pages; the visible text still stands
        found = None
    title = ((getattr(found, "title", None) or "").strip() or page_title) if found is not None else page_title
    notes: list[str] = []
    body = getattr(found, "body", None) if found is not None else None
    main = BlockWriter()
    if body is not None:
        visible_blocks(body, main)
    writer = BlockWriter()
    if title and not main.text().startswith(title):  # the headline, unless the article opens with it
        writer.add(title)
    if not main.text().strip():
        notes.append(f"{label}: no main content was found, so all of the page's visible text was indexed "
                     "(it may include menus and footers)")
        visible_blocks(_parse(data, label), writer, skip_first=title)
    else:
        if sum(ch.isalnum() for ch in main.text()) < _THIN_CHARS:
            notes.append(f"{label}: its main text is only {len(main.text())} characters (the article body "
                         "seems not to have been saved); indexed the title, summary and that text")
            description = (getattr(found, "description", None) or "").strip()
            if description and description not in main.text():
                writer.add(description)
        else:
            main = _with_dropped_lines(main, title, data, label)
        writer.extend(main)
    text = writer.text()
    if not text.strip():
        raise invalid(f"{label} is an HTML page with no visible text; there is nothing to index")
    return Extracted(text=text, media_type=media_type(HTML), sections=tuple(writer.sections), title=title or None,
                     notes=tuple(notes), extractor=extractor_id())


def _with_dropped_lines(main: BlockWriter, title: str | None, data: bytes, label: str) -> BlockWriter:
    """trafilatura's blocks with the lines of the main region it dropped put back (engine/extract/html_recover.py)."""
    from .html_recover import recover

    main.flush()
    kept = list(zip(main.blocks, main.levels))
    merged = recover(kept, title, _parse(data, label), _owned_blocks)
    if merged is kept:
        return main
    out = BlockWriter()
    for text, level in merged:
        out.add(text, level)
    return out


def _owned_blocks(root) -> list[tuple[str, int | None, object]]:
    """The page's visible blocks as (text, heading level or None, the element each was read from)."""
    out = BlockWriter()
    out.owner = root
    visible_blocks(root, out)
    return list(zip(out.blocks, out.levels, out.owners))


def _parse(data: bytes, label: str):
    return _parse_checked(data, label)[0]


def _parse_checked(data: bytes, label: str):
    """(lxml's tree, whether the page nests deeper than libxml2 follows: it drops everything below 256 levels)."""
    import lxml.html
    from lxml import etree

    parser = lxml.html.HTMLParser()
    try:
        root = lxml.html.document_fromstring(data, parser=parser)
    except (etree.ParserError, ValueError) as exc:
        raise invalid(f"{label} is not a readable HTML page ({exc}); re-save it") from None
    too_deep = any(entry.type_name == "ERR_RESOURCE_LIMIT" and "depth" in entry.message for entry in parser.error_log)
    return root, too_deep


_RAW_TEXT = {"script", "style", "template", "noscript", "svg", "math", "iframe", "object", "canvas", "title",
             "textarea"}
_VOID = {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr"}
_TOKEN = re.compile(r"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<[!?][^>]*>|<(/?)([A-Za-z][A-Za-z0-9:._-]*)([^>]*)>", re.DOTALL)
_HIDDEN_ATTRS = re.compile(r"""\bhidden\b|aria-hidden\s*=\s*["']?true|display\s*:\s*none|visibility\s*:\s*hidden""",
                           re.IGNORECASE)


def flat_visible_text(page: str, out: BlockWriter) -> None:
    """Visible text from a page of any depth into `out`: a tag stream cut by one regular expression, no tree.

    For pages nested deeper than lxml builds a tree for (200,000 nested
    <div>s is one): blocks, line breaks, cells and headings as `_walk` makes
    them, but no main-content detection. Hidden and raw-text elements
    (scripts, styles, ...) are skipped by a counter of open ones, never by
    recursion: its cost is linear in the page's size.
    """
    import html

    skipping: list[str] = []
    heading: tuple[int, list[str]] | None = None
    position = 0

    def text(chunk: str) -> None:
        if chunk and not skipping:
            chunk = html.unescape(chunk)
            if heading is not None:
                heading[1].append(chunk)
            else:
                out.inline(chunk)

    lowered = page.lower()
    while True:
        match = _TOKEN.search(page, position)
        if match is None:
            break
        text(page[position:match.start()])
        position = match.end()
        if match.group(2) is None:
            continue  # a comment, a doctype, a processing instruction
        closing, tag, attrs = match.group(1) == "/", match.group(2).lower(), match.group(3)
        if closing:
            if skipping:
                if tag in skipping:
                    while skipping.pop() != tag:
                        pass
            elif heading is not None and _HEADING.match(tag):
                out.add(" ".join("".join(heading[1]).split()), heading[0])
                heading = None
            elif tag in _CELLS:
                out.cell_end()
            elif tag in _BLOCKS:
                out.flush()
            continue
        self_closing = attrs.endswith("/") or tag in _VOID
        if skipping or tag in _RAW_TEXT or (attrs and _HIDDEN_ATTRS.search(attrs)):
            if tag in ("script", "style", "textarea", "title") and not self_closing:
                end = lowered.find(f"</{tag}", position)  # raw text: no tags inside, skip it whole
                position = len(page) if end < 0 else end
            elif not self_closing:
                skipping.append(tag)
            continue
        level = _HEADING.match(tag)
        if level:
            out.flush()
            heading = (int(level.group(1)), [])
        elif tag in _BREAKS:
            out.inline("\n")
        elif tag in _BLOCKS:
            out.flush()
    text(page[position:])
    out.flush()


def _flat_extract(data: bytes, label: str, why: str) -> Extracted:
    """A page too deep or too large for a tree: its visible text through `flat_visible_text`, with a note why."""
    page = _decode(data)
    flat = BlockWriter()
    flat_visible_text(page, flat)
    title = _title_of(page)
    writer = BlockWriter()
    if title and not flat.text().startswith(title):
        writer.add(title)
    writer.extend(flat)
    text = writer.text()
    if not text.strip():
        raise invalid(f"{label} is an HTML page with no visible text (read with a flat pass: {why}); "
                      "there is nothing to index")
    note = (f"{why}; all of its visible text was read with a flat pass instead (no main-content detection, "
            "so menus and footers may be included)")
    return Extracted(text=text, media_type=media_type(HTML), sections=tuple(writer.sections), title=title,
                     notes=(note,), extractor=extractor_id())


def _decode(data: bytes) -> str:
    """The page's text: the charset its first bytes declare (a BOM, a meta tag), else UTF-8; never fails."""
    import codecs

    if data.startswith(codecs.BOM_UTF8):
        return data[3:].decode("utf-8", "replace")
    for bom, codec in ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(bom):
            return data[2:].decode(codec, "replace")
    declared = re.search(rb"""charset\s*=\s*["']?([A-Za-z0-9._-]+)""", data[:4096])
    if declared:
        try:
            return data.decode(declared.group(1).decode("ascii"), "replace")
        except LookupError:
            pass
    return data.decode("utf-8", "replace")


def _title_of(page: str) -> str | None:
    match = re.search(r"<title[^>]*>(.*?)</title\s*>", page[:200_000], re.IGNORECASE | re.DOTALL)
    if not match:
        return None
    import html

    return " ".join(html.unescape(match.group(1)).split()) or None


def _page_title(root) -> str | None:
    node = root.find(".//title")
    text = " ".join((node.text_content() if node is not None else "").split())
    return text or None


class BlockWriter:
    """Text blocks joined by blank lines; headings recorded as sections where they land."""

    def __init__(self, level_offset: int = 0) -> None:
        self.blocks: list[str] = []
        self.length = 0
        self.sections: list[Section] = []
        self.level_offset = level_offset
        self.levels: list[int | None] = []  # per block: its heading level, None for body text
        self.owners: list = []  # per block: the element it was read from (`_walk` sets `owner`), for html_recover
        self.owner = None
        self._inline: list[str] = []

    def inline(self, text: str | None) -> None:
        if text:
            self._inline.append(text)

    def cell_end(self) -> None:
        """A table cell closed: ' | ' between cells, but a label cell ('Ages Eligible for Study:') runs into
        its value as a reader reads the row ('Ages Eligible for Study: 18 Years'), so a phrase can span both."""
        last = next((piece for piece in reversed(self._inline) if piece.strip()), "")
        self._inline.append(" " if last.rstrip().endswith(":") else " | ")

    def flush(self) -> None:
        if self._inline:
            joined, self._inline = "".join(self._inline), []
            self.add(joined)

    def add(self, text: str, level: int | None = None) -> None:
        lines = [" ".join(line.split()).removesuffix(" |") for line in text.split("\n")]
        text = "\n".join(line for line in lines if line)
        if not text:
            return
        if self.blocks:
            self.length += 2
        if level is not None:
            self.sections.append(Section(self.length, level + self.level_offset, text.replace("\n", " ")))
        self.blocks.append(text)
        self.levels.append(level)
        self.owners.append(self.owner)
        self.length += len(text)

    def extend(self, other: BlockWriter) -> None:
        other.flush()
        base = self.length + (2 if self.blocks and other.blocks else 0)
        self.sections.extend(Section(base + s.start, s.level, s.title) for s in other.sections)
        for block in other.blocks:
            self.add(block)

    def text(self) -> str:
        self.flush()
        return "\n\n".join(self.blocks)


def visible_blocks(root, out: BlockWriter, skip_first: str | None = None) -> None:
    """Append the visible text under `root` to `out`, block by block, headings as sections."""
    _walk(root, out, skip_first)
    out.flush()


def _walk(element, out: BlockWriter, skip_first: str | None) -> None:
    tag = element.tag.rsplit("}", 1)[-1].lower() if isinstance(element.tag, str) else ""
    if tag == "head" and _is_html_head(element):
        tag = "script"  # the document's <head>, not trafilatura's <head rend="h2"> heading
    if not tag or tag in _DROP or _hidden(element):
        pass  # comments, processing instructions, scripts and hidden elements: only their tail is text
    else:
        heading = _HEADING.match(tag)
        if heading or tag == "head":
            out.flush()
            title = " ".join(element.text_content().split()) if hasattr(element, "text_content") \
                else " ".join("".join(element.itertext()).split())
            if title and title != skip_first:
                level = int(heading.group(1)) if heading else _rend_level(element)
                owner, out.owner = out.owner, element
                out.add(title, level)
                out.owner = owner
        elif tag in _BREAKS:
            out.inline("\n")
        else:
            block = tag in _BLOCKS
            owner = out.owner
            if block:
                out.flush()
                out.owner = element
            out.inline(element.text)
            for child in element:
                _walk(child, out, skip_first)
            if tag in _CELLS:
                out.cell_end()
            if block:
                out.flush()
                out.owner = owner
    out.inline(element.tail)


def _is_html_head(element) -> bool:
    parent = element.getparent()
    return parent is None or not isinstance(parent.tag, str) or parent.tag.rsplit("}", 1)[-1].lower() == "html"


def _rend_level(element) -> int:
    match = _HEADING.match((element.get("rend") or "").lower())
    return int(match.group(1)) if match else 2


def _hidden(element) -> bool:
    if element.get("hidden") is not None or element.get("aria-hidden") == "true":
        return True
    style = (element.get("style") or "").replace(" ", "").lower()
    return "display:none" in style or "visibility:hidden" in style
