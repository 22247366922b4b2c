"""Word (DOCX): what a reader sees in the document's current state.

python-docx's `Document.paragraphs` skips table cells and the runs inside
tracked insertions, so the body XML is walked here in document order with
lxml, straight from the (bomb-checked) ZIP:

- paragraphs and tables in reading order; a table row is one line, its cells
  joined by " | "; content controls, smart tags, hyperlinks and text boxes
  are entered;
- tracked changes as if accepted: `w:ins` text in, `w:del` text out (and
  moved-from text out, moved-to text in);
- list items keep their marker ("•", "1.", "a)") as numbering.xml defines it;
- headings ("Heading N" styles, and any paragraph or style with an outline
  level) become sections at that level; the "Title" style is the title;
- footnotes and endnotes follow the body, each "[n] text", and the body keeps
  the reader's "[n]" reference mark; comments are not body text and are never read.

Runs in an extraction worker process (engine/extract/pool.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import invalid
from ..formats import DOCX, media_type
from .base import Extracted, Limits, Section
from .zipsafe import SafeZip

EXTRACTOR_VERSION = 1
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
_SKIP = {f"{W}del", f"{W}moveFrom", f"{W}delText", f"{W}instrText", f"{W}pPr", f"{W}rPr", f"{W}commentReference",
         f"{_MC}Fallback"}
# Where text boxes live: drawings, shapes, VML and markup-compatibility wrappers (mc:Choice only).
_CONTAINERS = (_MC, f"{W}drawing", "{http://schemas.openxmlformats.org/drawingml",
               "{http://schemas.microsoft.com/office/word/2010/wordprocessingShape", "{urn:schemas-microsoft-com:vml}")
_ENTER = {f"{W}{tag}" for tag in ("r", "ins", "moveTo", "hyperlink", "smartTag", "customXml", "sdt", "sdtContent",
                                   "fldSimple", "txbxContent", "pict", "object")}


_REFERENCE = re.compile(r"&([A-Za-z_:][\w.:-]*);")
_MAX_ENTITY_CHARS = 2**20  # an entity's expanded text, at most: a "billion laughs" part expands to nothing


def _entity_text(node) -> str:
    """What an entity reference left in a run's text reads as: an internal entity's value as plain text
    (references to other internal entities expanded, bounded; markup in it dropped), nothing for an external
    or undeclared one (never fetched: the parser does not resolve entities). Not an entity: nothing."""
    import html

    from lxml import etree

    if not isinstance(node, etree._Entity):
        return ""
    dtd = node.getroottree().docinfo.internalDTD
    values = {e.name: e.content for e in dtd.iterentities() if e.content is not None} if dtd is not None else {}
    budget = [_MAX_ENTITY_CHARS]

    def expand(name: str, seen: tuple[str, ...]) -> str:
        value = values.get(name)
        if value is None or name in seen or len(seen) > 16 or budget[0] < 0:
            return ""
        text = _REFERENCE.sub(lambda m: expand(m.group(1), seen + (name,)) if m.group(1) in values else m.group(0),
                              value)
        budget[0] -= len(text)
        return text if budget[0] >= 0 else ""

    return html.unescape(re.sub(r"<[^>]*>", "", expand(node.name, ())))


def extractor_id() -> str:
    from lxml import etree

    return f"docx/lxml-{'.'.join(map(str, etree.LXML_VERSION[:3]))}/{EXTRACTOR_VERSION}"


@dataclass
class _Style:
    name: str = ""
    outline: int | None = None  # 0-based outline level
    based_on: str | None = None


@dataclass
class _Doc:
    styles: dict[str, _Style]
    numbering: dict[str, dict[int, tuple[str, str, int]]]  # numId -> ilvl -> (format, lvlText, start)
    counters: dict[tuple[str, int], int] = field(default_factory=dict)
    notes: dict[str, dict[str, int]] = field(default_factory=lambda: {"footnote": {}, "endnote": {}})


def extract_docx(data: bytes, label: str, limits: Limits) -> Extracted:
    from lxml import etree

    archive = SafeZip(data, label, "Word document", limits)
    try:
        parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)

        def parse(name: str):
            raw = archive.read(name)
            if raw is None:
                return None
            try:
                return etree.fromstring(raw, parser)
            except etree.XMLSyntaxError as exc:
                raise invalid(f"{label} is not a readable Word document: {name} is not well-formed XML ({exc}); "
                              "re-save it from Word or LibreOffice") from None

        document = parse("word/document.xml")
        doc = _Doc(_styles(parse("word/styles.xml")), _numbering(parse("word/numbering.xml")))
        footnotes, endnotes = parse("word/footnotes.xml"), parse("word/endnotes.xml")
        core = parse("docProps/core.xml")
    finally:
        archive.close()
    body = document.find(f"{W}body") if document is not None else None
    if body is None:
        raise invalid(f"{label} is not a readable Word document: it has no document body; re-save it")

    out = _Writer()
    title = None
    for block in _blocks(body, doc):
        kind, text, level = block
        if kind == "title" and title is None:
            title = text
        out.add(text, level)
    for kind, root in (("footnote", footnotes), ("endnote", endnotes)):
        for note_id, number in doc.notes[kind].items():
            note = _find_note(root, kind, note_id)
            if note is None:
                continue
            texts = [t.strip() for _, t, _ in _blocks(note, doc) if t.strip()]
            if texts:
                out.add(f"[{_mark(kind, number)}] " + " ".join(texts), None)
    text = out.text()
    if not text.strip():
        raise invalid(f"{label} is a Word document with no text; there is nothing to index")
    return Extracted(text=text, media_type=media_type(DOCX),
                     sections=tuple(out.sections), title=_core_title(core) or title, extractor=extractor_id())


class _Writer:
    """Blocks joined by newlines, headings remembered as sections where they land."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.sections: list[Section] = []

    def add(self, text: str, level: int | None) -> None:
        text = text.strip()
        if not text:
            return
        if self.parts:
            self.parts.append("\n")
            self.length += 1
        if level is not None:
            self.sections.append(Section(self.length, level, " ".join(text.split())))
        self.parts.append(text)
        self.length += len(text)

    def text(self) -> str:
        return "".join(self.parts)


