"""The small typed records the engine hands to its callers (CLI, TUI, gateway).

Plain dataclasses with `to_dict()`, so every transport shows the same fields.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Annotated, Any, Literal, TypedDict, get_args, get_origin, get_type_hints, overload


def chunk_label(index: int, count: int) -> str:
    """`[chunk i/N]`, 1-based: how every surface names a passage's place in its document."""
    return f"[chunk {index + 1}/{count}]"


@dataclass(frozen=True)
class Doc:
    """A field's one description, in `Annotated[type, Doc(...)]`: every door that documents the field shows it
    (the gateway's OpenAPI and so the TypeScript SDK's types, MCP's `search` schema, the CLI's --help). A
    query option's text names a setting as {its_field} (config.option_help writes its environment name).

    `default`: the setting (a `Settings` field) an absent query option takes, named by each door from the
    settings' own declaration. `programs_only`: an option no person or model types (a pre-computed vector),
    offered by the SDKs and the HTTP API but not by the CLI or MCP.
    """

    text: str
    default: str | None = None
    programs_only: bool = False


def described(record: type) -> dict[str, tuple[Any, Doc | None]]:
    """Each field of a TypedDict or a dataclass: its type (the `Annotated` unwrapped) and its `Doc`, if any."""
    out: dict[str, tuple[Any, Doc | None]] = {}
    for name, hint in get_type_hints(record, include_extras=True).items():
        kind, doc = hint, None
        if get_origin(hint) is Annotated:
            kind, *extras = get_args(hint)
            doc = next((e for e in extras if isinstance(e, Doc)), None)
        out[name] = (kind, doc)
    return out


