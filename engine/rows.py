"""A catalogue's rows, as every backend writes and reads them: the documents and passages an ingest
commits (`NewDocument`, `NewPassage`) and the stored ones a query reads back (`DocumentRow`, `PassageRow`).

The embedded catalogue (engine/embedded/store.py) keeps them in SQLite, the Milvus one
(engine/milvus/store.py) in collections; engine/ingest.py and engine/query.py see only these records.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Sequence

from .records import DocumentSummary, PassageSpan, chunk_label

REF_RE = re.compile(r"[0-9a-f]{64}")  # every stored ref: a sha256 in lowercase hex


def passage_ref(doc_ref: str, start: int, end: int) -> str:
    """A passage's content reference: its parent's bytes and where in them it lies."""
    return hashlib.sha256(f"kx-passage:{doc_ref}:{start}:{end}".encode()).hexdigest()


@dataclass(frozen=True)
class NewPassage:
    ref: str
    chunk_index: int
    chunk_count: int
    char_start: int
    char_end: int
    text: str
    page_start: int | None = None
    page_end: int | None = None
    section: str | None = None


@dataclass(frozen=True)
class NewDocument:
    ref: str
    name: str
    source_path: str | None
    media_type: str
    data: bytes
    text_length: int
    passages: Sequence[NewPassage]
    text: str | None = None         # the extracted text; stored unless it is text_of_bytes(data) already
    title: str | None = None
    page_count: int | None = None
    extractor: str | None = None
    notes: Sequence[str] = ()


@dataclass(frozen=True)
class DocumentRow:
    ref: str
    name: str
    source_path: str | None
    size: int
    media_type: str
    ingested_at: float
    text_length: int
    passage_count: int
    title: str | None = None
    page_count: int | None = None
    extractor: str | None = None
    notes: str | None = None        # JSON list, as stored

    @property
    def note_list(self) -> list[str]:
        return json.loads(self.notes) if self.notes else []

    def summary(self, backlog: int = 0) -> DocumentSummary:
        """The document as every backend lists it; `backlog`: its passages still waiting for vectors."""
        return DocumentSummary(name=self.name, ref=self.ref, media_type=self.media_type, pages=self.page_count,
                               passages=self.passage_count, ingested_at=self.ingested_at,
                               source_path=self.source_path, title=self.title, size=self.size,
                               extractor=self.extractor, notes=tuple(self.note_list), backlog=backlog)


@dataclass(frozen=True)
class PassageRow:
    seq: int
    ref: str
    doc_ref: str
    chunk_index: int
    chunk_count: int
    char_start: int
    char_end: int
    text: str
    page_start: int | None = None
    page_end: int | None = None
    section: str | None = None

    @property
    def label(self) -> str:
        return chunk_label(self.chunk_index, self.chunk_count)

    def span(self) -> PassageSpan:
        """Where the passage lies in its document's text, as every backend tells it."""
        return PassageSpan(ref=self.ref, chunk_index=self.chunk_index, chunk_count=self.chunk_count,
                           char_start=self.char_start, char_end=self.char_end, page_start=self.page_start,
                           page_end=self.page_end, section=self.section)
