"""The embedded engine: the in-process implementation of the Backend.

Ingest: documents -> refs (sha256; seen before -> "unchanged") -> text ->
passages with provenance -> vectors in batches -> one catalogue transaction per
group of documents (the durable point) -> the derived indexes catch up once per
command.
"""

from __future__ import annotations

import hashlib
import shutil
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from . import __version__
from .chunking import chunk_text
from .config import MODES, Settings, load_settings
from .dataset import Dataset, list_dataset_names, validate_name
from .documents import DocumentInput, extract_text
from .embedders import Embedder, load_embedder, no_embedder_error
from .errors import KxError, Status, invalid
from .fingerprint import Fingerprint, check_compatible, current_fingerprint
from .models import ModelCard, model_card_for
from .fusion import mmr, rrf
from .records import (
    ADDED,
    REFUSED,
    UNCHANGED,
    DatasetSummary,
    DocumentResult,
    Hit,
    IngestReport,
    Notice,
    Progress,
    QueryResult,
)
from .search import MAX_QUERY_TERMS, DatasetSearcher
from .store import NewDocument, NewPassage

EventFn = Callable[[object], None]

_UNSET: Any = object()


def chat_model_advisory(card: ModelCard) -> str:
    return (
        f"embed model {card.name} ({card.architecture}) is a chat / text-generation model, not a sentence "
        "embedder; its vectors rank poorly for retrieval. Prefer a dedicated embedder such as the default "
        "all-MiniLM-L6-v2 (KX_SERVE_EMBED_MODEL=default)"
    )


def passage_ref(doc_ref: str, start: int, end: int) -> str:
    """A passage's content reference: its parent's bytes and where in them it lies."""
    return hashlib.sha256(f"kx-passage:{doc_ref}:{start}:{end}".encode()).hexdigest()


