"""Query-time readers for one dataset: the catalogue, the dense graph and the BM25 index.

Opening them costs milliseconds to seconds (loading the graph, opening whoosh
segments), so the engine keeps one `DatasetSearcher` per dataset and reopens it
only when the catalogue has grown. Scores are rounded to 6 decimals before
ranking: float noise between CPUs must not reorder passages, the ref decides.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from typing import Any, Callable

import numpy as np

from ..errors import KxError, Status
from ..filters import PassageFilter, Where
from ..fingerprint import Fingerprint
from ..lineage import LineageMarks, LineageView, SimpleLineage
from ..retrieval import MAX_QUERY_TERMS, Candidates, Searcher  # noqa: F401 - Searcher: the face it has
from ..rows import DocumentRow, PassageRow
from .dataset import Dataset
from .filtered import EXACT_FILTER_BYTES, FilterVectors, exact_pass, widened_pass
from .sparse_port import SparseIndexPort, TermScorer
from .storage_errors import damaged_catalogue
from .store import Catalogue

# seq -> passage ref entries kept in memory per open dataset (~100 bytes each)
_REF_CACHE_LIMIT = 500_000


def _identity(path: os.PathLike) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _read_missing(cache: dict[int, Any], keys: list[int], read: Callable[[list[int]], dict[int, Any]]) -> list[int]:
    """Fill `cache` with `read`'s values for the keys it lacks (emptied first past _REF_CACHE_LIMIT entries);
    returns the keys that were missing."""
    missing = [seq for seq in keys if seq not in cache]
    if missing:
        if len(cache) > _REF_CACHE_LIMIT:
            cache.clear()
        cache.update(read(missing))
    return missing


def dense_ef(pool: int) -> int:
    """HNSW search breadth for a candidate pool.

    Measured on SciFact (11,776 passages, pool 100, benchmarks/latency.py):
    ef 256 recalls 0.992 of the exact top 100, ef 400 0.998, for 0.14 ms more.
    """
    return max(4 * pool, 256)


def shown_documents(rows: dict[str, DocumentRow], state: LineageView) -> dict[str, DocumentRow]:
    """`rows` with a renamed lineage's documents under the name (and path) the lineage has now."""
    if not state.renamed:
        return rows
    out = {}
    for ref, row in rows.items():
        name, path = state.shown(ref, row.name, row.source_path)
        out[ref] = row if (name, path) == (row.name, row.source_path) else \
            dataclasses.replace(row, name=name, source_path=path)
    return out


