"""Query-time readers for one dataset: the catalogue, the dense graph and the BM25 index.

Opening them costs milliseconds to seconds (loading the graph, opening whoosh
segments), so the engine keeps one `DatasetSearcher` per dataset and reopens it
only when the catalogue has grown. Scores are rounded to 6 decimals before
ranking: float noise between CPUs must not reorder passages, the ref decides.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .dataset import Dataset
from .filters import PassageFilter, Where
from .fingerprint import Fingerprint
from .fusion import Ranked, rank_list
from .sparse import Bm25Scorer
from .store import Catalogue, DocumentRow, LineageState, PassageRow

_SCORE_DECIMALS = 6
# Sparse queries look up at most this many distinct indexed terms (the rarest):
# a pasted 100,000-character query must not turn into an OR of 20,000 postings.
MAX_QUERY_TERMS = 512
# seq -> passage ref entries kept in memory per open dataset (~100 bytes each)
_REF_CACHE_LIMIT = 500_000
# A filtered dense search scores at most this many allowed passages exactly (their stored vectors, cached
# per filter); a larger allowed set searches the graph widened until the pool is full of allowed passages.
EXACT_FILTER_LIMIT = 4096


def dense_ef(pool: int) -> int:
    """HNSW search breadth for a candidate pool.

    Measured on SciFact (11,776 passages, pool 100, benchmarks/latency.py):
    ef 256 recalls 0.992 of the exact top 100, ef 400 0.998, for 0.14 ms more.
    """
    return max(4 * pool, 256)


@dataclass
class Candidates:
    """One retriever's ranked list, as passage refs with raw scores."""

    hits: list[Ranked]
    seq_of: dict[str, Any]   # ref -> the key the backend reads passages by (a seq here, the ref in Milvus)
    dropped_terms: int = 0   # query terms left out to keep a huge query fast
    kept_terms: str = "rarest"  # which MAX_QUERY_TERMS terms a huge query kept (said in the query's notes)


class Searcher(Protocol):
    """What engine/query.py reads a dataset through: the embedded `DatasetSearcher` below, or another
    backend's (engine/milvus/search.py). Passage keys (`seq_of` values) are whatever the backend numbers
    passages by: commit-order integers here, refs in Milvus."""

    fingerprint: Fingerprint
    notes: list[str]
    dense_passages: int   # passages the dense index holds (embedded so far)
    total_passages: int   # passages committed (all of them keyword-searchable)

    def dense_candidates(self, vector: np.ndarray, pool: int, only: PassageFilter | None = None) -> Candidates: ...

    def sparse_candidates(self, text: str, pool: int, only: PassageFilter | None = None) -> Candidates: ...

    def passage_filter(self, where: Where, versions: str) -> PassageFilter | None:
        """The passages a query may answer with: `where`'s, of the current versions only unless
        `versions` is "all"; None when that is every passage."""
        ...

    def versions(self, documents: dict[str, DocumentRow]) -> dict[str, tuple[int, str | None]]:
        """For documents (by ref): (version number from 1, the ref of the version superseding it or None)."""
        ...

    def passages(self, seqs: list[Any]) -> dict[Any, PassageRow]: ...

    def vectors(self, seqs: list[Any]) -> np.ndarray: ...

    def documents(self, refs: list[str]) -> dict[str, DocumentRow]: ...


