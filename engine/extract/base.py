"""What an extractor hands back, and how a passage's provenance is read from it.

Pure data and pure functions: no parser is imported here, so the store, the
ingest and the renderers can use these without paying for any format library.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

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