def _blocks(container, doc: _Doc):
    """(kind, text, heading level or None) for each paragraph or table row, in reading order."""
    for child in container:
        tag = child.tag
        if tag == f"{W}p":
            yield _paragraph(child, doc)
        elif tag == f"{W}tbl":
            for row in child.iter(f"{W}tr"):
                cells = []
                for cell in row.iterfind(f"{W}tc"):
                    cells.append(" ".join(t for _, t, _ in _blocks(cell, doc) if t.strip()))
                if any(cells):
                    yield "row", " | ".join(cells), None
        elif tag in (f"{W}sdt", f"{W}sdtContent", f"{W}customXml", f"{W}ins", f"{W}moveTo"):
            yield from _blocks(child, doc)


def _paragraph(p, doc: _Doc) -> tuple[str, str, int | None]:
    ppr = p.find(f"{W}pPr")
    style_id = _val(ppr, "pStyle")
    style = _resolve(doc.styles, style_id)
    outline = _int(_val(ppr, "outlineLvl"))
    if outline is None:
        outline = style.outline
    pieces: list[str] = []
    _runs(p, doc, pieces)
    text = "".join(pieces)
    name = style.name.lower()
    if name == "title":
        return "title", text, None  # the document's title, not a section above the headings
    level = None
    if name.startswith("heading ") and name[8:].strip().isdigit():
        level = int(name[8:])
    elif outline is not None and 0 <= outline < 9:
        level = outline + 1
    marker = _list_marker(ppr, doc) if level is None else ""
    return "p", (marker + text) if text.strip() else text, level


def _runs(element, doc: _Doc, out: list[str]) -> None:
    for child in element:
        tag = child.tag
        if tag in _SKIP:
            continue
        if tag == f"{W}t":
            out.append(child.text or "")
            for entity in child:  # lxml leaves entity references as nodes; the text after one is its tail
                out.append(_entity_text(entity) + (entity.tail or ""))
        elif tag == f"{W}tab":
            out.append("\t")
        elif tag in (f"{W}br", f"{W}cr"):
            out.append("\n")
        elif tag == f"{W}noBreakHyphen":
            out.append("-")
        elif tag in (f"{W}footnoteReference", f"{W}endnoteReference"):
            kind = "footnote" if tag == f"{W}footnoteReference" else "endnote"
            seen = doc.notes[kind]
            note_id = child.get(f"{W}id")
            seen.setdefault(note_id, len(seen) + 1)
            out.append(f"[{_mark(kind, seen[note_id])}]")
        elif tag == f"{W}p":  # a paragraph inside a text box
            out.append(" ")
            _runs(child, doc, out)
            out.append(" ")
        elif tag in _ENTER or tag.startswith(_CONTAINERS):
            _runs(child, doc, out)