class DatasetSearcher:
    """Open readers for one dataset. Callers use it under `lock` (whoosh and SQLite
    handles are not safe to share between threads mid-call) and check `closed`."""

    expands_sparse = True  # its BM25 is scored here: query expansion reaches the sparse list too

    def __init__(self, dataset: Dataset, bm25_k1: float, bm25_b: float,
                 previous: DatasetSearcher | None = None) -> None:
        """`previous`: the readers this one replaces (the dataset moved on); what they read that is still
        true is carried over instead of read again (the lineage state, advanced by the new rows)."""
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
        if previous is not None:  # the graph it loaded, where it is still the one on disk (engine/embedded/dense.py)
            self.dense.adopt(previous.dense)
        self.sparse: SparseIndexPort = dataset.sparse(fingerprint.stopwords, self.catalogue.dataset_id)
        # The least that every part holds: opened between a writer's commit
        # and its index catch-up, this searcher must not count as current
        # once the indexes have caught up (a long-lived gateway would keep
        # answering without the new passages). Watermarks read before loading.
        # While an ingest's embedding stage works through the backlog, the
        # dense index holds fewer passages than the catalogue: these readers
        # say how many, and count as current until the catalogue or either
        # index moves on.
        self._signature = self._read_signature()
        self._state = self._read_state()
        self.top = min(self._state)
        self.dense.load(self.catalogue)
        self.total_passages = self.catalogue.passages_upto(self._state[0])
        # what the keyword index holds: all of them, unless its commit failed after the catalogue's (a full
        # disk) and no writer could catch it up since; that gap is a backlog the next writer fills
        self.sparse_passages = min(self.catalogue.passages_upto(self._state[2]), self.total_passages)
        self.dense_passages = min(self.catalogue.passages_upto(min(self._state[1], self.dense.held)),
                                  self.total_passages)
        self._dense_trusted = self.dense.consistent_with(self.catalogue)
        if not self._dense_trusted:  # edited or foreign files a writer could not rebuild yet: never their answers
            self.dense_passages = 0
        self._lineage_mark = self.catalogue.lineage_mark()
        self._lineage_state: LineageView | None = None
        # what the state was read up to: the whole state and its marks, or a simple history's (see _lineages)
        self._lineage_known: LineageMarks | SimpleLineage | None = None
        self.dataset_id = self.catalogue.dataset_id
        if previous is not None and previous.dataset_id == self.dataset_id:
            self._lineage_known = previous._lineage_known  # advanced on first use: a reopen reads the new rows
        self._filters: dict[tuple[Where, str], PassageFilter | None] = {}
        self._filter_keys: dict[int, tuple[Where, str]] = {}   # id(filter) -> its (where, versions)
        self._masks: dict[int, np.ndarray] = {}   # id(filter) -> its mask over the BM25 scorer's positions
        # what a filter resolved to: (allowed seqs, the last document read, hidden and renamed as they were then)
        self._resolved: dict[tuple[Where, str], tuple[np.ndarray, int, frozenset[str], dict]] = {}
        self._hidden_refs: frozenset[str] | None = None
        # A reader reopened on the same graph (no repair, no rebuild since) takes over the filters' passages and
        # the exact passes' vectors of the one it replaces, and works out only what changed
        carried: FilterVectors | None = None
        self._carried_filters: dict[tuple[Where, str], tuple[np.ndarray, int, frozenset[str], dict]] = {}
        if previous is not None and previous.dataset_id == self.dataset_id and previous.fingerprint == fingerprint \
                and self.dense.shares_graph(previous.dense):
            carried, self._carried_filters = previous._exact, previous._resolved
        self._exact: FilterVectors = FilterVectors(EXACT_FILTER_BYTES, carried)
        self._bm25 = (bm25_k1, bm25_b)
        self._bm25_scorer: TermScorer | None = None
        self._ref_of: dict[int, str] = {}
        self._count_of: dict[int, int] = {}
        self._longest: int | None = None
        self.notes: list[str] = []  # said with every answer from these readers (e.g. indexes behind)
        self.retry_at: float | None = None  # opened with indexes that could not catch up: when to try again
        if not self._dense_trusted:
            self.notes.append("the dense index does not match this dataset's catalogue (edited or copied files); "
                              "it is left out until the next writer rebuilds it from the catalogue")
        self._sparse_unusable: str | None = None
        self._sparse_trusted = self.sparse.consistent_with(self.catalogue)
        if not self._sparse_trusted:  # a fork's index a writer could not rebuild yet: never its answers
            self.notes.append("the keyword index does not match this dataset's catalogue (copied files); it is "
                              "left out until the next writer rebuilds it from the catalogue")
        self.dense_problem: str | None = None
        if not os.access(dataset.folder, os.W_OK):
            self._refuse_unrebuildable()

    def _refuse_unrebuildable(self) -> None:
        """On a home nobody can write (a read-only mount), an index its sidecar no longer vouches for (damaged,
        missing, made by another tokenizer) cannot be rebuilt from the catalogue, as opening it on a writable
        home does first; so its files are never read. Whoosh fails on garbage segments with EINVAL, and a
        graph trusted for nothing would read as passages "not embedded", which they are."""
        folder, name = self.dataset.folder, self.dataset.name
        sparse_bad = self._state[0] > 0 and self._state[2] == 0
        dense_bad = self.dense_passages == 0 and self.catalogue.embedded_prefix() > 0
        why = (f"kx rebuilds them from the catalogue when it opens them, but {folder} cannot be written (a "
               "read-only home). The catalogue itself is intact (`kx datasets documents` still reads it); run one "
               f"query where KX_HOME can be written, or copy {folder} to a writable KX_HOME, and it is rebuilt")
        if sparse_bad and dense_bad:
            self.catalogue.close()
            raise KxError(Status.FAILED_PRECONDITION,
                          f"dataset '{name}''s indexes ({folder / 'sparse'} and {self.dense.path}) are damaged or "
                          f"missing; {why}")
        if sparse_bad:  # dense-only queries still answer from the graph
            self._sparse_unusable = (f"dataset '{name}''s keyword index {folder / 'sparse'} is damaged or "
                                     f"missing; {why}")
        if dense_bad:   # keyword queries still answer; hybrid says what it left out; dense alone refuses
            self.dense_problem = f"dataset '{name}''s dense index {self.dense.path} is damaged or missing; {why}"
            self.notes.append(f"the dense index {self.dense.path} is damaged or missing and cannot be rebuilt on "
                              "this read-only home: dense results are left out (the catalogue is intact)")

    def _read_state(self) -> tuple[int, int, int]:
        return self.catalogue.max_passage_seq(), self.dense.watermark, self.sparse.watermark

    def _read_signature(self) -> tuple[int, tuple]:
        """What the state depends on, read without reading it: the catalogue's commit counter and the
        identity (inode, size, mtime) of the sidecars and of the index files they vouch for. Files are
        replaced, never rewritten in place, and a damaged one changes size or mtime. Remembers the files."""
        files = [self.dense.sidecar, self.dense.path, *self.sparse.signature_files()]
        self._signature_files = files
        return self.catalogue.data_version(), tuple(_identity(path) for path in files)

    def current(self) -> bool:
        """Still a faithful view: nothing was committed, embedded or indexed since it was opened.

        Each query asks this: one catalogue pragma and a few stats answer while nothing moved; the
        sidecars, checksums and catalogue are read again only when something did (the state may still be
        the same: then the new signature is kept).
        """
        with self.lock:
            if self.closed:
                return False
            if self.retry_at is not None and time.monotonic() >= self.retry_at:
                return False   # reopened: the indexes try to catch up again (engine/embedded/engine.py)
            if (self.catalogue.data_version(), tuple(_identity(p) for p in self._signature_files)) == self._signature:
                return True
            signature = self._read_signature()  # before the state: a change in between is seen next time
            if self._read_state() != self._state or self.catalogue.lineage_mark() != self._lineage_mark:
                return False  # a retirement moves no index, only the lineage mark
            self._signature = signature
            return True

    def close(self) -> None:
        with self.lock:  # waits for a query in flight on these readers
            if self.closed:
                return
            self.closed = True
            if self._bm25_scorer is not None:
                self._bm25_scorer.close()
            self.catalogue.close()

    def refs(self, keys: list[int]) -> list[str | None]:
        """Each seq's passage ref, read from the catalogue once per reader (the ties' tie-breaker)."""
        ref_of = self._ref_of
        missing = _read_missing(ref_of, keys, self.catalogue.refs_by_seq)
        lost = next((seq for seq in missing if seq not in ref_of), None)
        if lost is not None:  # passages are never deleted here: an index's seq without a row is a row lost
            raise damaged_catalogue(self.catalogue.path, f"passage {lost} is in the dataset's indexes but its "
                                                         "row is gone from the catalogue")
        return [ref_of.get(seq) for seq in keys]

    def longest_document(self) -> int:
        """The most passages a document of this reader's catalogue holds, read once per reader."""
        if self._longest is None:
            self._longest = self.catalogue.longest_document()
        return self._longest

    def chunk_counts(self, keys: list[int]) -> list[int]:
        """Each seq's document's passage count, read from the catalogue once per reader (1 for a seq with
        no row: refs() says that row is lost)."""
        _read_missing(self._count_of, keys, self.catalogue.chunk_counts_by_seq)
        return [self._count_of.get(seq, 1) for seq in keys]

    def dense_candidates(self, vector: np.ndarray, pool: int, only: PassageFilter | None = None) -> Candidates:
        if not self._dense_trusted:
            return Candidates.empty()
        if only is not None:
            seqs, sims = self._dense_filtered(vector, pool, only)
        else:
            seqs, sims = self.dense.search_arrays(vector, pool, dense_ef(pool))
        return Candidates.of(seqs.tolist(), sims)

    def _dense_filtered(self, vector: np.ndarray, pool: int, only: PassageFilter) -> tuple[np.ndarray, np.ndarray]:
        """The pool's nearest allowed passages (engine/embedded/filtered.py): an exact pass over an allowed set
        whose vectors fit the budget, else the graph searched ever wider (an excluded set of E passages:
        pool + E deep, enough at once)."""
        top = min(self._state[1], self.dense.held)  # what the graph (and its tail) holds
        seqs = None if only.allowed is None else only.allowed[:int(np.searchsorted(only.allowed, top, side="right"))]
        if seqs is not None and self._exact.fits(seqs.size, self.fingerprint.dimension):
            # a filter not from passage_filter (not kept, so its id may come again): rows are matched by seq
            key = self._filter_keys.get(id(only), ("unkept", id(only)))
            vectors = self._exact.vectors(key, seqs, self._read_vectors, self.fingerprint.dimension)
            return exact_pass(self.dense, vector, pool, seqs, vectors)
        found = widened_pass(self.dense, vector, pool, -1 if seqs is None else int(seqs.size),
                             only.hidden(len(self.dense)), only.admits, dense_ef)
        if found is not None:
            return found
        if seqs is None:  # voyager could not search that deep (a small graph): count exactly
            every = np.array([s for rows in self.catalogue.iter_passages_after(0, top) for s, _t, _v in rows],
                             dtype=np.int64)
            seqs = every[only.admits(every)]
        return exact_pass(self.dense, vector, pool, seqs, self._read_vectors(seqs.tolist()))

    def _read_vectors(self, seqs: list[int]) -> np.ndarray:
        return self.catalogue.vectors_by_seq(seqs, self.fingerprint.dimension)

    def passage_filter(self, where: Where, versions: str) -> PassageFilter | None:
        key = (where, versions)
        if key not in self._filters:
            if len(self._filters) >= 16:
                self._filters.clear()
                self._filter_keys.clear()
                self._masks.clear()
                self._resolved.clear()
            hidden = self._hidden() if versions == "latest" else frozenset()
            found: PassageFilter | None = None
            if where:
                found = PassageFilter(allowed=self._allowed(key, hidden))
            elif hidden:
                found = PassageFilter(excluded=self.catalogue.seqs_of_documents(sorted(hidden)))
            self._filters[key] = found
            if found is not None:
                self._filter_keys[id(found)] = key
        return self._filters[key]

    def _hidden(self) -> frozenset[str]:
        """The documents the latest-versions view leaves out, read once per reader."""
        if self._hidden_refs is None:
            self._hidden_refs = frozenset(self._lineages().hidden())
        return self._hidden_refs

    def _allowed(self, key: tuple[Where, str], hidden: frozenset[str]) -> np.ndarray:
        """The passages `key`'s filter lets through. A reader reopened after a commit starts from what the one it
        replaced found for the same filter while the lineage state only moved on (the same renames, no document
        shown again): the new documents' passages are added and those of documents hidden since taken out, so
        a filter over 100,000 documents' names is not matched again after every small commit."""
        renamed = self._lineages().renamed
        before = self._carried_filters.get(key)
        if before is not None and before[2] <= hidden and before[3] == renamed:
            more, last = self.catalogue.allowed_seqs(key[0], hidden, renamed, after_document=before[1])
            allowed = np.union1d(before[0], more)
            if hidden != before[2]:
                gone = self.catalogue.seqs_of_documents(sorted(hidden - before[2]))
                allowed = np.setdiff1d(allowed, gone, assume_unique=True)
        else:
            allowed, last = self.catalogue.allowed_seqs(key[0], hidden, renamed)
        self._resolved[key] = (allowed, last, hidden, renamed)
        return allowed

    def _lineages(self) -> LineageView:
        """The lineage state, read on first use. A simple history (every document its name's one version,
        nothing retired or renamed: engine/lineage.py SimpleLineage) is recognised without building the
        state; once it is not simple, the whole state is built and later reopens advance it."""
        if self._lineage_state is None:
            known = self._lineage_known
            if known is None or isinstance(known, SimpleLineage):
                simple = self.catalogue.simple_lineage_after(known)
                if simple is not None:
                    self._lineage_known = self._lineage_state = simple
                    return simple
                known = None
            self._lineage_known = self.catalogue.lineage_state_after(known)
            self._lineage_state = self._lineage_known.state
        return self._lineage_state

    def versions(self, documents: dict[str, DocumentRow]) -> dict[str, tuple[int, str | None]]:
        state = self._lineages()
        return {ref: state.describe(ref, row.name)[:2] for ref, row in documents.items()}

    def sparse_candidates(self, text: str, pool: int, only: PassageFilter | None = None,
                          term_weights: dict[str, float] | None = None) -> Candidates:
        # `term_weights`: each term's BM25 weight instead of its count in `text` (an expanded query)
        if self._sparse_unusable:
            raise KxError(Status.FAILED_PRECONDITION, self._sparse_unusable)
        counts: dict[str, float] = dict(self.sparse.term_counts(text)) if term_weights is None else term_weights
        if not counts or not self.sparse.exists() or not self._sparse_trusted:
            return Candidates.empty()
        scorer = self._scorer()
        # a term only superseded versions hold counts 0 in the statistics, yet an all-versions query finds it;
        # a term only a document's name holds (the name field) is looked up too
        known = [(scorer.document_frequency(t), t) for t in counts if scorer.indexed(t)]
        dropped = 0
        if len(known) > MAX_QUERY_TERMS:
            # the rarest terms carry the most BM25 weight; keep those
            known.sort()
            dropped = len(known) - MAX_QUERY_TERMS
            known = known[:MAX_QUERY_TERMS]
        if not known:
            return Candidates.empty()
        terms, weights = [t for _df, t in known], [counts[t] for _df, t in known]
        if only is None:
            seqs, scores = scorer.top_arrays(terms, pool, weights)
        elif only.allowed is not None:  # score only the allowed passages' postings
            mask = self._masks.get(id(only))
            if mask is None:
                mask = only.admits(scorer.docnum_seqs())
                if id(only) in self._filter_keys:  # a kept filter, and the scorer is this reader's for good
                    self._masks[id(only)] = mask
            seqs, scores = scorer.top_arrays(terms, pool, weights, mask=mask)
        else:  # E passages kept out: pool + E deep holds the pool's best allowed ones
            seqs, scores = scorer.top_arrays(terms, pool + only.hidden(0), weights)
            keep = only.admits(seqs)
            seqs, scores = seqs[keep][:pool], scores[keep][:pool]
        found = Candidates.of(seqs.tolist(), scores)
        found.dropped_terms = dropped
        return found

    def sparse_expanded(self, text: str, feedback: list[tuple[str, float]], pool: int,
                        only: PassageFilter | None = None) -> tuple[Candidates, list[str]]:
        """The sparse list for `text` expanded with RM3 terms from `feedback` (passage text, weight)
        (engine/expansion.py), and the terms added."""
        from ..expansion import rm3_weights

        scorer = self._scorer()
        weights, added = rm3_weights(self.sparse.term_counts(text),
                                     [(self.sparse.term_counts(body), w) for body, w in feedback],
                                     scorer.document_frequency)
        return self.sparse_candidates(text, pool, only, term_weights=weights), added

    def _scorer(self) -> TermScorer:
        if self._bm25_scorer is None:
            # statistics from the current passages only: superseded and retired documents' never count
            hidden = self._lineages().hidden()
            self._bm25_scorer = self.sparse.open_scorer(
                *self._bm25, self.catalogue.seqs_of_documents(sorted(hidden)) if hidden else None)
        return self._bm25_scorer

    def passages(self, seqs: list[int]) -> dict[int, PassageRow]:
        return self.catalogue.passages_by_seq(seqs)

    def vectors(self, seqs: list[int]) -> np.ndarray:
        return self.catalogue.vectors_by_seq(seqs, self.fingerprint.dimension)

    def documents(self, refs: list[str]) -> dict[str, DocumentRow]:
        """The hits' documents (name, title, source path), one catalogue read for all of them; a renamed
        file's under the name and path it has now."""
        found = self.catalogue.documents_by_ref(refs)
        lost = next((ref for ref in refs if ref not in found), None)
        if lost is not None:  # a hit named by 12 hex digits, its title and path gone: the row was lost
            raise damaged_catalogue(self.catalogue.path, f"document {lost[:12]}... has passages but no row")
        return shown_documents(found, self._lineages())
