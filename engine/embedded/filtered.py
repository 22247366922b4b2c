"""The dense side of a filtered query: the pool's nearest passages among those a `--where` filter allows.

voyager has no filtered search. An HNSW graph searched for the nearest k
and then filtered must go about pool / (allowed share) deep to keep a full
pool, and its breadth (ef, 4 k) grows with it: at 200k passages a filter
keeping 10 % searched 2,000 deep at ef 8,000 (~150 ms), one keeping 2.5 %
8,000 deep at ef 32,000 (~210 ms), against ~12 ms unfiltered. Scoring the
allowed passages' stored vectors exactly costs ~0.4 µs a passage (384-d):
20,000 of them are a few ms. So an allowed set whose vectors fit
half of `EXACT_FILTER_BYTES` is scored exactly, its vectors read from the catalogue
once per filter and kept (least recently used out past the budget; a reader
reopened after a commit keeps the rows still allowed and reads only the
new ones); a larger one (a filter keeping most of a big dataset, shallow in
the graph anyway) searches the graph widened, as before.

Scores: a set of at most `EXACT_FILTER_LIMIT` passages was always scored
exactly and keeps its numpy scores. A larger one used to come from the
graph: its exact pass picks its candidates with numpy, then scores them as
the graph search did (voyager's own distance for passages in the graph,
the tail's product for the tail's), so the answers stay those of a graph
search that missed nothing, and a passage scores the same with the filter
as without it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Hashable

import numpy as np

from .dense import DenseIndex, best_first

# Allowed sets of at most this many passages have always been scored exactly, with numpy (their scores stay so).
EXACT_FILTER_LIMIT = 4096
# The stored vectors an open dataset's readers keep for exact filtered passes, all filters together; one filter
# takes at most half, so two large ones never push each other out in turns (each would be read again on every
# query). Half is 160 MiB: ~109,000 passages at 384 dimensions, a filter keeping 10 % of a million. A larger
# allowed set searches the graph widened (shallow: it keeps a large share of the passages).
EXACT_FILTER_BYTES = 320 * 2**20
# Candidates within this much of the pool's last numpy score are scored again by the graph's distance: the two
# computations of one cosine differ by a few float32 ulps (~1e-7), far inside it.
_MARGIN = 1e-6

_READ_ROWS = 8192   # vectors read from the catalogue at a time
_NO_PAIRS = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))
Read = Callable[[list[int]], np.ndarray]   # seqs -> their stored vectors, row for row


class FilterVectors:
    """The stored vectors of filters' allowed passages (sorted seqs, one row each), by filter key, within a
    byte budget: the least recently used filter goes first. Each reader has its own, used under its lock; a
    reopened one starts from a copy of its predecessor's, taken while that one may still answer a query
    (hence a lock of its own around the entries)."""

    def __init__(self, budget: int, carried: FilterVectors | None = None) -> None:
        self.budget = budget
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        if carried is not None:
            with carried._lock:
                self._entries.update(carried._entries)

    @property
    def held_bytes(self) -> int:
        return sum(vectors.nbytes for _seqs, vectors in self._entries.values())

    def fits(self, count: int, dimension: int) -> bool:
        """Whether `count` vectors are held for an exact pass: at most half the budget."""
        return count * dimension * 4 <= self.budget // 2

    def vectors(self, key: Hashable, seqs: np.ndarray, read: Read, dimension: int) -> np.ndarray:
        """`seqs`' vectors (sorted seqs that `fits`): kept ones, rows another snapshot of the same filter kept,
        and the rest read."""
        with self._lock:
            held = self._entries.get(key)
            if held is not None and np.array_equal(held[0], seqs):
                self._entries.move_to_end(key)
                return held[1]
        vectors = _reuse(held, seqs, read, dimension)
        with self._lock:
            self._entries[key] = (seqs, vectors)
            self._entries.move_to_end(key)
            while self.held_bytes > self.budget and len(self._entries) > 1:
                self._entries.popitem(last=False)
        return vectors


def _reuse(held: tuple[np.ndarray, np.ndarray] | None, seqs: np.ndarray, read: Read,
           dimension: int) -> np.ndarray:
    """`seqs`' vectors, the rows `held` has for them copied (a passage's stored vector never changes while
    the graph that vouched for it is the one loaded) and the others read, _READ_ROWS at a time (read whole,
    100,000 rows' blobs, their join and the array were three copies at once)."""
    out = np.empty((seqs.size, dimension), dtype=np.float32)
    missing = np.arange(seqs.size)
    if held is not None and held[0].size and seqs.size:
        old_seqs, old_vectors = held
        at = np.minimum(np.searchsorted(old_seqs, seqs), old_seqs.size - 1)
        found = old_seqs[at] == seqs
        out[found] = old_vectors[at[found]]
        missing = np.flatnonzero(~found)
    for start in range(0, missing.size, _READ_ROWS):
        rows = missing[start:start + _READ_ROWS]
        out[rows] = read(seqs[rows].tolist())
    return out


def exact_pass(dense: DenseIndex, vector: np.ndarray, pool: int, seqs: np.ndarray,
               vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pool's nearest of `seqs` (held by `dense`; `vectors` their stored unit vectors): seqs (int64) and
    cosine similarities (float64), nearest first; scored as the module's docstring says."""
    if seqs.size == 0:
        return _NO_PAIRS
    query = np.asarray(vector, dtype=np.float32)
    query = query / (float(np.linalg.norm(query)) or 1.0)
    sims = vectors @ query
    chosen = best_first(sims, pool)   # what a stable sort of them all gives
    if seqs.size <= EXACT_FILTER_LIMIT:
        return seqs[chosen].astype(np.int64), sims[chosen].astype(np.float64)
    near = np.flatnonzero(sims >= sims[chosen[-1]] - _MARGIN) if chosen.size else chosen
    exact = dense.similarities(vector, seqs[near], vectors[near])
    order = np.argsort(-exact, kind="stable")[:pool]
    return seqs[near][order].astype(np.int64), exact[order].astype(np.float64)


def widened_pass(dense: DenseIndex, vector: np.ndarray, pool: int, allowed: int, hidden: int,
                 admits: Callable[[np.ndarray], np.ndarray],
                 ef: Callable[[int], int]) -> tuple[np.ndarray, np.ndarray] | None:
    """The pool's nearest admitted passages from the graph searched ever deeper; `allowed`: how many it
    holds that the filter lets through (-1: all but `hidden`). None when voyager cannot search that deep (its
    RecallError on a small graph): the caller counts exactly."""
    held = len(dense)
    if held == 0:
        return _NO_PAIRS
    if allowed < 0 and hidden <= 4 * pool:
        k = min(held, pool + hidden)  # enough at once: at most `hidden` of them are dropped
    else:
        allowed = held - hidden if allowed < 0 else allowed
        k = min(held, max(2 * pool, int(2 * pool * held / max(allowed, 1))))
    while True:
        try:
            seqs, sims = dense.search_arrays(vector, k, ef(k))
        except Exception:  # voyager's RecallError on a deep search of a small graph
            return None
        keep = admits(seqs)
        if int(keep.sum()) >= pool or k >= held:
            return seqs[keep][:pool], sims[keep][:pool]
        k = min(held, k * 4)
