"""Slides (PowerPoint .pptx): each slide a page, its title the section, its speaker notes after it, marked.

The package's XML is read with lxml straight from the bomb-checked ZIP
(engine/extract/zipsafe.py), as the DOCX reader does: no entity is resolved,
nothing outside the archive is opened (a linked picture or an external
hyperlink stays a name), and every member read counts against
`Limits.max_unpacked_bytes`.

- Slides in the presentation's order (its slide list, not file names);
  hidden slides included (they are in the file a reader is sent).
- A slide's text: its shapes in document order (groups entered), each
  paragraph a line, a table's row a line with its cells joined by " | ".
- The title placeholder's text is the slide's section (level 1); a slide
  without one has no section of its own.
- Speaker notes follow the slide's text as "Notes: ...".

Runs in an extraction worker process (engine/extract/pool.py).
"""

from __future__ import annotations

from ..config import ENV
from ..errors import invalid
from ..formats import PPTX, media_type
from .base import Extracted, Limits, Section
from .ooxml import Package

EXTRACTOR_VERSION = 1
PAGE_SEPARATOR = "\n\n"
NOTES_MARK = "Notes: "
_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_NOTES_TYPE = "/notesSlide"
_TITLES = ("title", "ctrTitle")


def extractor_id() -> str:
    from lxml import etree

    return f"pptx/lxml-{'.'.join(map(str, etree.LXML_VERSION[:3]))}/{EXTRACTOR_VERSION}"


def extract_pptx(data: bytes, label: str, limits: Limits) -> Extracted:
    package = Package(data, label, "PowerPoint presentation", limits)
    try:
        presentation = package.main_part("ppt/presentation.xml", "PowerPoint")
        rels = package.relations("ppt/presentation.xml")
        slides = [rels[sid.get(f"{_R}id", "")][1] for sid in presentation.iter(f"{_P}sldId")
                  if sid.get(f"{_R}id", "") in rels and not rels[sid.get(f"{_R}id", "")][2]]
        if len(slides) > limits.max_pages:
            from ..errors import KxError, Status

            raise KxError(Status.RESOURCE_EXHAUSTED, f"{label} has {len(slides):,} slides, over the "
                          f"{limits.max_pages:,}-page limit ({ENV.extract_max_pages}); split it or raise the limit")
        pages, titles = [], []
        for path in slides:
            title, text = _slide(package, path)
            pages.append(text)
            titles.append(title)
    finally:
        package.close()
    if not any(p.strip() for p in pages):
        raise invalid(f"{label} is a presentation with no text on its {len(pages)} slide(s); there is nothing "
                      "to index")
    starts, sections, offset = [], [], 0
    for text, title in zip(pages, titles):
        starts.append(offset)
        if title:
            sections.append(Section(offset, 1, title))
        offset += len(text) + len(PAGE_SEPARATOR)
    first_title = next((t for t in titles if t), None)
    return Extracted(text=PAGE_SEPARATOR.join(pages), media_type=media_type(PPTX), page_starts=tuple(starts),
                     sections=tuple(sections), title=first_title, extractor=extractor_id(),
                     metadata={"pages": str(len(pages))})



def _slide(package: Package, path: str) -> tuple[str | None, str]:
    root = package.xml(path)
    if root is None:
        return None, ""
    title, lines = _shapes_text(root)
    notes_path = next((target for kind, target, external in package.relations(path).values()
                       if kind.endswith(_NOTES_TYPE) and not external), None)
    if notes_path:
        notes = package.xml(notes_path)
        if notes is not None:
            text = " ".join(line for line in _shapes_text(notes, only_body=True)[1] if line)
            if text:
                lines.append(NOTES_MARK + text)
    return title, "\n".join(line for line in lines if line)


def _shapes_text(root, only_body: bool = False) -> tuple[str | None, list[str]]:
    """(the title placeholder's text, every line of text) of a slide or notes page, in document order."""
    title = None
    lines: list[str] = []
    for shape in root.iter(f"{_P}sp", f"{_A}tbl"):
        if shape.tag == f"{_A}tbl":
            for row in shape.iter(f"{_A}tr"):
                cells = [" ".join(_paragraphs(cell)) for cell in row.iter(f"{_A}tc")]
                lines.append(" | ".join(c for c in cells if c))
            continue
        placeholder = shape.find(f"{_P}nvSpPr/{_P}nvPr/{_P}ph")
        kind = placeholder.get("type", "body") if placeholder is not None else None
        if only_body and kind not in ("body", None):
            continue  # a notes page's slide image, number, header and footer
        body = shape.find(f"{_P}txBody")
        if body is None:
            continue
        paragraphs = _paragraphs(body)
        if kind in _TITLES and title is None and paragraphs:
            title = " ".join(" ".join(paragraphs).split())
        lines.extend(paragraphs)
    return title, lines


def _paragraphs(element) -> list[str]:
    out = []
    for paragraph in element.iter(f"{_A}p"):
        parts = []
        for node in paragraph.iter(f"{_A}t", f"{_A}br"):
            parts.append("\n" if node.tag == f"{_A}br" else (node.text or ""))
        text = "".join(parts).strip()
        if text:
            out.append(text)
    return out
