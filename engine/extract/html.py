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

`visible_blocks` is also the EPUB path's reader (engine/extract/epub.py).
Runs in an extraction worker process (engine/extract/pool.py).
"""

from __future__ import annotations

import re

from ..errors import invalid
from .base import Extracted, Section

EXTRACTOR_VERSION = 1
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
    import trafilatura

    page = _parse(data, label)
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
        writer.extend(main)
    text = writer.text()
    if not text.strip():
        raise invalid(f"{label} is an HTML page with no visible text; there is nothing to index")
    return Extracted(text=text, media_type="text/html", sections=tuple(writer.sections), title=title or None,
                     notes=tuple(notes), extractor=extractor_id())


def _parse(data: bytes, label: str):
    import lxml.html
    from lxml import etree

    try:
        root = lxml.html.document_fromstring(data)
    except (etree.ParserError, ValueError) as exc:
        raise invalid(f"{label} is not a readable HTML page ({exc}); re-save it") from None
    return root


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
        self._inline: list[str] = []

    def inline(self, text: str | None) -> None:
        if text:
            self._inline.append(text)

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
                out.add(title, level)
        elif tag in _BREAKS:
            out.inline("\n")
        else:
            block = tag in _BLOCKS
            if block:
                out.flush()
            out.inline(element.text)
            for child in element:
                _walk(child, out, skip_first)
            if tag in _CELLS:
                out.inline(" | ")
            if block:
                out.flush()
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
