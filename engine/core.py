"""The embedded engine: the in-process implementation of the Backend.

`Engine` is the one object the CLI, the TUI and the gateway talk to. It owns
the settings, the (lazily loaded) embedding model and the open query readers;
ingest and query live in engine/ingest.py and engine/query.py.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from . import __version__
from .config import Settings, load_settings
from .dataset import Dataset, list_dataset_names
from .documents import DocumentInput, extract_text
from .embedders import Embedder, load_embedder
from .errors import KxError, Status, not_found
from .ingest import chat_model_advisory, run_ingest
from .models import ModelCard, model_card_for
from .query import run_query
from .records import DatasetSummary, DocumentSummary, IngestReport, PassageSpan, QueryResult
from .search import DatasetSearcher

EventFn = Callable[[object], None]

_UNSET: Any = object()
MAX_DOCUMENTS_PAGE = 1000  # documents per list_documents call; page with `offset` for more


class Engine:
    """Datasets on this machine, ingested and (later) queried in-process."""

    def __init__(self, settings: Settings | None = None, embedder: Embedder | None = _UNSET) -> None:
        self.settings = settings or load_settings()
        self._embedder = embedder
        self._card: ModelCard | None = _UNSET if embedder is _UNSET else (embedder.card if embedder else None)
        self._searchers: dict[str, DatasetSearcher] = {}
        self._searchers_lock = threading.Lock()

    # -- the model ----------------------------------------------------------------

    def model_card(self) -> ModelCard | None:
        """The configured model, described from its files (no torch). None for 'none'."""
        if self._card is _UNSET:
            self._card = model_card_for(self.settings.embed_model)
        return self._card

    def embedder(self) -> Embedder | None:
        if self._embedder is _UNSET:
            self._embedder = load_embedder(self.model_card())
        return self._embedder

    def warm_up(self, dataset: str | None = None) -> bool:
        if dataset is not None:
            self.searcher(dataset)  # opened and cached: the first query finds them ready
            return True
        embedder = self.embedder()
        if embedder is None:
            return False
        embedder.encode(["warm up"])  # loads the weights and pays the first call's one-off costs
        return True

    # -- reads --------------------------------------------------------------------

    def list_datasets(self) -> list[DatasetSummary]:
        return [self.dataset_summary(name) for name in list_dataset_names(self.settings)]

    def dataset_summary(self, name: str) -> DatasetSummary:
        dataset = Dataset(self.settings, name)
        dataset.require(self.settings)
        catalogue = dataset.reading()
        try:
            docs, passages = catalogue.counts()
            fingerprint = catalogue.fingerprint()
            created = catalogue.created_at
        finally:
            catalogue.close()
        return DatasetSummary(
            name=name,
            documents=docs,
            passages=passages,
            embed_model=fingerprint.embed_model if fingerprint else None,
            created_at=created,
            fingerprint=fingerprint.to_dict() if fingerprint else None,
            path=str(dataset.folder),
        )

    def info(self) -> dict[str, Any]:
        model: dict[str, Any] | None
        advisories: list[str] = []
        try:
            card = self.model_card()
            model = card.to_dict() if card else None
            if card is None:
                advisories.append("no embedding model (KX_SERVE_EMBED_MODEL=none): text ingest and dense search "
                                  "are off; pre-computed vectors and sparse search still work")
            elif card.causal_lm:
                advisories.append(chat_model_advisory(card))
        except KxError as exc:  # shown as the model's state, not repeated as an advisory
            model = {"error": exc.to_dict()}
        return {
            "version": __version__,
            "home": str(self.settings.home),
            "config_file": str(self.settings.config_path),
            "config_file_exists": self.settings.config_path.exists(),
            "datasets": len(list_dataset_names(self.settings)),
            "embed_model": model,
            "advisories": advisories,
            "settings": self.settings.describe(),
        }

    def document_text(self, name: str, doc_ref: str) -> str:
        """The text of one document of dataset `name`, as passages' character ranges refer to it."""
        dataset = Dataset(self.settings, name)
        dataset.require(self.settings)
        catalogue = dataset.reading()
        try:
            row = catalogue.document(doc_ref)
            data = catalogue.document_bytes(doc_ref)
        finally:
            catalogue.close()
        if row is None or data is None:
            raise not_found(f"document {doc_ref[:12]} is not in dataset '{name}'")
        return extract_text(DocumentInput(row.name, data=data, source_path=row.source_path,
                                          media_type=row.media_type))

    def list_documents(self, name: str, offset: int = 0, limit: int = 100) -> list[DocumentSummary]:
        """Documents of dataset `name` in ingest order, `limit` (1..1000) from `offset`."""
        _check_page(offset, limit)
        dataset = Dataset(self.settings, name)
        dataset.require(self.settings)
        catalogue = dataset.reading()
        try:
            rows = catalogue.documents(offset, limit)
        finally:
            catalogue.close()
        return [DocumentSummary(name=row.name, ref=row.ref, media_type=row.media_type,
                                # page_count and title arrive with the document formats' catalogue columns
                                pages=getattr(row, "page_count", None), passages=row.passage_count,
                                ingested_at=row.ingested_at, source_path=row.source_path,
                                title=getattr(row, "title", None), size=row.size) for row in rows]

    def document_passages(self, name: str, doc_ref: str) -> list[PassageSpan]:
        """Where each passage of one document lies in its text, in chunk order."""
        dataset = Dataset(self.settings, name)
        dataset.require(self.settings)
        catalogue = dataset.reading()
        try:
            if catalogue.document(doc_ref) is None:
                raise not_found(f"document {doc_ref[:12]} is not in dataset '{name}'")
            rows = catalogue.passages_of(doc_ref)
        finally:
            catalogue.close()
        return [PassageSpan(ref=row.ref, chunk_index=row.chunk_index, chunk_count=row.chunk_count,
                            char_start=row.char_start, char_end=row.char_end,
                            page_start=getattr(row, "page_start", None), page_end=getattr(row, "page_end", None),
                            section=getattr(row, "section", None)) for row in rows]

    # -- ingest -------------------------------------------------------------------

    def ingest(
        self,
        name: str,
        documents: Iterable[DocumentInput],
        vectors: Sequence[Sequence[float]] | np.ndarray | None = None,
        on_event: EventFn | None = None,
    ) -> IngestReport:
        """Add documents to dataset `name`, creating it on first use (see engine/ingest.py).

        With `vectors`, each document is one passage with the caller's vector
        (no model needed). Documents that cannot be read are refused one by
        one; the rest go in. Raises only for what stops the whole command: a
        bad name, no model, or an incompatible fingerprint.
        """
        return run_ingest(self, name, documents, vectors, on_event)

    # -- query --------------------------------------------------------------------

    def query(
        self,
        name: str,
        text: str | None = None,
        *,
        vector: Sequence[float] | np.ndarray | None = None,
        k: int | None = None,
        mode: str | None = None,
        rerank: bool | None = None,
    ) -> QueryResult:
        """The passages of dataset `name` that best answer `text` (or a pre-computed `vector`).

        See engine/query.py: dense and sparse pools fused by RRF, then MMR.
        """
        return run_query(self, name, text, vector=vector, k=k, mode=mode, rerank=rerank)

    def searcher(self, name: str) -> DatasetSearcher:
        """The dataset's cached readers, reopened when the catalogue has grown since."""
        dataset = Dataset(self.settings, name)
        with self._searchers_lock:
            searcher = self._searchers.get(name)
            if searcher is not None and searcher.current():
                return searcher
            if searcher is not None:
                searcher.close()
                del self._searchers[name]
            dataset.require(self.settings)
            dataset.heal_if_behind()
            try:
                searcher = DatasetSearcher(dataset, self.settings.bm25_k1, self.settings.bm25_b)
            except ValueError:
                raise KxError(Status.NOT_FOUND, f"dataset '{name}' holds no documents yet; ingest some first") \
                    from None
            self._searchers[name] = searcher
            return searcher

    @contextlib.contextmanager
    def reading(self, name: str) -> Iterator[DatasetSearcher]:
        """The dataset's open readers, held for this thread until the block ends.

        A searcher replaced by a newer one (the catalogue grew) is closed only
        once its lock is free; a caller that lost that race takes the new one.
        """
        while True:
            searcher = self.searcher(name)
            with searcher.lock:
                if searcher.closed:
                    continue
                yield searcher
                return

    def close(self) -> None:
        with self._searchers_lock:
            for searcher in self._searchers.values():
                searcher.close()
            self._searchers.clear()


def _check_page(offset: int, limit: int) -> None:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise KxError(Status.INVALID_ARGUMENT, f"offset must be a whole number of at least 0, got {offset!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_DOCUMENTS_PAGE:
        raise KxError(Status.INVALID_ARGUMENT, f"limit must be a whole number from 1 to {MAX_DOCUMENTS_PAGE}, "
                                               f"got {limit!r}; page through more with offset")
