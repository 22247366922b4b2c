"""PDF: every page's text in reading order, page boundaries kept, the outline as sections.

pypdfium2 (Google's PDFium) was chosen over pypdf after measuring both on the
shared PDFs (BENCHMARKS.md, "Document extraction"): 6-12x faster, and it
marks a line-end hyphen it believes is a word break with U+0002, which lets
us join "experi-/ence" without guessing at every hyphen.

- Pages are joined with a blank line; `page_starts[i]` is where page i+1's
  text begins.
- Compatibility ligatures (U+FB00-FB06: ﬁ ﬂ ﬀ ﬃ ﬄ ﬅ ﬆ) become their letters
  (NFKC of those code points only: NFKC of everything would also rewrite
  superscripts, fractions and full-width forms that carry meaning).
- A U+0002 hyphen break is joined ("experience") unless the document itself
  writes the word with a hyphen elsewhere, or the part after the break starts
  with a capital or a digit ("Niger-Congo"): those keep their hyphen.
- Outline entries become sections, placed at their heading's line when the
  title is found on its page, else at the page's start.
- The title: the metadata's, only when it plausibly names this document (most
  of its significant words are at the top of the first page: metadata is often
  a template's or an earlier draft's, "Art in Machine Learning" on a paper
  titled "Creativity in Machine Learning"); else the first page's first line
  when it reads as a heading; else none.
- Refusals: password-protected; damaged or truncated (PDFium's reason); no
  text layer at all (a scan: fewer than `_MIN_TEXT_CHARS` letters or digits
  in the whole file, suggesting OCR); more pages than `Limits.max_pages`,
  checked before any page is read. A page that is mostly image is ingested
  with a note saying only its text is searchable.

Runs in an extraction worker process (engine/extract/pool.py).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

from ..config import ENV
from ..errors import KxError, Status, invalid
from ..formats import PDF, media_type
from .base import Extracted, Limits, Section, ocr_extractor

EXTRACTOR_VERSION = 1
PAGE_SEPARATOR = "\n\n"
# A document with fewer letters/digits than this in its whole text layer has no text layer
# to speak of (a scan, maybe with a stray page number): refuse and suggest OCR. jpeg.pdf's one
# real sentence ("A PDF with a JPEG image.", 18) is above it and is ingested with a note.
_MIN_TEXT_CHARS = 10
_IMAGE_PAGE_CHARS = 200  # a page with an image and less text than this is "mostly image"
_LIGATURES = {cp: unicodedata.normalize("NFKC", chr(cp)) for cp in range(0xFB00, 0xFB07)}
_CONTROL = {cp: None for cp in range(32) if chr(cp) not in "\n\t\x02"} | {0x7F: None, 0xFFFE: None}
_BREAK = re.compile(r"(\w+)\x02[ \t\r\n]*(\w+)")
_WORD = re.compile(r"\w+(?:-\w+)*")
_NUMBERING = re.compile(r"^(?:[IVXLCDM]+|\d+|[A-Za-z])$")

_PDFIUM_REASONS = {  # FPDF_ERR_* codes, as a user would say them
    1: "PDFium could not read it (unknown error)",
    2: "the file could not be opened",
    3: "it is damaged or truncated (its structure cannot be read)",
    5: "it uses a security handler PDFium does not support",
    6: "its page tree is damaged",
}


def extractor_id() -> str:
    import pypdfium2.version as version

    return f"pdf/pypdfium2-{version.PYPDFIUM_INFO}/{EXTRACTOR_VERSION}"


def extract_pdf(data: bytes, label: str, limits: Limits) -> Extracted:
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        code = getattr(exc, "err_code", None)
        if code == 4:  # FPDF_ERR_PASSWORD
            raise invalid(f"{label} is password-protected (an encrypted PDF); save a copy without the password "
                          "(e.g. print it to PDF) and ingest that") from None
        reason = _PDFIUM_REASONS.get(code, str(exc)) if isinstance(code, int) else str(exc)
        raise invalid(f"{label} is not a readable PDF: {reason}; re-export or re-download it") from None
    try:
        count = len(pdf)
        if count > limits.max_pages:
            raise KxError(Status.RESOURCE_EXHAUSTED,
                          f"{label} has {count:,} pages, over the {limits.max_pages:,}-page limit "
                          f"({ENV.extract_max_pages}); split it or raise the limit")
        if count == 0:
            raise invalid(f"{label} is a PDF with no pages; there is nothing to index")
        raw_pages, image_pages, sizes = [], [], []
        for index in range(count):
            page = pdf[index]
            try:
                textpage = page.get_textpage()
                raw = textpage.get_text_bounded()
                textpage.close()
                if _alnum(raw) < _IMAGE_PAGE_CHARS and _has_image(page, pdfium):
                    image_pages.append(index + 1)
                sizes.append(page.get_size())
            finally:
                page.close()
            raw_pages.append(raw)
        # pages with an image and no text to speak of are scans: read by OCR (only those: a mixed PDF keeps its
        # text layer everywhere else)
        scans = [n for n in image_pages if _alnum(raw_pages[n - 1]) < _MIN_TEXT_CHARS] if limits.ocr else []
        read = _ocr(pdf, scans, sizes, label, limits) if scans else {}
        outline = _outline(pdf)
        metadata_title = (pdf.get_metadata_dict().get("Title") or "").strip() or None
    finally:
        pdf.close()

    for number, page_read in read.items():
        raw_pages[number - 1] = page_read.text
    pages = _clean_pages(raw_pages)
    if sum(_alnum(p) for p in pages) < _MIN_TEXT_CHARS:
        if read:
            raise invalid(f"{label} has no text layer ({count} page{'s' * (count != 1)} of images, e.g. a scan) "
                          "and OCR found no text on them; there is nothing to index")
        advice = ("set ocr = auto to have kx read it by OCR" if not limits.ocr and image_pages
                  else "run it through OCR (e.g. ocrmypdf) and ingest the result")
        raise invalid(f"{label} has no text layer ({count} page{'s' * (count != 1)} of images, e.g. a scan); "
                      + advice)
    image_pages = [n for n in image_pages if n not in read]
    starts, pieces, offset = [], [], 0
    for page in pages:
        starts.append(offset)
        pieces.append(page)
        offset += len(page) + len(PAGE_SEPARATOR)
    text = PAGE_SEPARATOR.join(pieces)
    title = pick_title(metadata_title, pages[0] if pages else "")
    notes = []
    if image_pages:
        which = _page_list(image_pages)
        notes.append(f"{label}: {which} {'is' if len(image_pages) == 1 else 'are'} mostly image; only the "
                     "text layer is searchable (OCR the file to search what the images show)")
    metadata = {"pages": str(count)}
    extractor = extractor_id()
    if read:
        from . import ocr

        notes.extend(ocr.low_confidence_notes(label, read))
        extractor = ocr_extractor(extractor, ocr.ocr_id(), ocr.mean_confidence(list(read.values())))
        metadata["ocr_pages"] = _page_list(sorted(read))
    return Extracted(text=text, media_type=media_type(PDF), page_starts=tuple(starts),
                     sections=_sections(outline, text, starts), title=title, notes=tuple(notes),
                     extractor=extractor, metadata=metadata)


def _ocr(pdf, numbers: list[int], sizes: list[tuple[float, float]], label: str, limits: Limits) -> dict:
    """The OCR'd text of pages `numbers`, each rendered by PDFium at the scale its text height asks for."""
    from . import ocr

    def render(number: int, scale: float):
        page = pdf[number - 1]
        try:
            # BGR, as the models were trained on; forms and annotations drawn as a reader sees the page
            return page.render(scale=scale, may_draw_forms=True).to_numpy()[..., :3].copy()
        finally:
            page.close()

    return ocr.read_pages(render, sizes, numbers, label, limits)


