"""What an extractor hands back, and how a passage's provenance is read from it.

Pure data and pure functions: no parser is imported here, so the store, the
ingest and the renderers can use these without paying for any format library.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Callable

SECTION_SEPARATOR = " › "


@dataclass(frozen=True)
class Section:
    """A heading: where it begins in the extracted text, its level (1 = top) and its title."""

    start: int
    level: int
    title: str


@dataclass(frozen=True)
class Extracted:
    """A document as text plus the structure needed for provenance.

    `page_starts[i]` is the character offset where page i+1 begins (None for
    formats without pages); `sections` ascend by `start`. `notes` are things
    the user should be told in the ingest result (e.g. a fallback taken).
    `extractor` names the extractor and its version, recorded per document.
    """

    text: str
    media_type: str
    page_starts: tuple[int, ...] | None = None
    sections: tuple[Section, ...] = ()
    title: str | None = None
    notes: tuple[str, ...] = ()
    extractor: str = ""
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def page_count(self) -> int | None:
        return None if self.page_starts is None else len(self.page_starts)


@dataclass(frozen=True)
class Limits:
    """What one document may cost an extractor before it is refused (from Settings)."""

    max_pages: int = 10_000
    max_unpacked_bytes: int = 256 * 2**20  # what an archive format (DOCX, EPUB) may inflate to
    ocr: bool = True        # read scanned pages and images with OCR (setting `ocr`); False: refuse them
    ocr_threads: int = 1    # ONNX Runtime threads one worker's OCR may use (the cores shared among workers)
    timeout: float = 60.0   # the job's deadline (extract_timeout): OCR refuses early a scan it cannot finish


def page_span(page_starts: tuple[int, ...] | list[int] | None, start: int, end: int) -> tuple[int | None, int | None]:
    """1-based first and last page of the characters [start, end); (None, None) without pages."""
    if not page_starts:
        return None, None
    first = max(1, bisect.bisect_right(page_starts, start))
    last = max(first, bisect.bisect_right(page_starts, max(start, end - 1)))
    return first, last


def section_path(sections: tuple[Section, ...] | list[Section], offset: int) -> str | None:
    """The heading path in force at `offset` ("3 Model › 3.1 LRS model"), None when no heading precedes it."""
    stack: list[Section] = []
    for section in sections:
        if section.start > offset:
            break
        while stack and stack[-1].level >= section.level:
            stack.pop()
        stack.append(section)
    return SECTION_SEPARATOR.join(s.title for s in stack) if stack else None


def ocr_extractor(reader: str, engine: str, confidence: float) -> str:
    """The extractor id of a document (some of) whose text was read by OCR, with its mean confidence
    ("pdf/pypdfium2-.../1+ocr/rapidocr-1.4.4/PP-OCRv4;confidence=0.973"; records.ocr_confidence reads it)."""
    return f"{reader}+{engine};confidence={confidence:.3f}"


_reporter: Callable[[str, int, int], None] | None = None


def report(message: str, done: int, total: int) -> None:
    """Tell whoever runs this extraction how it is going ("reading scan.pdf: OCR page 3/12", 2 of 12 done); the
    worker process forwards it to the parent's progress display, and outside a worker it goes nowhere."""
    if _reporter is not None:
        _reporter(message, done, total)


def set_reporter(reporter: Callable[[str, int, int], None] | None) -> None:
    global _reporter
    _reporter = reporter
