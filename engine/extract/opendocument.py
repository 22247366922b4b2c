"""OpenDocument text (.odt) and presentations (.odp), as the Word and PowerPoint readers read theirs.

content.xml is read with lxml from the bomb-checked ZIP (no entities, no
network, every member counted against `Limits.max_unpacked_bytes`).

- .odt: headings (text:h, with their outline level) become sections;
  paragraphs, list items and table rows (cells joined by " | ") in document
  order; tracked deletions and notes' citations left out, a note's body kept
  where it is anchored; text:s/text:tab/text:line-break as the spaces,
  tabs and line ends they stand for.
- .odp: each draw:page a page; the frame whose class is "title" is the
  section; speaker notes (presentation:notes) follow, marked "Notes: ".

Runs in an extraction worker process (engine/extract/pool.py).
"""

from __future__ import annotations

from ..config import ENV
from ..errors import invalid
from ..formats import ODP, ODT, media_type
from .base import Extracted, Limits, Section
from .slides import NOTES_MARK, PAGE_SEPARATOR
from .zipsafe import SafeZip

EXTRACTOR_VERSION = 1
_T = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_DRAW = "{urn:oasis:names:tc:opendocument:xmlns:drawing:1.0}"
_PRES = "{urn:oasis:names:tc:opendocument:xmlns:presentation:1.0}"
_SKIP = {f"{_T}tracked-changes", f"{_T}note-citation", f"{_T}bookmark-ref"}


def extractor_id() -> str:
    from lxml import etree

    return f"odf/lxml-{'.'.join(map(str, etree.LXML_VERSION[:3]))}/{EXTRACTOR_VERSION}"


def _content(data: bytes, label: str, kind: str, limits: Limits):
    from lxml import etree

    archive = SafeZip(data, label, kind, limits)
    try:
        raw = archive.read("content.xml")
    finally:
        archive.close()
    if raw is None:
        raise invalid(f"{label} is not a readable {kind}: it has no content.xml; re-save it from LibreOffice")
    try:
        return etree.fromstring(raw, etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False))
    except etree.XMLSyntaxError as exc:
        raise invalid(f"{label} is not a readable {kind}: content.xml is not well-formed XML ({exc}); "
                      "re-save it from LibreOffice") from None


def inline_text(element) -> str:
    """An ODF paragraph's text: spans entered, spaces/tabs/breaks as they read, skipped parts left out."""
    parts: list[str] = [element.text or ""]
    for child in element:
        tag = child.tag
        if tag in _SKIP:
            pass
        elif tag == f"{_T}s":
            parts.append(" " * int(child.get(f"{_T}c", "1") or 1))
        elif tag == f"{_T}tab":
            parts.append("\t")
        elif tag == f"{_T}line-break":
            parts.append("\n")
        elif tag == f"{_T}note":
            body = child.find(f"{_T}note-body")
            if body is not None:
                parts.append(" (" + " ".join(inline_text(p) for p in body.iter(f"{_T}p")) + ")")
        else:
            parts.append(inline_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def extract_odt(data: bytes, label: str, limits: Limits) -> Extracted:
    root = _content(data, label, "OpenDocument text", limits)
    body = root.find(".//{urn:oasis:names:tc:opendocument:xmlns:office:1.0}text")
    lines: list[str] = []
    sections: list[Section] = []
    offset = 0

    def add(line: str, heading: int | None = None) -> None:
        nonlocal offset
        line = line.strip()
        if not line:
            return
        if heading is not None:
            sections.append(Section(offset, heading, " ".join(line.split())))
        lines.append(line)
        offset += len(line) + 2

    def walk(element) -> None:
        for child in element:
            if child.tag == f"{_T}h":
                add(inline_text(child), int(child.get(f"{_T}outline-level", "1") or 1))
            elif child.tag == f"{_T}p":
                add(inline_text(child))
            elif child.tag == f"{_TABLE}table-row":
                add(" | ".join(c for c in (" ".join(inline_text(p) for p in cell.iter(f"{_T}p")).strip()
                                           for cell in child.iter(f"{_TABLE}table-cell")) if c))
            elif child.tag not in _SKIP:
                walk(child)

    if body is not None:
        walk(body)
    if not lines:
        raise invalid(f"{label} is an OpenDocument text with no text; there is nothing to index")
    title = next((s.title for s in sections if s.level == 1), None)
    return Extracted(text="\n\n".join(lines), media_type=media_type(ODT), sections=tuple(sections), title=title,
                     extractor=extractor_id())


def extract_odp(data: bytes, label: str, limits: Limits) -> Extracted:
    root = _content(data, label, "OpenDocument presentation", limits)
    pages, titles = [], []
    for page in root.iter(f"{_DRAW}page"):
        title = None
        lines = []
        notes = []
        for frame in page.iter(f"{_DRAW}frame"):
            in_notes = any(a.tag == f"{_PRES}notes" for a in frame.iterancestors())
            text = "\n".join(t for t in (inline_text(p).strip() for p in frame.iter(f"{_T}p")) if t)
            if not text:
                continue
            if in_notes:
                notes.append(" ".join(text.split()))
            else:
                if frame.get(f"{_PRES}class") == "title" and title is None:
                    title = " ".join(text.split())
                lines.append(text)
        if notes:
            lines.append(NOTES_MARK + " ".join(notes))
        pages.append("\n".join(lines))
        titles.append(title)
    if len(pages) > limits.max_pages:
        from ..errors import KxError, Status

        raise KxError(Status.RESOURCE_EXHAUSTED, f"{label} has {len(pages):,} slides, over the "
                      f"{limits.max_pages:,}-page limit ({ENV.extract_max_pages}); split it or raise the limit")
    if not any(p.strip() for p in pages):
        raise invalid(f"{label} is a presentation with no text on its {len(pages)} slide(s); there is nothing "
                      "to index")
    starts, sections, offset = [], [], 0
    for text, title in zip(pages, titles):
        starts.append(offset)
        if title:
            sections.append(Section(offset, 1, title))
        offset += len(text) + len(PAGE_SEPARATOR)
    return Extracted(text=PAGE_SEPARATOR.join(pages), media_type=media_type(ODP), page_starts=tuple(starts),
                     sections=tuple(sections), title=next((t for t in titles if t), None),
                     extractor=extractor_id(), metadata={"pages": str(len(pages))})
