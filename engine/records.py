"""The small typed records the engine hands to its callers (CLI, TUI, gateway).

Plain dataclasses with `to_dict()`, so every transport shows the same fields.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Literal, TypedDict, overload


def chunk_label(index: int, count: int) -> str:
    """`[chunk i/N]`, 1-based: how every surface names a passage's place in its document."""
    return f"[chunk {index + 1}/{count}]"


class QueryOptions(TypedDict, total=False):
    """A query's options beside its dataset and text, written once: every Backend's `query(name, text,
    **options)` takes these, and engine/query.py's `run_query` is their one definition (a unit test holds
    the two together). Whatever is not given is the settings' (over a gateway: the server's)."""

    vector: Sequence[float] | Any    # a pre-computed query vector (a list, or a numpy array)
    k: int | None
    mode: RetrievalMode | str | None
    rerank: bool | None
    where: Sequence[str] | None      # filter clauses (engine/filters.py)
    versions: str | None             # "latest" (each lineage's current version) or "all"
    expand: bool | None              # pseudo-relevance feedback (engine/expansion.py)


class RetrievalMode(StrEnum):
    """Which retrievers answer a query. A str: plain "dense" works wherever a mode goes."""

    HYBRID = "hybrid"
    DENSE = "dense"
    SPARSE = "sparse"

    @classmethod
    def parse(cls, text: object) -> RetrievalMode:
        """A mode from what a person typed ("Dense ", "SPARSE"); ValueError names the choices."""
        try:
            return cls(str(text).strip().lower())
        except ValueError:
            raise ValueError(f"expected one of {', '.join(cls)}, got {text!r}") from None

    @property
    def uses_dense(self) -> bool:
        return self is not RetrievalMode.SPARSE

    @property
    def uses_sparse(self) -> bool:
        return self is not RetrievalMode.DENSE


class VersionView(StrEnum):
    """Which stored versions a query or a listing shows: each lineage's current one, or every one."""

    LATEST = "latest"
    ALL = "all"

    @classmethod
    def parse(cls, text: object) -> VersionView:
        try:
            return cls(str(text).strip().lower())
        except ValueError:
            raise ValueError(f"versions must be one of {', '.join(cls)}, got {text!r}") from None


class DocumentStatus(StrEnum):
    """What an ingest did with one document."""

    ADDED = "added"
    UNCHANGED = "unchanged"    # the same bytes are already in the dataset
    REFUSED = "refused"        # could not be read; `code` and `reason` say why


@dataclass(frozen=True)
class DocumentResult:
    """What happened to one input document."""

    name: str
    status: DocumentStatus
    ref: str | None = None
    passages: int = 0
    source_path: str | None = None
    code: str | None = None        # status code name when refused
    reason: str | None = None      # message when refused

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Progress:
    """Long work under way.

    `stage`: "reading" (stage 1: documents read and committed; `unit` is
    "documents" and `passages` counts the passages committed so far),
    "embedding" (stage 2: passages of the backlog embedded), or "indexing
    dense"/"indexing sparse".

    `part`, `part_done`, `part_total`: in stage 1, a step on ONE large
    document that takes seconds by itself (cutting a 15 MB record into
    passages, indexing its 25,000 passages for keyword search), so its
    progress moves while `done` cannot; "" when there is none.
    """

    stage: str
    done: int
    total: int
    unit: str = "passages"
    passages: int = 0
    part: str = ""
    part_done: int = 0
    part_total: int = 0


@dataclass(frozen=True)
class Notice:
    """Something the user should read but that stops nothing (an advisory, a wait)."""

    kind: Literal["advisory", "waiting", "preparing"]
    message: str


# What an ingest, an embed or a rebuild tells its caller while it runs, one event at a time: one typed union,
# handled by isinstance (the CLI's progress bars, the TUI, the gateway's stream). A folder watcher's own events
# are engine/watch/events.py's WatchEvent.
IngestEvent = DocumentResult | Progress | Notice
IngestEventFn = Callable[[IngestEvent], None]
# A one-line message for a person while something slow runs once ("exporting ... (once)", a model loading).
NotifyFn = Callable[[str], None]


@dataclass(frozen=True)
class IngestReport:
    dataset: str
    results: list[DocumentResult]
    created: bool
    documents: int                  # the dataset's totals after the ingest
    passages: int
    advisories: list[str] = field(default_factory=list)

    def count(self, status: DocumentStatus) -> int:
        return sum(1 for r in self.results if r.status == status)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "created": self.created,
            "added": self.count(DocumentStatus.ADDED),
            "unchanged": self.count(DocumentStatus.UNCHANGED),
            "refused": self.count(DocumentStatus.REFUSED),
            "passages_added": sum(r.passages for r in self.results if r.status == DocumentStatus.ADDED),
            "documents": self.documents,
            "passages": self.passages,
            "advisories": list(self.advisories),
            "results": [r.to_dict() for r in self.results],
        }


