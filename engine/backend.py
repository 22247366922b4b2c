"""The one interface the CLI and the TUI talk to, whatever the transport.

`Engine` answers in-process; `KxClient` answers through `kx serve`. Both hand
back the same records (engine/records.py) and raise the same `KxError`, so a
caller written against `Backend` cannot tell which one it holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Protocol, Sequence, runtime_checkable

from .errors import KxError, invalid, not_found
from .records import (
    DatasetSummary,
    DocumentSummary,
    EmbedReport,
    IngestReport,
    PassageSpan,
    QueryOptions,
    QueryResult,
)
from .records import IngestEventFn as EventFn
from .text.inputs import DocumentInput

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .agent_run import AgentRun, Step
    from .config import Settings
    from .embedding.host import ModelHost

MAX_DOCUMENTS_PAGE = 1000  # documents per list_documents call; page with `offset` for more
# The largest whole number every JSON parser reads exactly (2**53 - 1), well inside SQLite's INTEGER: a larger
# offset is refused here, never an OverflowError there (and a schema's bound that a double cannot hold exactly
# lets generators send numbers just past it)
MAX_OFFSET = 2**53 - 1
# The longest query text taken. The model reads a query's first 256 word pieces and sparse its
# MAX_QUERY_TERMS rarest terms, but analysing the words and scoring the answer sentences grow with the
# text: 2 million characters held a gateway worker for 21 s. 100,000 characters (a pasted chapter, which
# tests/test_query.py keeps answerable) answer in about a second. The gateway's schema states it too.
MAX_QUERY_CHARS = 100_000


def no_document(name: str, doc_ref: str) -> KxError:
    """NOT_FOUND for a document ref not in dataset `name`, saying where the refs are; a ref that is not a full
    sha256 (a prefix, a name) is told so, since these routes take only the full ref."""
    listing = f"`kx datasets documents {name} --json` lists each document's ref"
    if not (isinstance(doc_ref, str) and len(doc_ref) == 64 and all(c in "0123456789abcdefABCDEF" for c in doc_ref)):
        shown = repr(doc_ref)[:70] if isinstance(doc_ref, str) else type(doc_ref).__name__
        return not_found(f"{shown} is not a document ref of dataset '{name}': a ref is the document's full "
                         f"sha256 (64 hex digits, a prefix is not enough); {listing}")
    return not_found(f"document {doc_ref[:12]} is not in dataset '{name}'; {listing}")


class ListsDocuments(Protocol):
    """Anything that pages through a dataset's documents: a Backend, or the watcher's narrower IngestBackend."""

    def list_documents(self, name: str, offset: int = 0, limit: int = 100,
                       versions: str | None = None) -> list[DocumentSummary]: ...


def every_document(backend: ListsDocuments, name: str) -> Iterator[DocumentSummary]:
    """Every current document of dataset `name`, in ingest order, read a full page (MAX_DOCUMENTS_PAGE) at a time."""
    offset = 0
    while True:
        page = backend.list_documents(name, offset, MAX_DOCUMENTS_PAGE)
        yield from page
        if len(page) < MAX_DOCUMENTS_PAGE:
            return
        offset += len(page)


def check_page(offset: int, limit: int) -> None:
    """INVALID_ARGUMENT unless 0 <= `offset` <= MAX_OFFSET and 1 <= `limit` <= MAX_DOCUMENTS_PAGE (whole numbers)."""
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= MAX_OFFSET:
        shown = repr(offset) if len(repr(offset)) <= 40 else f"{repr(offset)[:20]}... ({len(str(offset))} digits)"
        raise invalid(f"offset must be a whole number from 0 to {MAX_OFFSET:,}, got {shown}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_DOCUMENTS_PAGE:
        raise invalid(f"limit must be a whole number from 1 to {MAX_DOCUMENTS_PAGE}, got {limit!r}; "
                      "page through more with offset")


def backend_info(settings: Settings, models: ModelHost, datasets: int | None,
                 backend: dict[str, Any]) -> dict[str, Any]:
    """`kx info`'s answer, as every in-process backend gives it: `datasets` and `backend` are the backend's."""
    from .version import __version__  # importlib.metadata: only `kx info` pays for it

    model, advisories = models.describe()
    return {
        "version": __version__,
        "home": str(settings.home),
        "config_file": str(settings.config_path),
        "config_file_exists": settings.config_path.exists(),
        "datasets": datasets,
        "backend": backend,
        "embed_model": model,
        "ocr": ocr_info(settings),
        "advisories": advisories,
        "settings": settings.describe(),
    }


def ocr_info(settings: Settings) -> dict[str, Any]:
    """What reads scans and images: the setting, and the OCR engine and models (read from the package's metadata:
    the engine itself is imported only by an extraction worker)."""
    from .extract.ocr import version

    return {"setting": str(settings.ocr), "engine": version()}


@runtime_checkable
class Backend(Protocol):
    def list_datasets(self) -> list[DatasetSummary]: ...

    def dataset_summary(self, name: str) -> DatasetSummary: ...

    def info(self) -> dict[str, Any]: ...

    def document_text(self, name: str, doc_ref: str) -> str: ...

    def list_documents(self, name: str, offset: int = 0, limit: int = 100,
                       versions: str | None = None) -> list[DocumentSummary]:
        """Dataset `name`'s documents in ingest order: at most `limit` (1..1000), skipping `offset`.

        `versions`: "latest" (default) lists each lineage's current version;
        "all" every stored one, retired lineages' included, each with its
        `version`, `superseded_by` and `retired`.

        An empty list past the end; NOT_FOUND for an unknown dataset,
        INVALID_ARGUMENT for a bad offset or limit.
        """
        ...

    def document_passages(self, name: str, doc_ref: str) -> list[PassageSpan]:
        """Where each passage of document `doc_ref` lies in `document_text(name, doc_ref)`, in chunk order."""
        ...

    def warm_up(self, dataset: str | None = None, notify: Callable[[str], None] | None = None) -> bool:
        """Make the first query fast by loading now what it would otherwise load.

        `notify` hears one-off progress lines (the model's first-use ONNX export).

        Without `dataset`: the embedding model (a model that cannot load
        raises its KxError, as a query would). With one: that dataset's
        indexes, opened for reading. Returns True when something was loaded
        here; False when there is nothing to load (no model, or a gateway,
        which loads its own).
        """
        ...

    def ingest(
        self,
        name: str,
        documents: Iterable[DocumentInput],
        vectors: Sequence[Sequence[float]] | Any | None = None,
        on_event: EventFn | None = None,
    ) -> IngestReport: ...

    def embed(self, name: str, on_event: EventFn | None = None) -> EmbedReport:
        """Finish the dataset's embedding backlog (passages committed by an ingest that stopped before
        embedding them); how many this call embedded. A no-op where the backend embeds before it commits."""
        ...

    def query(self, name: str, text: str | None = None, **options: Unpack[QueryOptions]) -> QueryResult:
        """The passages that best answer `text` (or `vector`). `where`: filter clauses (engine/filters.py,
        INVALID_ARGUMENT with an example when malformed), applied inside both retrievers before fusion.
        `versions`: "latest" (default: each lineage's current version) or "all". `expand`: pseudo-relevance
        feedback from a first pass (engine/expansion.py; default the query_expansion setting)."""
        ...

    def run_agent(self, goal: str, dataset: str | None = None, max_steps: int | None = None,
                  on_step: Callable[[Step], None] | None = None) -> AgentRun:
        """The bounded research loop (engine/agent/) over `dataset`, where this backend's model is: in this
        process for the in-process backends, on the gateway for KxClient (its steps reported when it is done).
        `max_steps` may only tighten the KX_AGENT_MAX_STEPS bound."""
        ...

    def close(self) -> None: ...