_TITLE_STOPWORDS = frozenset("a an and as at by for from in into of on or the to with".split())
_HEAD_CHARS = 600   # the top of the first page, where a title is printed


def _significant(text: str) -> list[str]:
    return [w for w in re.findall(r"\w+", text.casefold()) if len(w) > 1 and w not in _TITLE_STOPWORDS]


def pick_title(metadata: str | None, first_page: str) -> str | None:
    """The metadata title when at least 80% of its significant words are at the top of the first page;
    else the first page's first line when it reads as a heading; else None."""
    head = first_page[:_HEAD_CHARS]
    if metadata:
        wanted = _significant(metadata)
        present = set(_significant(head))
        if wanted and sum(w in present for w in wanted) >= 0.8 * len(wanted):
            return " ".join(metadata.split())
    return _first_heading(head)


def _first_heading(head: str) -> str | None:
    """The first line that is not a bare page number, if it looks like a title: 2-20 words, mostly letters,
    not a sentence or a label (no final . : ; ,), no e-mail or link, not an arXiv stamp."""
    for line in head.splitlines():
        line = " ".join(line.split())
        if not line or line.isdigit():
            continue
        words = line.split()
        letters = sum(ch.isalpha() for ch in line)
        if (2 <= len(words) <= 20 and len(line) <= 150 and letters >= 0.6 * len(line.replace(" ", ""))
                and line[-1] not in ".:;," and "@" not in line and "://" not in line
                and not line.casefold().startswith("arxiv")):
            return line
        return None
    return None