@dataclass(frozen=True)
class DatasetSummary:
    name: str
    documents: int
    passages: int
    embed_model: str | None
    created_at: float
    fingerprint: dict[str, Any] | None
    path: str
    backlog: int = 0               # passages committed but not yet embedded
    # passages committed but not yet in the keyword index: its commit failed after the catalogue's (a full
    # disk); the next writer (or a query that can write) indexes them
    unindexed: int = 0
    versions: int | None = None    # documents stored, every version counted (`documents`: the current ones)
    retired: int = 0               # lineages retired (their files left a watched folder)
    # why this dataset cannot be read ("DATA_LOSS: ..."), set by a listing instead of failing it for every
    # dataset; its counts are then 0 and its model None, as nothing could be read. None: it reads.
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.error is None:  # a readable dataset's dict stays what it always was
            del out["error"]
        return out

    @classmethod
    def unreadable(cls, name: str, path: str, status: str, message: str) -> DatasetSummary:
        """A listing's entry for a dataset that could not be read: nothing read (zeros, no model), and why."""
        return cls(name=name, documents=0, passages=0, embed_model=None, created_at=0.0, fingerprint=None,
                   path=path, error=f"{status}: {message}")


@dataclass(frozen=True)
class EmbedReport:
    """What `embed` did: passages this call embedded, and the dataset afterwards."""

    dataset: DatasetSummary
    embedded: int

    def to_dict(self) -> dict[str, Any]:
        return {**self.dataset.to_dict(), "embedded": self.embedded}


OCR_MARK = "+ocr/"  # in an extractor id: some of the document's text was read by OCR (engine/extract/base.py)


def ocr_confidence(extractor: str | None) -> float | None:
    """The mean OCR confidence a document's extractor id records; None for a document not read by OCR."""
    if not extractor or OCR_MARK not in extractor:
        return None
    _, _, value = extractor.partition(";confidence=")
    try:
        return float(value)
    except ValueError:
        return 0.0


def pages_label(page_start: int | None, page_end: int | None) -> str | None:
    """"p. 6" or "p. 6–7"; None for a passage from a format without pages."""
    if page_start is None:
        return None
    if page_end is None or page_end == page_start:
        return f"p. {page_start}"
    return f"p. {page_start}–{page_end}"


def provenance_label(page_start: int | None, page_end: int | None, section: str | None) -> str:
    """Where a passage lies, as a reader says it: "p. 6–7 · 3 Model › 3.1 LRS model"; "" when nothing is known."""
    return " · ".join(part for part in (pages_label(page_start, page_end), section) if part)


@dataclass(frozen=True)
class Hit:
    """One passage in a query's answer, with everything needed to explain its place."""

    rank: int
    score: float                   # the mode's relevance: fused RRF (hybrid), cosine (dense), BM25 (sparse)
    text: str
    passage_ref: str
    document_ref: str
    document_name: str
    chunk_index: int
    chunk_count: int
    char_start: int
    char_end: int
    dense_rank: int | None         # None: not in the dense list
    dense_score: float | None
    sparse_rank: int | None        # None: not in the sparse list
    sparse_score: float | None
    fused_score: float             # RRF: sum of 1 / (K + rank) over the lists it is in (dense, sparse, sentence, lead)
    fused_rank: int                # position before MMR
    mmr_moved: int                 # fused_rank - rank: > 0 MMR moved it up, < 0 down, 0 untouched
    duplicate_of: str | None = None  # MMR: the passage ref of a higher hit this one nearly repeats
    page_start: int | None = None  # 1-based pages the passage spans; None for formats without pages
    page_end: int | None = None
    section: str | None = None     # heading path at the passage's start; None when no heading precedes it
    document_title: str | None = None  # the document's own title (PDF metadata, front matter, <title>)
    source_path: str | None = None     # the file the document was read from, when it came from one
    # the sentence or two of the passage that best answer the query: [start, end) in the document's text
    # (engine/text/answer_span.py); None without query text
    answer_span: tuple[int, int] | None = None
    version: int | None = None         # which version of its lineage (1 = first ingested); None: not tracked
    superseded_by: str | None = None   # the ref of the lineage's current version, when this is an older one
    # hybrid's third list (engine/ranking.py, SENTENCE_DEPTH): the passage's rank among the fused head by its
    # best sentence, and that sentence's score; None outside the head or in a single-retriever mode
    sentence_rank: int | None = None
    sentence_score: float | None = None
    # hybrid's lead vote (engine/ranking.py, LEAD_RATIO): set on sparse's best passage when its BM25 score is at
    # least 1.4 times the runner-up's (this is that ratio); RRF then counts it once more, at rank 1
    lead_ratio: float | None = None
    # the passage's document was (partly) read by OCR, and the mean confidence of that reading
    ocr: bool = False
    ocr_confidence: float | None = None

    @property
    def label(self) -> str:
        return chunk_label(self.chunk_index, self.chunk_count)

    @property
    def provenance(self) -> str:
        """"p. 6–7 · 3 Model › 3.1 LRS model", or "" for a passage with neither pages nor a section."""
        return provenance_label(self.page_start, self.page_end, self.section)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["chunk"] = self.label
        if self.answer_span is not None:
            data["answer_span"] = list(self.answer_span)  # what JSON, the gateway and the SDK carry
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Hit:
        """The hit `to_dict()` gave (its derived fields, such as `chunk`, and unknown ones left out)."""
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if fields.get("answer_span") is not None:
            fields["answer_span"] = tuple(fields["answer_span"])
        return cls(**fields)


