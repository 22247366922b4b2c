"""`MilvusBackend`: the Backend protocol (engine/backend.py) over Milvus.

Chosen with KX_BACKEND=milvus; KX_MILVUS_URI names a cluster or `milvus-lite
server` (http(s)://host:port) or a milvus-lite .db path, KX_MILVUS_TOKEN its
credentials. What both backends share stays shared: the model (its own
`ModelHost`, engine/embedding/host.py), extraction, chunking and
provenance (engine/ingest.py through engine/milvus/store.py), fusion and MMR
(engine/query.py through engine/milvus/search.py). What Milvus does: keep
the rows, build HNSW (COSINE) and BM25 indexes, and answer the two pools.

The connection is made on the first call that needs data, so `kx info`
still answers (and says where it would connect) when Milvus is down.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..backend import backend_info, check_page, no_document
from ..config import BackendKind, Settings, load_settings
from ..embedding.host import UNSET, ModelHost
from ..errors import KxError, Status, invalid, not_found
from ..in_process import InProcessBackend
from ..names import validate_name
from ..records import (
    DatasetSummary,
    DocumentSummary,
    EmbedReport,
    IngestReport,
    NotifyFn,
    PassageSpan,
    QueryOptions,
    QueryResult,
    VersionView,
)
from ..records import IngestEventFn as EventFn
from ..text.inputs import DocumentInput
from .errors import MilvusConnection, is_local, redacted
from .schema import ANALYZER, collections_of

if TYPE_CHECKING:
    import numpy as np
    from typing_extensions import Unpack

    from ..embedding.embedders import Embedder
    from ..lineage import LineageState
    from ..retrieval import Searcher
    from .search import MilvusSearcher
    from .store import MilvusCatalogue, MilvusStore



class MilvusBackend(InProcessBackend):
    """Datasets kept in Milvus, ingested and queried through the embedded engine's pipeline."""

    def __init__(self, settings: Settings | None = None, embedder: Embedder | None = UNSET,
                 on_notice: NotifyFn | None = None) -> None:
        settings = settings or load_settings()
        # the fingerprint and `kx info` follow the backend setting; this object is the milvus backend
        self.settings = dataclasses.replace(settings, backend=BackendKind.MILVUS)
        self.uri = self.settings.milvus_target
        self.models = ModelHost(self.settings, embedder, on_notice)  # its own model, the embedded engine's kind
        self._conn: MilvusConnection | None = None
        self._store: MilvusStore | None = None
        self._started_lite = False
        self._searchers: dict[str, MilvusSearcher] = {}
        self._pictures: dict[str, tuple[tuple[int, int], list, LineageState]] = {}   # by dataset: see _lineages
        self._lock = threading.Lock()

    # -- the model (the rest is InProcessBackend's, engine/in_process.py) -------------------------

    def load_model_in_background(self, name: str | None = None) -> threading.Thread | None:
        """For a query (`name` given): None, the model loads on the query's own thread: whether the dataset
        exists is a round trip to Milvus, and a missing one's error should not wait for a model load."""
        return None if name is not None else self.models.load_in_background()

    # -- the connection -------------------------------------------------------------------

    def store(self) -> MilvusStore:
        with self._lock:
            if self._store is None:
                from .store import MilvusStore

                lite_running = is_local(self.uri) and _lite_serving(self.uri)
                self._conn = MilvusConnection(self.uri, self.settings.milvus_token, self.settings.milvus_timeout,
                                              self.settings.milvus_database)
                self._started_lite = is_local(self.uri) and not lite_running
                self._store = MilvusStore(self._conn)
            return self._store

    def _dataset(self, name: str):
        from .store import MilvusDataset

        return MilvusDataset(self.store(), validate_name(name))

    def _lineages(self, catalogue: MilvusCatalogue) -> tuple[list, LineageState]:
        """The dataset's document keys and lineage state, read again only when events or documents were
        added (two count queries): listing a large dataset's counts must not reread every row each time."""
        mark = (catalogue.lineage_mark(), catalogue.counts()[0])
        with self._lock:
            cached = self._pictures.get(catalogue.name)
        if cached is not None and cached[0] == mark:
            return cached[1], cached[2]
        keys = catalogue.document_keys()
        state = catalogue.lineage_state(keys)
        with self._lock:
            self._pictures[catalogue.name] = (mark, keys, state)
        return keys, state

    def _catalogue(self, name: str):
        from .store import MilvusCatalogue

        dataset = self._dataset(name)
        dataset.require()
        return MilvusCatalogue(dataset.store, name)

    # -- reads ----------------------------------------------------------------------------

    def list_datasets(self) -> list[DatasetSummary]:
        """Every dataset's summary; one whose stored facts are damaged or incompatible is listed with its error,
        as the embedded engine lists it, so it does not hide the others (Milvus unreachable still fails all)."""
        out = []
        for name in self.store().dataset_names():
            try:
                out.append(self.dataset_summary(name))
            except KxError as exc:
                if exc.status not in (Status.DATA_LOSS, Status.FAILED_PRECONDITION):
                    raise
                out.append(DatasetSummary.unreadable(name, redacted(self.uri), exc.status.name, exc.message))
        return out

    def embed(self, name: str, on_event: EventFn | None = None) -> EmbedReport:
        """Nothing waits here: Milvus rows are embedded before they are committed."""
        return EmbedReport(self.dataset_summary(name), 0)

    def dataset_summary(self, name: str) -> DatasetSummary:
        catalogue = self._catalogue(name)
        docs, passages = catalogue.counts()
        fingerprint = catalogue.fingerprint()
        _keys, state = self._lineages(catalogue)
        return DatasetSummary(
            name=name, documents=state.live_count(), versions=docs,
            retired=sum(1 for head in state.current.values() if head is None), passages=passages,
            embed_model=fingerprint.embed_model if fingerprint else None,
            created_at=catalogue.created_at,
            fingerprint=fingerprint.to_dict() if fingerprint else None,
            path=f"{redacted(self.uri)} ({catalogue.passages_col})",
        )

    def info(self) -> dict[str, Any]:
        backend = self.describe()
        try:
            datasets: int | None = len(self.store().dataset_names())
        except KxError as exc:  # info still answers with Milvus down: it says where it tried
            datasets, backend["error"] = None, exc.to_dict()
        data = backend_info(self.settings, self.models, datasets, backend)
        if "error" in backend:
            data["advisories"].append(backend["error"]["message"])
        return data

    def describe(self) -> dict[str, Any]:
        return {"kind": "milvus", "uri": redacted(self.uri), "database": self.settings.milvus_database,
                "token": "***" if self.settings.milvus_token else "",
                "lite": is_local(self.uri), "analyzer": ANALYZER}

    def document_text(self, name: str, doc_ref: str) -> str:
        text = self._catalogue(name).document_text(doc_ref)
        if text is None:
            raise no_document(name, doc_ref)
        return text

    def list_documents(self, name: str, offset: int = 0, limit: int = 100,
                       versions: str | None = None) -> list[DocumentSummary]:
        """Documents of dataset `name` in ingest order, `limit` (1..1000) from `offset`; the current version
        of each lineage, or every stored version with `versions="all"`."""
        check_page(offset, limit)
        try:
            view = VersionView.parse(versions or VersionView.LATEST)
        except ValueError as exc:
            raise invalid(str(exc)) from None
        catalogue = self._catalogue(name)
        keys, state = self._lineages(catalogue)
        hidden = state.hidden() if view is VersionView.LATEST else set()
        page = [ref for _t, ref, _n, _p, _m in keys if ref not in hidden][offset:offset + limit]
        found = catalogue.documents_by_ref(page)
        out = []
        for ref in page:
            row = found.get(ref)
            if row is None:
                continue
            version, superseded_by, retired = state.describe(row.ref, row.name)
            name, source_path = state.shown(row.ref, row.name, row.source_path)   # a renamed file's
            out.append(dataclasses.replace(row.summary(), version=version, superseded_by=superseded_by,
                                           retired=retired, name=name, source_path=source_path))
        return out

    def retire(self, name: str, lineages: Sequence[str]) -> list[str]:
        """Retire lineages (documents by name) whose source is gone; those that were live (Backend's contract)."""
        with self._dataset(name).writing() as catalogue:
            catalogue.require_registered()
            return catalogue.retire(list(lineages))

    def copies(self, name: str) -> dict[str, tuple[str, str | None]]:
        return self._lineages(self._catalogue(name))[1].copies()

    def rename(self, name: str, moves: Sequence[tuple[str, str, str | None]]) -> list[str]:
        """Carry lineages to new names, every version along (Engine.rename's contract)."""
        with self._dataset(name).writing() as catalogue:
            catalogue.require_registered()
            return catalogue.rename(list(moves))

    def rebuild(self, name: str, new: str, on_event: EventFn | None = None,
                should_stop: Callable[[], bool] | None = None) -> IngestReport:
        """Refused: a Milvus dataset keeps each document's extracted text, not its original bytes."""
        self._catalogue(name)  # an unknown dataset is NOT_FOUND first
        raise KxError(Status.FAILED_PRECONDITION,
                      f"dataset '{name}' is on the Milvus backend, which keeps each document's extracted text "
                      "but not its original file, and a rebuild re-reads the originals (pages, headings and "
                      "titles come from them); ingest the source files again into a new dataset under the new "
                      f"settings instead (kx datasets ingest {new} PATH...), or keep datasets to rebuild on "
                      "the embedded backend")

    def document_passages(self, name: str, doc_ref: str) -> list[PassageSpan]:
        """Where each passage of one document lies in its text, in chunk order."""

        catalogue = self._catalogue(name)
        if catalogue.document(doc_ref) is None:
            raise no_document(name, doc_ref)
        return [row.span() for row in catalogue.passages_of(doc_ref)]

    # -- ingest and query (the embedded pipeline over Milvus) -------------------------------

    def ingest(
        self,
        name: str,
        documents: Iterable[DocumentInput],
        vectors: Sequence[Sequence[float]] | np.ndarray | None = None,
        on_event: EventFn | None = None,
    ) -> IngestReport:
        from ..ingest import run_ingest

        validate_name(name)
        return run_ingest(self, name, documents, vectors, on_event, target=self._dataset(name))

    def query(self, name: str, text: str | None = None, **options: Unpack[QueryOptions]) -> QueryResult:
        from ..query import run_query

        return run_query(self, name, text, **options)

    def searcher(self, name: str) -> MilvusSearcher:
        """The dataset's reader; kept, since a Milvus dataset's fingerprint never changes once stamped."""
        from .search import MilvusSearcher

        validate_name(name)
        with self._lock:
            found = self._searchers.get(name)
        if found is not None:
            return found
        catalogue = self._catalogue(name)
        fingerprint = catalogue.fingerprint()
        if fingerprint is None or not catalogue.store.has(collections_of(name)[0]):
            raise not_found(f"dataset '{name}' holds no documents yet; ingest some first")
        searcher = MilvusSearcher(catalogue, fingerprint)
        with self._lock:
            return self._searchers.setdefault(name, searcher)

    @contextlib.contextmanager
    def reading(self, name: str, opened: Searcher | None = None) -> Iterator[MilvusSearcher]:
        # no lock: the client is thread-safe and Milvus answers concurrently; `opened` is not reused, as
        # searcher() is a dictionary look-up here
        yield self.searcher(name)

    def close(self) -> None:
        with self._lock:
            self._searchers.clear()
            self._pictures.clear()
            conn, self._conn, self._store = self._conn, None, None
        if conn is not None:
            conn.close()
            if self._started_lite:  # pymilvus's close leaves milvus-lite holding the folder; let it go
                from milvus_lite.server_manager import server_manager_instance

                server_manager_instance.release_server(self.uri)


def _lite_serving(path: str) -> bool:
    import os

    from milvus_lite.server_manager import server_manager_instance

    return os.path.abspath(path) in getattr(server_manager_instance, "_servers", {})