def _alnum(text: str) -> int:
    return sum(ch.isalnum() for ch in text)


def _has_image(page, pdfium) -> bool:
    return any(True for _ in page.get_objects(filter=[pdfium.raw.FPDF_PAGEOBJ_IMAGE], max_depth=2))


def _clean_pages(raw_pages: list[str]) -> list[str]:
    pages = [p.replace("\r\n", "\n").replace("\r", "\n").translate(_LIGATURES).translate(_CONTROL)
             for p in raw_pages]
    # The document's own spelling decides ambiguous breaks: words seen whole, and words seen hyphenated.
    vocabulary = Counter(w.lower() for p in pages for w in _WORD.findall(p.replace("\x02", " ")))

    def join(match: re.Match) -> str:
        left, right = match.group(1), match.group(2)
        hyphenated = f"{left}-{right}".lower()
        if (left + right).lower() in vocabulary and hyphenated not in vocabulary:
            return left + right
        if hyphenated in vocabulary or right[0].isupper() or right[0].isdigit() or left[-1].isdigit():
            return f"{left}-{right}"
        return left + right

    return [_BREAK.sub(join, p).replace("\x02", "-").strip() for p in pages]


def _outline(pdf) -> list[tuple[int, str, int | None]]:
    entries = []
    try:
        for item in pdf.get_toc(max_depth=16):
            dest = item.get_dest()
            page = dest.get_index() if dest is not None else None
            title = " ".join((item.get_title() or "").split())
            if title:
                entries.append((item.level + 1, title, page))
    except Exception:  # a damaged outline costs the sections, not the document
        return entries
    return entries


def _sections(outline, text: str, starts: list[int]) -> tuple[Section, ...]:
    sections: list[Section] = []
    floor = 0
    for level, title, page in outline:
        if page is None or not 0 <= page < len(starts):
            continue
        page_start = max(starts[page], floor)
        page_end = starts[page + 1] if page + 1 < len(starts) else len(text)
        start = _find_heading(text, title, page_start, page_end)
        start = page_start if start is None else start
        sections.append(Section(start, level, title))
        floor = start
    return tuple(sections)


def _find_heading(text: str, title: str, lo: int, hi: int) -> int | None:
    """Where the outline title's heading line begins on its page (case and numbering may differ)."""
    words = re.findall(r"\w+", title)
    while len(words) > 1 and _NUMBERING.match(words[0]):
        words.pop(0)  # "III-A Google DeepDream" is printed "A. Google DeepDream"
    if not words:
        return None
    pattern = re.compile(r"\W+".join(re.escape(w) for w in words), re.IGNORECASE)
    first = None
    for found in pattern.finditer(text, lo, hi):
        line_start = max(lo, text.rfind("\n", lo, found.start()) + 1)
        if len(text[line_start:found.start()].strip()) <= 8:  # only numbering before it: the heading line
            return line_start
        first = line_start if first is None else first
    return first


def _page_list(pages: list[int]) -> str:
    if len(pages) == 1:
        return f"page {pages[0]}"
    shown = ", ".join(map(str, pages[:10])) + (", ..." if len(pages) > 10 else "")
    return f"pages {shown}"