def _mark(kind: str, number: int) -> str:
    return str(number) if kind == "footnote" else _roman(number).lower()


def _find_note(root, kind: str, note_id: str):
    if root is None:
        return None
    for note in root.iterfind(f"{W}{kind}"):
        if note.get(f"{W}id") == note_id and note.get(f"{W}type") in (None, "normal"):
            return note
    return None


def _list_marker(ppr, doc: _Doc) -> str:
    num_pr = ppr.find(f"{W}numPr") if ppr is not None else None
    if num_pr is None:
        return ""
    num_id, level = _val(num_pr, "numId") or "", _int(_val(num_pr, "ilvl")) or 0
    levels = doc.numbering.get(num_id)
    if not levels or level not in levels:
        return ""
    fmt, pattern, _ = levels[level]
    doc.counters[(num_id, level)] = doc.counters.get((num_id, level), levels[level][2] - 1) + 1
    for deeper in [k for k in doc.counters if k[0] == num_id and k[1] > level]:
        del doc.counters[deeper]  # a new item restarts the numbering of its sub-lists
    if fmt == "bullet":
        return "• "
    if fmt == "none":
        return ""
    marker = pattern
    for k in range(level + 1):
        value = doc.counters.get((num_id, k), levels.get(k, ("decimal", "", 1))[2])
        marker = marker.replace(f"%{k + 1}", _format_number(levels.get(k, ("decimal",))[0], value))
    return marker.strip() + " " if marker.strip() else ""


def _format_number(fmt: str, value: int) -> str:
    if fmt == "lowerLetter":
        return chr(ord("a") + (value - 1) % 26)
    if fmt == "upperLetter":
        return chr(ord("A") + (value - 1) % 26)
    if fmt == "lowerRoman":
        return _roman(value).lower()
    if fmt == "upperRoman":
        return _roman(value)
    return str(value)


def _roman(value: int) -> str:
    out = ""
    for number, letters in ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"),
                            (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        while value >= number:
            out += letters
            value -= number
    return out


def _styles(root) -> dict[str, _Style]:
    styles: dict[str, _Style] = {}
    if root is None:
        return styles
    for style in root.iterfind(f"{W}style"):
        ppr = style.find(f"{W}pPr")
        styles[style.get(f"{W}styleId") or ""] = _Style(
            _val(style, "name") or "", _int(_val(ppr, "outlineLvl")), _val(style, "basedOn"))
    return styles


def _resolve(styles: dict[str, _Style], style_id: str | None) -> _Style:
    """A style with its outline level inherited along basedOn (cycles cut)."""
    start = styles.get(style_id or "")
    if start is None:
        return _Style()
    outline, seen, current = start.outline, {style_id}, start
    while outline is None and current.based_on and current.based_on not in seen:
        seen.add(current.based_on)
        parent = styles.get(current.based_on)
        if parent is None:
            break
        current, outline = parent, parent.outline
    return _Style(start.name, outline, start.based_on)


def _numbering(root) -> dict[str, dict[int, tuple[str, str, int]]]:
    if root is None:
        return {}
    abstract: dict[str, dict[int, tuple[str, str, int]]] = {}
    for node in root.iterfind(f"{W}abstractNum"):
        levels = {}
        for lvl in node.iterfind(f"{W}lvl"):
            levels[_int(lvl.get(f"{W}ilvl")) or 0] = (
                _val(lvl, "numFmt") or "decimal", _val(lvl, "lvlText") or "", _int(_val(lvl, "start")) or 1)
        abstract[node.get(f"{W}abstractNumId") or ""] = levels
    return {num.get(f"{W}numId") or "": abstract.get(_val(num, "abstractNumId") or "", {})
            for num in root.iterfind(f"{W}num")}


def _core_title(core) -> str | None:
    if core is None:
        return None
    node = core.find("{http://purl.org/dc/elements/1.1/}title")
    value = (node.text or "").strip() if node is not None else ""
    return value or None


def _val(parent, tag: str) -> str | None:
    if parent is None:
        return None
    node = parent.find(f"{W}{tag}")
    return None if node is None else node.get(f"{W}val")


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None
