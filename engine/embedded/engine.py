"""The embedded engine: the in-process implementation of the Backend.

`Engine` is the one object the CLI, the TUI and the gateway talk to. It owns
the settings, the (lazily loaded) embedding model and the open query readers;
ingest and query live in engine/ingest.py and engine/query.py, imported when
first used so that listing datasets and `kx info` never import numpy.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

from ..backend import backend_info, check_page, no_document
from ..config import Settings, load_settings
from ..embedding.host import UNSET, ModelHost
from ..errors import KxError, Status, invalid
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
from .dataset import Dataset, list_dataset_names
from .sparse_claim import claimed_watermark
from .storage_errors import check_catalogue_kept, check_home_writable, reads_still_work, storage_errors

# Readers opened while the indexes could not catch up (a full disk, a read-only home) try again after this
# long: a long-lived gateway, TUI or `kx mcp` heals once the disk has room, without a write per query.
HEAL_RETRY_SECONDS = 5.0

if TYPE_CHECKING:
    import numpy as np
    from typing_extensions import Unpack

    from ..embedding.embedders import Embedder
    from ..retrieval import Searcher
    from .readers import DatasetSearcher
    from .store import Catalogue



class Engine(InProcessBackend):
    """Datasets on this machine, ingested and queried in-process."""

    def __init__(self, settings: Settings | None = None, embedder: Embedder | None = UNSET,
                 on_notice: NotifyFn | None = None) -> None:
        self.settings = settings or load_settings()
        self.models = ModelHost(self.settings, embedder, on_notice)  # the model: card, load, prepare
        self._searchers: dict[str, DatasetSearcher] = {}
        self._searchers_lock = threading.Lock()
        # engines under a dataset's own index settings (for_dataset), one per set of them; None in such an engine
        self._views: dict[tuple[Any, ...], Engine] | None = {}
        self._recorded: dict[str, str | None] = {}   # dataset -> the embed_model setting that built it

    # -- a dataset's own settings (engine/dataset_settings.py) -----------------------

    def for_dataset(self, name: str) -> Engine:
        """The engine that serves dataset `name`: this one, or one under the dataset's recorded index settings
        (model, chunking, stopwords) wherever this command set none explicitly; each is made once and kept."""
        if self._views is None:
            return self   # already a dataset's engine
        from ..dataset_settings import MODEL_SETTING_KEY, adopted, model_setting_for
        from ..setting_values import served_model

        try:
            if not Dataset(self.settings, validate_name(name)).exists():
                return self
            with self._catalogue(name) as catalogue:
                stored, recorded = catalogue.fingerprint(), catalogue.meta(MODEL_SETTING_KEY)
            if stored is None:
                return self
            # the configured model told apart from the dataset's without a record; a served one is not asked
            card = None if recorded or served_model(self.settings.embed_model) else self.model_card()
        except KxError:   # the command itself meets the same error, and says it where it always did
            return self
        self._recorded[name] = model_setting_for(stored, recorded, self.settings, card)
        wanted = adopted(self.settings, stored, self._recorded[name], name)
        if wanted == self.settings:
            return self
        key = (wanted.embed_model, wanted.chunk_size, wanted.chunk_overlap, wanted.stopwords)
        with self._searchers_lock:
            view = self._views.get(key)
            if view is None:
                view = Engine(wanted, on_notice=self.models.on_notice)
                view._views = None
                if wanted.embed_model == self.settings.embed_model:
                    view.models = self.models   # the same model: one load, one embedder (a test's too)
                self._views[key] = view
        view._recorded[name] = self._recorded[name]
        return view

    def recorded_model_setting(self, name: str) -> str | None:
        """The embed_model setting that built dataset `name`, when for_dataset could tell it (for refusals)."""
        return self._recorded.get(name)

    # -- the model (the rest is InProcessBackend's, engine/in_process.py) -------------------------

    def load_model_in_background(self, name: str | None = None) -> threading.Thread | None:
        """The model loading on a thread (engine/query.py: while a cold query opens dataset `name`'s indexes);
        None when it is loaded, none is configured, or `name` does not exist (its error comes at once)."""
        if name is not None and not Dataset(self.settings, name).exists():
            return None
        return self.models.load_in_background()

    # -- reads --------------------------------------------------------------------

    def list_datasets(self) -> list[DatasetSummary]:
        """Every dataset's summary; one that cannot be read is listed with its error, not raised: a damaged
        catalogue must not hide the healthy datasets beside it (querying it says the same error, in full)."""
        out = []
        for name in list_dataset_names(self.settings):
            try:
                out.append(self.dataset_summary(name))
            except KxError as exc:
                out.append(DatasetSummary.unreadable(name, str(Dataset(self.settings, name).folder),
                                                     exc.status.name, exc.message))
        return out

    @contextlib.contextmanager
    def _catalogue(self, name: str) -> Iterator[Catalogue]:
        """Dataset `name`'s catalogue opened for reading (NOT_FOUND if there is none), storage errors translated."""
        dataset = Dataset(self.settings, name)
        dataset.require(self.settings)
        with storage_errors(dataset.folder):
            catalogue = dataset.reading()
            try:
                yield catalogue
            finally:
                catalogue.close()

    def dataset_summary(self, name: str) -> DatasetSummary:
        with self._catalogue(name) as catalogue:
            docs, passages = catalogue.counts()
            fingerprint = catalogue.fingerprint()
            created = catalogue.created_at
            folder = catalogue.path.parent
            backlog = catalogue.backlog()
            state = catalogue.lineage_view()
            unindexed = 0
            if fingerprint is not None:
                # the sidecar's claim alone: a listing loads no index (nor numpy)
                indexed = claimed_watermark(folder, fingerprint.stopwords, catalogue.dataset_id)
                if indexed < catalogue.max_passage_seq():   # counted only when there is a gap: rare
                    unindexed = passages - catalogue.passages_upto(indexed)
        return DatasetSummary(
            name=name,
            documents=state.live_count(),
            versions=docs,
            retired=state.retired_count(),
            passages=passages,
            embed_model=fingerprint.embed_model if fingerprint else None,
            created_at=created,
            fingerprint=fingerprint.to_dict() if fingerprint else None,
            path=str(folder),
            backlog=backlog,
            unindexed=unindexed,
        )

    def info(self) -> dict[str, Any]:
        return backend_info(self.settings, self.models, len(list_dataset_names(self.settings)),
                            {"kind": "embedded", "path": str(self.settings.datasets_dir)})

    def document_text(self, name: str, doc_ref: str) -> str:
        """The text of one document of dataset `name`, as passages' character ranges refer to it."""
        with self._catalogue(name) as catalogue:
            text = catalogue.document_text(doc_ref)  # the stored text, never a fresh extraction
        if text is None:
            raise no_document(name, doc_ref)
        return text

    def list_documents(self, name: str, offset: int = 0, limit: int = 100,
                       versions: str | None = None) -> list[DocumentSummary]:
        """Documents of dataset `name` in ingest order, `limit` (1..1000) from `offset`; the current version
        of each lineage, or every stored version with `versions="all"`."""
        check_page(offset, limit)
        view = _version_view(versions)
        with self._catalogue(name) as catalogue:
            state = catalogue.lineage_view()
            hidden = state.hidden() if view is VersionView.LATEST else set()
            if hidden:  # page over what is shown, not over what is stored
                rows = [row for row in catalogue.documents() if row.ref not in hidden][offset:offset + limit]
            else:
                rows = catalogue.documents(offset, limit)
            waiting = catalogue.backlog_by_document([row.ref for row in rows])
            out = []
            for row in rows:
                version, superseded_by, retired = state.describe(row.ref, row.name)
                name, source_path = state.shown(row.ref, row.name, row.source_path)   # a renamed file's
                out.append(dataclasses.replace(row.summary(backlog=waiting.get(row.ref, 0)), version=version,
                                               superseded_by=superseded_by, retired=retired, name=name,
                                               source_path=source_path))
            return out

    def document_passages(self, name: str, doc_ref: str) -> list[PassageSpan]:
        """Where each passage of one document lies in its text, in chunk order."""
        with self._catalogue(name) as catalogue:
            if catalogue.document(doc_ref) is None:
                raise no_document(name, doc_ref)
            return [row.span() for row in catalogue.passages_of(doc_ref)]

    def rebuild(self, name: str, new: str, on_event: EventFn | None = None,
                should_stop: Callable[[], bool] | None = None) -> IngestReport:
        """Build dataset `new` from `name`'s stored originals under this engine's settings (engine/embedded/rebuild.py);
        `name` is only read."""
        from .rebuild import run_rebuild

        check_home_writable(self.settings.home, self.settings.datasets_dir)
        with storage_errors(self.settings.datasets_dir / validate_name(new)):
            return run_rebuild(self, name, new, on_event, should_stop)

    def retire(self, name: str, lineages: Sequence[str]) -> list[str]:
        """Retire lineages (documents by name) whose source is gone: no version of them answers by default
        any more; a later ingest of the same name brings the lineage back. Returns those that were live."""
        dataset = Dataset(self.settings, name)
        dataset.require(self.settings)
        with storage_errors(dataset.folder):
            with dataset.writing() as catalogue:
                return catalogue.retire(list(lineages))

    def copies(self, name: str) -> dict[str, tuple[str, str | None]]:
        with self._catalogue(name) as catalogue:
            return catalogue.lineage_view().copies()

    def rename(self, name: str, moves: Sequence[tuple[str, str, str | None]]) -> list[str]:
        """Carry lineages to new names: (old name, new name, the file's new path or None), as a file renamed
        inside a watched folder does; every version goes along. Returns the old names that moved."""
        dataset = Dataset(self.settings, name)
        dataset.require(self.settings)
        with storage_errors(dataset.folder):
            with dataset.writing() as catalogue:
                return catalogue.rename(list(moves))

    # -- ingest -------------------------------------------------------------------

    def ingest(
        self,
        name: str,
        documents: Iterable[DocumentInput],
        vectors: Sequence[Sequence[float]] | np.ndarray | None = None,
        on_event: EventFn | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> IngestReport:
        """engine.ingest.run_ingest on this engine, its storage failures turned into KxErrors."""
        from ..ingest import run_ingest
        from .backlog import BesideStage1

        view = self.for_dataset(name)
        if view is not self:   # the dataset's own settings; this engine's stop request still stops it
            return view.ingest(name, documents, vectors, self.unless_stopping(on_event), should_stop)
        folder = self.settings.datasets_dir / validate_name(name)  # a bad name touches no file
        check_home_writable(self.settings.home, self.settings.datasets_dir)
        check_catalogue_kept(folder)
        with storage_errors(self.settings.datasets_dir / name):
            return run_ingest(self, name, documents, vectors, self.unless_stopping(on_event),
                              target=Dataset(self.settings, name), stage_two=BesideStage1, should_stop=should_stop)

    def embed(self, name: str, on_event: EventFn | None = None,
              should_stop: Callable[[], bool] | None = None) -> EmbedReport:
        """Finish dataset `name`'s embedding backlog (stage 2 of its ingests), holding its write lock.

        A second writer waits for the lock (and then finds nothing left to do),
        so no passage is ever embedded twice. Says how many this call embedded.
        """
        from ..records import Notice
        from .backlog import embed_backlog

        view = self.for_dataset(name)
        if view is not self:   # the dataset's own settings; this engine's stop request still stops it
            return view.embed(name, self.unless_stopping(on_event), should_stop)
        emit = self.unless_stopping(on_event)
        dataset = Dataset(self.settings, name)
        dataset.require(self.settings)
        check_home_writable(self.settings.home, self.settings.datasets_dir)
        check_catalogue_kept(dataset.folder)
        with storage_errors(dataset.folder):
            with dataset.writing(on_wait=lambda message: emit(Notice("waiting", message))) as catalogue:
                if catalogue.backlog():
                    self._check_model_for(name, catalogue)
                embedded = embed_backlog(self, dataset, catalogue, emit, should_stop)
                dataset.sync_sparse(catalogue)
        return EmbedReport(self.dataset_summary(name), embedded)

    def _check_model_for(self, name: str, catalogue: Catalogue) -> None:
        """Refuse to embed a backlog with a model other than the one the dataset was built with."""
        from ..fingerprint import check_compatible, current_fingerprint

        stored = catalogue.fingerprint()
        if stored is not None:
            check_compatible(name, stored, current_fingerprint(self.settings, self.model_card(), stored.dimension),
                             settings=self.settings, model_setting=self.recorded_model_setting(name))

    # -- query --------------------------------------------------------------------

    def query(self, name: str, text: str | None = None, **options: Unpack[QueryOptions]) -> QueryResult:
        """engine.query.run_query on this engine, its storage failures turned into KxErrors."""
        from ..query import run_query

        with storage_errors(self.settings.datasets_dir / name):
            return run_query(self.for_dataset(name), name, text, **options)

    def searcher(self, name: str) -> DatasetSearcher:
        """The dataset's cached readers, reopened when the catalogue has grown since."""
        from .readers import DatasetSearcher

        view = self.for_dataset(name)
        if view is not self:   # the readers a query of it uses: the warm-up opens those
            return view.searcher(name)
        dataset = Dataset(self.settings, name)
        with self._searchers_lock:
            searcher = self._searchers.get(name)
            if searcher is not None and searcher.current():
                return searcher
            previous = searcher
            if searcher is not None:
                searcher.close()
                del self._searchers[name]
            dataset.require(self.settings)
            stale = None
            try:
                with storage_errors(dataset.folder):
                    dataset.heal_if_behind()
            except KxError as exc:
                if exc.status is not Status.RESOURCE_EXHAUSTED and not reads_still_work(exc):
                    raise
                # a full disk or a read-only home: answer from what the indexes hold, say so; a later
                # query catches them up once they can be written
                stale = f"the indexes could not catch up with the newest documents ({exc.message})"
            try:
                searcher = DatasetSearcher(dataset, self.settings.bm25_k1, self.settings.bm25_b, previous)
            except ValueError:
                raise KxError(Status.NOT_FOUND, f"dataset '{name}' holds no documents yet; ingest some first") \
                    from None
            if stale:
                searcher.notes.append(stale)
                searcher.retry_at = time.monotonic() + HEAL_RETRY_SECONDS  # then a query tries again
            self._searchers[name] = searcher
            return searcher

    @contextlib.contextmanager
    def reading(self, name: str, opened: Searcher | None = None) -> Iterator[DatasetSearcher]:
        """The dataset's open readers, held for this thread until the block ends.

        A searcher replaced by a newer one (the catalogue grew) is closed only
        once its lock is free; a caller that lost that race takes the new one.
        `opened`: the readers this query checked a moment ago (`searcher`), taken again without a second
        freshness check (a catalogue pragma and ten stats) while they are still the dataset's and open.
        """
        kept = self._searchers.get(name)
        searcher = kept if kept is not None and kept is opened else None
        while True:
            if searcher is None:
                searcher = self.searcher(name)
            with searcher.lock:
                if searcher.closed:
                    searcher = None
                    continue
                yield searcher
                return

    def close(self) -> None:
        with self._searchers_lock:
            for searcher in self._searchers.values():
                searcher.close()
            self._searchers.clear()
            views = list((self._views or {}).values())
        for view in views:
            view.close()



def _version_view(versions: str | None) -> VersionView:
    try:
        return VersionView.parse(versions or VersionView.LATEST)
    except ValueError as exc:
        raise invalid(str(exc)) from None