@dataclass
class _Prepared:
    position: int
    document: NewDocument
    vector: np.ndarray | None  # the caller's own vector, when given


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

    # -- ingest -------------------------------------------------------------------

    def ingest(
        self,
        name: str,
        documents: Iterable[DocumentInput],
        vectors: Sequence[Sequence[float]] | np.ndarray | None = None,
        on_event: EventFn | None = None,
    ) -> IngestReport:
        """Add documents to dataset `name`, creating it on first use.

        With `vectors`, each document is one passage with the caller's vector
        (no model needed). Documents that cannot be read are refused one by
        one; the rest go in. Raises only for what stops the whole command: a
        bad name, no model, or an incompatible fingerprint.
        """
        emit = on_event or (lambda _event: None)
        validate_name(name)
        docs = list(documents)
        given = self._check_vectors(vectors, len(docs))
        card = self._card_for_ingest(given)
        if given is None and card is None:
            raise no_embedder_error("ingesting text")
        if card is not None and card.causal_lm:
            emit(Notice("advisory", chat_model_advisory(card)))
        dimension = card.dimension if given is None else given.shape[1]
        model_card = card if card is not None and card.dimension == dimension else None
        current = current_fingerprint(self.settings, model_card, dimension)

        dataset = Dataset(self.settings, name)
        created = not dataset.exists()
        totals = (0, 0)
        try:
            with dataset.writing(on_wait=lambda message: emit(Notice("waiting", message))) as catalogue:
                stored = catalogue.fingerprint()
                if stored is not None:
                    self._check_stored(name, stored, current, given is not None)
                fingerprint = stored or current
                results: list[DocumentResult | None] = [None] * len(docs)
                pending = self._prepare(docs, given, catalogue, results, emit)
                self._embed_and_commit(pending, catalogue, fingerprint, results, emit)
                dataset.sync_indexes(catalogue, on_stage=lambda stage: emit(Progress(f"indexing {stage}", 0, 1)))
                totals = catalogue.counts()
        finally:
            if created and totals[0] == 0:
                # nothing went in (all refused, or a failure before the first commit):
                # leave no empty dataset behind
                shutil.rmtree(dataset.folder, ignore_errors=True)
        advisories = [chat_model_advisory(card)] if card is not None and card.causal_lm else []
        return IngestReport(name, [r for r in results if r is not None], created and totals[0] > 0,
                            totals[0], totals[1], advisories)

    def _card_for_ingest(self, given: np.ndarray | None) -> ModelCard | None:
        if given is None:
            return self.model_card()
        try:  # bringing your own vectors must work without a usable model
            return self.model_card()
        except KxError:
            return None

    @staticmethod
    def _check_vectors(vectors: Any, count: int) -> np.ndarray | None:
        if vectors is None:
            return None
        try:
            array = np.asarray(vectors, dtype=np.float32)
        except (TypeError, ValueError):
            raise invalid("vectors must be a list of equal-length lists of numbers, one per document") from None
        if array.ndim != 2 or array.shape[0] != count or array.shape[1] == 0:
            raise invalid(f"expected one vector per document ({count}), each a non-empty list of numbers; "
                          f"got shape {tuple(array.shape)}")
        if not np.all(np.isfinite(array)):
            raise invalid("vectors contain NaN or infinite values; pass finite numbers")
        norms = np.linalg.norm(array, axis=1)
        if np.any(norms == 0):
            raise invalid("a vector is all zeros and has no direction; pass a non-zero vector")
        return array / norms[:, None]

    @staticmethod
    def _check_stored(name: str, stored: Fingerprint, current: Fingerprint, own_vectors: bool) -> None:
        if own_vectors:
            if stored.dimension != current.dimension:
                raise invalid(
                    f"dataset '{name}' holds {stored.dimension}-dimensional vectors but the given vectors have "
                    f"{current.dimension}; pass vectors from the dataset's model ({stored.embed_model})"
                )
            return
        check_compatible(name, stored, current)

    def _prepare(self, docs, given, catalogue, results, emit) -> list[_Prepared]:
        known = catalogue.known_refs([d.ref for d in docs if d.error is None])
        seen: set[str] = set()
        pending: list[_Prepared] = []
        for position, doc in enumerate(docs):
            if doc.error is not None:
                results[position] = _refused(doc, doc.error)
                emit(results[position])
                continue
            ref = doc.ref
            if ref in known or ref in seen:
                row = catalogue.document(ref)
                passages = row.passage_count if row else next(
                    len(p.document.passages) for p in pending if p.document.ref == ref)
                results[position] = DocumentResult(doc.name, UNCHANGED, ref, passages, doc.source_path)
                emit(results[position])
                continue
            try:
                text = extract_text(doc)
            except KxError as exc:
                results[position] = _refused(doc, exc)
                emit(results[position])
                continue
            if given is not None:
                spans = [(0, len(text), text, 0, 1)]
            else:
                chunks = chunk_text(text, self.settings.chunk_size, self.settings.chunk_overlap)
                spans = [(c.start, c.end, c.text, c.index, c.count) for c in chunks]
            passages = [NewPassage(passage_ref(ref, s, e), i, n, s, e, t) for s, e, t, i, n in spans]
            seen.add(ref)
            pending.append(_Prepared(
                position,
                NewDocument(ref, doc.name, doc.source_path, doc.media_type, doc.data, len(text), passages),
                None if given is None else given[position],
            ))
        return pending

    def _embed_and_commit(self, pending, catalogue, fingerprint, results, emit) -> None:
        total = sum(len(p.document.passages) for p in pending)
        done = 0
        group: list[_Prepared] = []
        size = 0
        for item in pending + [None]:
            if item is not None:
                group.append(item)
                size += len(item.document.passages)
                if size < self.settings.ingest_commit_passages:
                    continue
            if not group:
                break
            vectors = self._vectors_for(group, done, total, emit)
            catalogue.commit_documents([p.document for p in group], vectors, fingerprint)
            for p in group:
                doc = p.document
                results[p.position] = DocumentResult(doc.name, ADDED, doc.ref, len(doc.passages), doc.source_path)
                emit(results[p.position])
            done += size
            group, size = [], 0

    def _vectors_for(self, group: list[_Prepared], done: int, total: int, emit: EventFn) -> np.ndarray:
        if group[0].vector is not None:
            return np.stack([p.vector for p in group]).astype(np.float32)
        embedder = self.embedder()
        if embedder is None:
            raise no_embedder_error("ingesting text")
        texts = [passage.text for p in group for passage in p.document.passages]
        progressed = done

        def progress(n: int) -> None:
            nonlocal progressed
            progressed += n
            emit(Progress("embedding", progressed, total))

        emit(Progress("embedding", done, total))
        return embedder.encode(texts, batch_size=self.settings.embed_batch_size, progress=progress)


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

        Dense and sparse candidate pools are fused by Reciprocal Rank Fusion,
        then (with rerank) an MMR pass keeps near-duplicates from crowding the
        top. Ties break on ascending passage ref at every step.
        """
        started = time.perf_counter()
        timings: dict[str, float] = {}
        notes: list[str] = []
        validate_name(name)
        mode = self._check_mode(mode)
        rerank = self.settings.rerank if rerank is None else bool(rerank)
        requested = self.settings.default_k if k is None else k
        if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
            raise invalid(f"k must be a whole number of at least 1, got {requested!r}")
        k_used = min(requested, self.settings.max_k)
        if k_used != requested:
            notes.append(f"k clamped from {requested} to {k_used} (the operator's maximum, KX_MAX_K)")
        if text is not None and not isinstance(text, str):
            raise invalid("query text must be a string")
        if text is not None and not text.strip():
            raise invalid("the query is empty; type some words to search for")
        query_vector = self._check_query_vector(vector)
        if text is None and query_vector is None:
            raise invalid("give query text (or a pre-computed query vector)")
        if text is None and mode != "dense":
            if mode == "sparse":
                raise invalid("sparse search needs query text; a vector alone can only search dense")
            notes.append("no query text: searched dense only")
            mode = "dense"

        searcher = self._searcher(name)
        fingerprint = searcher.fingerprint
        use_dense, use_sparse = mode in ("dense", "hybrid"), mode in ("sparse", "hybrid")
        embedder = None
        if query_vector is not None:
            if query_vector.shape[0] != fingerprint.dimension:
                raise invalid(
                    f"the query vector has {query_vector.shape[0]} dimensions but dataset '{name}' holds "
                    f"{fingerprint.dimension}-dimensional vectors ({fingerprint.embed_model})"
                )
            self._check_query_fingerprint(name, fingerprint, None)
        elif use_dense:
            card = self.model_card()
            if card is None:
                raise no_embedder_error(f"{mode} search")
            self._check_query_fingerprint(name, fingerprint, card)
            embedder = self.embedder()
        else:
            try:
                card = self.model_card()
            except KxError:
                card = None  # sparse search does not need the model
            self._check_query_fingerprint(name, fingerprint, card)

        pool = max(self.settings.candidate_pool, k_used)
        lists = {}
        if use_dense:
            if query_vector is None:
                t = time.perf_counter()
                query_vector = embedder.encode([text])[0]
                timings["embed"] = _ms(t)
            t = time.perf_counter()
            dense = searcher.dense_candidates(query_vector, pool)
            timings["dense"] = _ms(t)
            lists["dense"] = dense
        if use_sparse:
            t = time.perf_counter()
            sparse = searcher.sparse_candidates(text, pool)
            timings["sparse"] = _ms(t)
            lists["sparse"] = sparse
            if not sparse.hits:
                notes.append("no query word is in the sparse index (only stopwords, punctuation or unknown words)")
            if sparse.dropped_terms:
                notes.append(f"sparse search used the {MAX_QUERY_TERMS} rarest of the query's indexed terms "
                             f"({sparse.dropped_terms} more were left out)")

        t = time.perf_counter()
        fused = rrf({n: c.hits for n, c in lists.items()}, self.settings.rrf_k)
        seq_of = {ref: seq for c in lists.values() for ref, seq in c.seq_of.items()}
        timings["fusion"] = _ms(t)

        # The relevance MMR trades against diversity: the fused score in hybrid
        # mode, the retriever's own score in a single mode.
        single = next(iter(lists)) if len(lists) == 1 else None
        relevance = [f.raw[single] if single else f.score for f in fused]
        order = list(range(len(fused)))
        if rerank and len(fused) > 1:
            # MMR reorders the head of the fused list only, so the first picks
            # do not depend on k, and a weak tail candidate cannot jump ahead
            # just for being unlike everything else.
            t = time.perf_counter()
            depth = min(len(fused), self.settings.mmr_depth)
            head = fused[:depth]
            vectors = searcher.vectors([seq_of[f.ref] for f in head])
            picked = mmr([f.ref for f in head], relevance[:depth], vectors, depth, self.settings.mmr_lambda)
            order = picked + order[depth:]
            timings["mmr"] = _ms(t)
        order = order[:k_used]

        chosen = [fused[i] for i in order]
        rows = searcher.passages([seq_of[f.ref] for f in chosen])
        names = searcher.document_names([rows[seq_of[f.ref]].doc_ref for f in chosen])
        hits = []
        for rank, (position, f) in enumerate(zip(order, chosen), start=1):
            row = rows[seq_of[f.ref]]
            hits.append(Hit(
                rank=rank,
                score=relevance[position],
                text=row.text,
                passage_ref=f.ref,
                document_ref=row.doc_ref,
                document_name=names[row.doc_ref],
                chunk_index=row.chunk_index,
                chunk_count=row.chunk_count,
                char_start=row.char_start,
                char_end=row.char_end,
                dense_rank=f.ranks.get("dense"),
                dense_score=f.raw.get("dense"),
                sparse_rank=f.ranks.get("sparse"),
                sparse_score=f.raw.get("sparse"),
                fused_score=f.score,
                fused_rank=position + 1,
                mmr_moved=position + 1 - rank,
            ))
        timings["total"] = _ms(started)
        return QueryResult(name, text, mode, rerank, k_used, requested, hits, notes, timings)

    def _check_mode(self, mode: str | None) -> str:
        chosen = self.settings.default_mode if mode is None else mode
        if not isinstance(chosen, str) or chosen.strip().lower() not in MODES:
            raise invalid(f"mode must be one of {', '.join(MODES)}, got {chosen!r}")
        return chosen.strip().lower()

    def _check_query_vector(self, vector: Any) -> np.ndarray | None:
        if vector is None:
            return None
        try:
            array = np.asarray(vector, dtype=np.float32)
        except (TypeError, ValueError):
            raise invalid("the query vector must be a list of numbers") from None
        if array.ndim != 1 or array.shape[0] == 0:
            raise invalid(f"the query vector must be a flat, non-empty list of numbers; got shape {array.shape}")
        if not np.all(np.isfinite(array)):
            raise invalid("the query vector contains NaN or infinite values")
        if not np.any(array):
            raise invalid("the query vector is all zeros and has no direction")
        return array

    def _check_query_fingerprint(self, name: str, stored: Fingerprint, card: ModelCard | None) -> None:
        current = current_fingerprint(self.settings, card, stored.dimension)
        check_compatible(name, stored, current, ignore_model=card is None)

    def _searcher(self, name: str) -> DatasetSearcher:
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

    def close(self) -> None:
        with self._searchers_lock:
            for searcher in self._searchers.values():
                searcher.close()
            self._searchers.clear()


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)


def _refused(doc: DocumentInput, error: KxError) -> DocumentResult:
    return DocumentResult(doc.name, REFUSED, None, 0, doc.source_path, error.status.name, error.message)