class DatasetSearcher:
    """Open readers for one dataset. Callers use it under `lock` (whoosh and SQLite
    handles are not safe to share between threads mid-call) and check `closed`."""

    def __init__(self, dataset: Dataset, bm25_k1: float, bm25_b: float) -> None:
        self.lock = threading.RLock()
        self.closed = False
        self.dataset = dataset
        self.catalogue: Catalogue = dataset.reading()
        fingerprint = self.catalogue.fingerprint()
        if fingerprint is None:  # a dataset whose first ingest never committed
            self.catalogue.close()
            raise ValueError("empty dataset")
        self.fingerprint: Fingerprint = fingerprint
        self.dense = dataset.dense(fingerprint.dimension, self.catalogue.dataset_id)
        self.sparse = dataset.sparse(fingerprint.stopwords, self.catalogue.dataset_id)
        # The least that every part holds: opened between a writer's commit
        # and its index catch-up, this searcher must not count as current
        # once the indexes have caught up (a long-lived gateway would keep
        # answering without the new passages). Watermarks read before loading.
        # While an ingest's embedding stage works through the backlog, the
        # dense index holds fewer passages than the catalogue: these readers
        # say how many, and count as current until the catalogue or either
        # index moves on.
        self._state = self._read_state()
        self.top = min(self._state)
        self.dense.load()
        self.total_passages = self.catalogue.passages_upto(self._state[0])
        self.dense_passages = min(self.catalogue.passages_upto(min(self._state[1], self.dense.held)),
                                  self.total_passages)
        self._dense_trusted = self.dense.consistent_with(self.catalogue)
        if not self._dense_trusted:  # edited or foreign files a writer could not rebuild yet: never their answers
            self.dense_passages = 0
        self._lineage_mark = self.catalogue.lineage_mark()
        self._lineage_state: LineageState | None = None
        self._filters: dict[tuple[Where, str], PassageFilter | None] = {}
        self._exact: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id(filter) -> (seqs, vectors)
        self._bm25 = (bm25_k1, bm25_b)
        self._bm25_scorer: Bm25Scorer | None = None
        self._ref_of: dict[int, str] = {}
        self.notes: list[str] = []  # said with every answer from these readers (e.g. indexes behind)
        if not self._dense_trusted:
            self.notes.append("the dense index does not match this dataset's catalogue (edited or copied files); "
                              "it is left out until the next writer rebuilds it from the catalogue")

    def _read_state(self) -> tuple[int, int, int]:
        return self.catalogue.max_passage_seq(), self.dense.watermark, self.sparse.watermark

    def current(self) -> bool:
        """Still a faithful view: nothing was committed, embedded or indexed since it was opened."""
        with self.lock:
            return (not self.closed and self._read_state() == self._state
                    and self.catalogue.lineage_mark() == self._lineage_mark)  # a retirement moves no index

    def close(self) -> None:
        with self.lock:  # waits for a query in flight on these readers
            if self.closed:
                return
            self.closed = True
            if self._bm25_scorer is not None:
                self._bm25_scorer.close()
            self.catalogue.close()

    def _refs(self, pairs: list[tuple[int, float]]) -> Candidates:
        missing = [seq for seq, _ in pairs if seq not in self._ref_of]
        if missing:
            if len(self._ref_of) > _REF_CACHE_LIMIT:
                self._ref_of.clear()
            self._ref_of.update(self.catalogue.refs_by_seq(missing))
        known = [(seq, score) for seq, score in pairs if seq in self._ref_of]
        seq_of = {self._ref_of[seq]: seq for seq, _ in known}
        hits = rank_list(Ranked(self._ref_of[seq], round(score, _SCORE_DECIMALS)) for seq, score in known)
        return Candidates(hits, seq_of)

    def dense_candidates(self, vector: np.ndarray, pool: int, only: PassageFilter | None = None) -> Candidates:
        if not self._dense_trusted:
            return Candidates([], {})
        if only is not None:
            return self._refs(self._dense_filtered(vector, pool, only))
        return self._refs(self.dense.search(vector, pool, dense_ef(pool)))

    def _dense_filtered(self, vector: np.ndarray, pool: int, only: PassageFilter) -> list[tuple[int, float]]:
        """The pool's nearest allowed passages: an exact pass over a small allowed set, else the graph
        searched ever wider (an excluded set of E passages: pool + E deep, enough at once)."""
        top = min(self._state[1], self.dense.held)  # what the graph holds
        if only.allowed is not None and int(np.searchsorted(only.allowed, top, side="right")) <= EXACT_FILTER_LIMIT:
            return self._exact_pass(vector, pool, only, top)
        held = len(self.dense)
        if held == 0:
            return []
        hidden = only.hidden(held)
        if only.allowed is None and hidden <= 4 * pool:
            k = min(held, pool + hidden)  # enough at once: at most `hidden` of them are dropped
        else:
            allowed = int(np.searchsorted(only.allowed, top, side="right")) if only.allowed is not None \
                else held - hidden
            k = min(held, max(2 * pool, int(2 * pool * held / max(allowed, 1))))
        while True:
            try:
                pairs = self.dense.search(vector, k, dense_ef(k))
            except Exception:  # voyager's RecallError on a deep search of a small graph: count exactly
                return self._exact_pass(vector, pool, only, top)
            keep = only.admits(np.array([seq for seq, _ in pairs], dtype=np.int64))
            found = [pair for pair, ok in zip(pairs, keep) if ok]
            if len(found) >= pool or k >= held:
                return found[:pool]
            k = min(held, k * 4)

    def _exact_pass(self, vector: np.ndarray, pool: int, only: PassageFilter, top: int) -> list[tuple[int, float]]:
        cached = self._exact.get(id(only))
        if cached is None:  # this searcher's `top` never moves: a newer one is opened
            if only.allowed is not None:
                seqs = only.allowed[only.allowed <= top]
            else:
                every = np.array([s for rows in self.catalogue.iter_passages_after(0, top) for s, _t, _v in rows],
                                 dtype=np.int64)
                seqs = every[only.admits(every)]
            cached = (seqs, self.catalogue.vectors_by_seq(seqs.tolist(), self.fingerprint.dimension))
            self._exact[id(only)] = cached
        seqs, vectors = cached
        if seqs.size == 0:
            return []
        query = np.asarray(vector, dtype=np.float32)
        query = query / (float(np.linalg.norm(query)) or 1.0)
        sims = vectors @ query
        order = np.argsort(-sims, kind="stable")[:pool]
        return [(int(seqs[i]), float(sims[i])) for i in order]

    def passage_filter(self, where: Where, versions: str) -> PassageFilter | None:
        key = (where, versions)
        if key not in self._filters:
            if len(self._filters) >= 16:
                self._filters.clear()
                self._exact.clear()
            hidden = self._lineages().hidden() if versions == "latest" else set()
            found: PassageFilter | None = None
            if where:
                found = PassageFilter(allowed=self.catalogue.allowed_seqs(where, hidden))
            elif hidden:
                found = PassageFilter(excluded=self.catalogue.seqs_of_documents(sorted(hidden)))
            self._filters[key] = found
        return self._filters[key]

    def _lineages(self) -> LineageState:
        if self._lineage_state is None:
            self._lineage_state = self.catalogue.lineage_state()
        return self._lineage_state

    def versions(self, documents: dict[str, DocumentRow]) -> dict[str, tuple[int, str | None]]:
        state = self._lineages()
        return {ref: state.describe(ref, row.name)[:2] for ref, row in documents.items()}

    def sparse_candidates(self, text: str, pool: int, only: PassageFilter | None = None,
                          term_weights: dict[str, float] | None = None) -> Candidates:
        # `term_weights`: each term's BM25 weight instead of its count in `text` (an expanded query)
        counts: dict[str, float] = dict(self.sparse.term_counts(text)) if term_weights is None else term_weights
        if not counts or not self.sparse.folder.exists():
            return Candidates([], {})
        scorer = self._scorer()
        known = [(scorer.document_frequency(t), t) for t in counts]
        known = [(df, t) for df, t in known if df > 0]
        dropped = 0
        if len(known) > MAX_QUERY_TERMS:
            # the rarest terms carry the most BM25 weight; keep those
            known.sort()
            dropped = len(known) - MAX_QUERY_TERMS
            known = known[:MAX_QUERY_TERMS]
        if not known:
            return Candidates([], {})
        terms, weights = [t for _df, t in known], [counts[t] for _df, t in known]
        if only is None:
            pairs = scorer.top(terms, pool, weights)
        elif only.allowed is not None:  # score only the allowed passages' postings
            pairs = scorer.top(terms, pool, weights, mask=only.admits(scorer.docnum_seqs()))
        else:  # E passages kept out: pool + E deep holds the pool's best allowed ones
            pairs = scorer.top(terms, pool + only.hidden(0), weights)
            keep = only.admits(np.array([seq for seq, _ in pairs], dtype=np.int64))
            pairs = [pair for pair, ok in zip(pairs, keep) if ok][:pool]
        found = self._refs(pairs)
        found.dropped_terms = dropped
        return found

    def sparse_expanded(self, text: str, feedback: list[tuple[str, float]], pool: int,
                        only: PassageFilter | None = None) -> tuple[Candidates, list[str]]:
        """The sparse list for `text` expanded with RM3 terms from `feedback` (passage text, weight)
        (engine/expansion.py), and the terms added."""
        from .expansion import rm3_weights

        scorer = self._scorer()
        weights, added = rm3_weights(self.sparse.term_counts(text),
                                     [(self.sparse.term_counts(body), w) for body, w in feedback],
                                     scorer.document_frequency)
        return self.sparse_candidates(text, pool, only, term_weights=weights), added

    def _scorer(self) -> Bm25Scorer:
        if self._bm25_scorer is None:
            self._bm25_scorer = self.sparse.open_scorer(*self._bm25)
        return self._bm25_scorer

    def passages(self, seqs: list[int]) -> dict[int, PassageRow]:
        return self.catalogue.passages_by_seq(seqs)

    def vectors(self, seqs: list[int]) -> np.ndarray:
        return self.catalogue.vectors_by_seq(seqs, self.fingerprint.dimension)

    def documents(self, refs: list[str]) -> dict[str, DocumentRow]:
        """The hits' documents (name, title, source path), one catalogue read for all of them."""
        return self.catalogue.documents_by_ref(refs)