@dataclass(frozen=True)
class DocumentSummary:
    """One document of a dataset, as `kx datasets documents` and the TUI's browser list it."""

    name: str
    ref: str                       # sha256 of its bytes
    media_type: str
    pages: int | None              # None when the format has no pages (or the catalogue predates them)
    passages: int
    ingested_at: float
    source_path: str | None
    title: str | None = None
    size: int = 0                  # bytes
    extractor: str | None = None   # which reader made its text ("pdf:pypdfium2 ...", "text"); None before schema 2
    notes: tuple[str, ...] = ()    # what the extractor could not do ("page 3: no text layer")
    backlog: int = 0               # passages still waiting for their vectors (stage 2 of the ingest)
    version: int = 1               # which version of its lineage (its name), 1 = the first ingested
    superseded_by: str | None = None  # the ref of the lineage's current version, when this is an older one
    retired: bool = False          # its file left the watched folder: no version of it answers by default

    @property
    def ocr_confidence(self) -> float | None:
        """The mean confidence of the OCR that read (some of) it; None when it was not read by OCR."""
        return ocr_confidence(self.extractor)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        data["ocr"] = self.ocr_confidence is not None
        data["ocr_confidence"] = self.ocr_confidence
        return data


@dataclass(frozen=True)
class PassageSpan:
    """Where one passage lies in its document's text (no text: slice the document's)."""

    ref: str
    chunk_index: int
    chunk_count: int
    char_start: int
    char_end: int
    page_start: int | None = None
    page_end: int | None = None
    section: str | None = None

    @property
    def label(self) -> str:
        return chunk_label(self.chunk_index, self.chunk_count)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class QueryResult(Sequence[Hit]):
    """A query's answer. It is also the sequence of its hits: `len(r)`, `r[0]`, `for hit in r`.

    As a sequence it is falsy when nothing matched; test `is None` for "no answer yet".
    """

    dataset: str
    query: str | None
    mode: RetrievalMode
    rerank: bool
    k: int                         # hits asked for, after clamping
    requested_k: int
    hits: list[Hit]
    notes: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    # The share of the dataset's passages that dense search covered: below 1 while the embedding stage
    # of an ingest is still working through the backlog (sparse always covers every committed passage).
    dense_coverage: float = 1.0
    # With --expand (engine/expansion.py): the terms the first pass's top passages added to the sparse query,
    # best first ([] when none was added); None when the query was not expanded.
    expanded_terms: list[str] | None = None

    @property
    def clamped(self) -> bool:
        return self.k != self.requested_k

    def __len__(self) -> int:
        return len(self.hits)

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    @overload
    def __getitem__(self, index: int) -> Hit: ...

    @overload
    def __getitem__(self, index: slice) -> list[Hit]: ...

    def __getitem__(self, index: int | slice) -> Hit | list[Hit]:
        return self.hits[index]

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "query": self.query,
            "mode": self.mode,
            "rerank": self.rerank,
            "k": self.k,
            "requested_k": self.requested_k,
            "clamped": self.clamped,
            "notes": list(self.notes),
            "timings_ms": dict(self.timings_ms),
            "dense_coverage": self.dense_coverage,
            "expanded_terms": self.expanded_terms,
            "hits": [h.to_dict() for h in self.hits],
        }