class QueryOptions(TypedDict, total=False):
    """A query's options beside its dataset and text, declared once: every Backend's `query(name, text,
    **options)` takes these, and engine/query.py's `run_query` is their one definition (a unit test holds
    the two together). The gateway's `QueryIn`, MCP's `search`, the CLI's query options and the TypeScript
    SDK's `QueryOptions` are derived from them (engine/server/schema.py, mcp_server.py, kx_tui/cli/query_options.py).
    Whatever is not given is the settings' (over a gateway: the server's)."""

    vector: Annotated[Sequence[float] | Any, Doc(
        "A pre-computed query embedding (searches dense; with text, it stands in for the text's own).",
        programs_only=True)]
    k: Annotated[int | None, Doc("How many passages to return (clamped to the operator's {max_k}).",
                                 default="default_k")]
    mode: Annotated[RetrievalMode | str | None, Doc(
        "Which retrievers answer: hybrid (meaning and exact words fused), dense (meaning) or sparse (BM25: "
        "exact words, names, codes).", default="default_mode")]
    rerank: Annotated[bool | None, Doc("The MMR pass that keeps near-duplicate passages apart.", default="rerank")]
    where: Annotated[Sequence[str] | None, Doc(  # engine/filters.py
        "Filters, all of which must hold (two of one kind: either): name:GLOB (document name or source path), "
        "type:pdf, after:YYYY-MM-DD, before:YYYY-MM-DD (a calendar day), pages:A-B (1 <= A <= B), "
        "ref:REF[,REF] (6 to 64 hex digits), ocr:yes or ocr:no (not both). Applied inside both retrievers, "
        "before fusion: k hits still come back when k matching passages exist.")]
    versions: Annotated[str | None, Doc(
        "latest (the default): each document's current version only; all: every stored version, superseded "
        "and retired ones too.")]
    expand: Annotated[bool | None, Doc(  # engine/expansion.py
        "Expand the query from a first pass's top passages: RM3 terms for the sparse "
        "list, a Rocchio-moved vector for the dense list; the added terms are in the answer.",
        default="query_expansion")]


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
    """One passage of an answer: where it lies (chunk, characters, pages, section) and why it ranks where it does.

    Each field's `Doc` is its one description: the gateway's `HitOut` (engine/server/schema.py) is derived
    from these fields, and the TypeScript SDK's `Hit` from that.
    """

    rank: Annotated[int, Doc("Its place in the answer, from 1.")]
    score: Annotated[float, Doc(
        "The mode's relevance: fused RRF (hybrid), cosine (dense; a passage of a document longer than 8 "
        "passages less its long-document correction) or BM25 (sparse).")]
    text: str
    passage_ref: str
    document_ref: str
    document_name: Annotated[str, Doc("A watched folder's documents are named by their path in it (guide/index); "
                                      "a file's by its name without extension.")]
    chunk_index: Annotated[int, Doc("The passage's place in its document, from 0 (`chunk` counts from 1).")]
    chunk_count: int
    char_start: Annotated[int, Doc("Where the passage begins in the document's stored text.")]
    char_end: int
    dense_rank: Annotated[int | None, Doc("Its rank in the dense list; null: not in it.")]
    dense_score: float | None
    sparse_rank: Annotated[int | None, Doc("Its rank in the sparse (BM25) list; null: not in it.")]
    sparse_score: float | None
    fused_score: Annotated[float, Doc(
        "RRF: the sum of 1 / (K + rank) over the lists it is in (dense, sparse, sentence, lead).")]
    fused_rank: Annotated[int, Doc("Its place before MMR.")]
    mmr_moved: Annotated[int, Doc("fused_rank - rank: > 0 MMR moved it up, < 0 down, 0 untouched.")]
    duplicate_of: Annotated[str | None, Doc(
        "MMR: the passage ref of a higher hit this one nearly repeats, else null.")] = None
    page_start: Annotated[int | None, Doc("First page of the passage (1-based); null without pages.")] = None
    page_end: Annotated[int | None, Doc("Last page of the passage; null without pages.")] = None
    section: Annotated[str | None, Doc('Heading path at the passage\'s start, e.g. "3 Model › 3.1 LRS model"; '
                                       "null when no heading precedes it.")] = None
    document_title: Annotated[str | None, Doc(
        "The document's own title (PDF metadata, front matter, <title>), if any.")] = None
    source_path: Annotated[str | None, Doc("The file the document was read from, if it came from one.")] = None
    answer_span: Annotated[tuple[int, int] | None, Doc(
        "[start, end) in the document's text of the sentence or two of the passage that best answer the query "
        "(engine/text/answer_span.py); null without query text.")] = None
    version: Annotated[int | None, Doc(
        "Which version of its lineage (1 = first ingested); null: not tracked.")] = None
    superseded_by: Annotated[str | None, Doc(
        "The ref of the lineage's current version when this hit is from an older one (versions=all).")] = None
    sentence_rank: Annotated[int | None, Doc(
        "Hybrid's third list (engine/ranking.py, SENTENCE_DEPTH): the passage's rank among the best fused "
        "passages by its best sentence; null outside that head or in a single-retriever mode.")] = None
    sentence_score: Annotated[float | None, Doc("Hybrid: that best sentence's score.")] = None
    lead_ratio: Annotated[float | None, Doc(
        "Hybrid's lead vote (engine/ranking.py): set on sparse's best passage when its BM25 score is at least "
        "LEAD_RATIO times the runner-up's (this is that ratio); RRF then counts it once more, at rank 1.")] = None
    ocr: Annotated[bool, Doc("The passage's document was (partly) read by OCR (a scan or an image): its text "
                             "may hold misread words.")] = False
    ocr_confidence: Annotated[float | None, Doc(
        "That OCR's mean confidence (0-1); null when the document was not read by OCR.")] = None

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
    k: Annotated[int, Doc("Hits asked for, after clamping to the operator's maximum.")]
    requested_k: int
    hits: list[Hit]
    notes: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    dense_coverage: Annotated[float, Doc(
        "Share of the dataset's passages dense search covered: below 1 while an ingest's embedding stage is "
        "still working through its backlog (sparse covers every committed passage).")] = 1.0
    expanded_terms: Annotated[list[str] | None, Doc(  # engine/expansion.py
        "With expand: the terms the first pass's top passages added to the sparse query, best first ([] when "
        "none was added); null when the query was not expanded.")] = None

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

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QueryResult:
        """The answer `to_dict()` gave, by field name (derived fields, such as `clamped`, and unknown ones a
        newer server sends left out; a field an older one lacks takes its default)."""
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["mode"] = RetrievalMode(fields["mode"])
        fields["hits"] = [Hit.from_dict(h) for h in fields["hits"]]
        return cls(**fields)
