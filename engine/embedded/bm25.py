"""BM25 over the sparse index's postings (engine/embedded/postings.py segments), scored with numpy (the
scorer behind the sparse-index port, engine/embedded/sparse_port.py TermScorer): the text field's BM25
plus the name field's at NAME_WEIGHT.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .postings import Snapshot

# A name-field match counts this share of the same match in the text (BM25 of the name field, its own IDF and
# length normalisation, added to the text's): a question that names its document ("In the Think Python
# glossary, ...", "In Key Standard 4.0, ...") favours that document's passages, without the title repeated
# inside every passage's text, which round 3 measured to cost rank-1 answers. 0.25 and 0.5 measured the same
# on the project's own QA set (tuned there); held out on qa-dev, hybrid success@5 0.800 -> 0.822 (BENCHMARKS.md,
# "Retrieval quality, round 4").
NAME_WEIGHT = 0.5


Postings = tuple[np.ndarray, np.ndarray, int]  # document numbers, term frequencies, live documents holding it


def add_bm25(scores: np.ndarray, matched: np.ndarray, postings: Sequence[Postings | None],
             counts: Sequence[float] | None, counted: int, k1: float, norm: np.ndarray, scale: float = 1.0) -> None:
    """Add each query term's BM25 contribution to `scores` (and mark `matched`) over one field.

    `postings[i]` is term i's (None: not in the field); `counts[i]` how often it occurs in the query;
    `norm` the field's per-document length normalisation; `scale` the field's weight (1.0 is exact, so the
    text field's scores are what they were before the name field shared this)."""
    for i, found in enumerate(postings):
        if found is None:
            continue
        ids, tfs, having = found
        idf = math.log(1.0 + (counted - having + 0.5) / (having + 0.5))
        weight = scale * idf * (counts[i] if counts is not None else 1)
        scores[ids] += weight * tfs * (k1 + 1.0) / (tfs + norm[ids])
        matched[ids] = True


class Bm25Scorer:
    """BM25 over the keyword index's segments, scored as numpy arrays.

    Scores are BM25 with the Robertson/Lucene IDF, ln(1 + (N - n + 0.5) / (n + 0.5)), over whoosh's
    quantised field lengths (one byte a passage, engine/embedded/postings.py); tests check parity against
    whoosh's own search of the same passages (tests/test_bm25_parity.py) and against an independent BM25,
    bm25s (tests/test_bm25_anchor.py).

    The statistics come from the passages that count: N is how many passages the index holds that are not
    `hidden` (superseded or retired documents' passages); a term's document frequency counts its postings
    among those; the average length is the mean of their quantised lengths (whole numbers, so their sum is
    exact in any order). So the same current passages give the same scores whatever the commits, kills,
    resumes, merges or file order that put them there (issue 38).
    """

    _CACHE_TERMS = 4096

    def __init__(self, snapshot: Snapshot, k1: float, b: float, hidden: np.ndarray | None = None) -> None:
        """`hidden`: sorted passage seqs left out of the statistics (superseded and retired documents')."""
        self._snapshot = snapshot
        self.k1, self.b = k1, b
        self.total = snapshot.total
        lengths = snapshot.lengths("body")
        self._all_seqs = snapshot.seqs()
        # the passages the statistics count: not hidden; None when that is every one
        counted = None
        if hidden is not None and hidden.size:
            counted = ~np.isin(self._all_seqs, hidden, assume_unique=False)
        self._counted = counted
        self.counted = self.total if counted is None else int(counted.sum())
        held = float(lengths.sum() if counted is None else lengths[counted].sum())
        self.avgfl = (held / self.counted if self.counted else 0.0) or 1.0
        self._norm = k1 * ((1.0 - b) + b * lengths / self.avgfl)
        # term -> (doc numbers, term frequencies, document frequency); None when no document has it.
        # The snapshot's segments never change, so entries stay true until the searcher reopens.
        self._postings: dict[str, Postings | None] = {}
        self._names: _NameField | None = _NameField(snapshot, k1, b, counted) if NAME_WEIGHT else None

    def close(self) -> None:
        self._snapshot = Snapshot([])

    def document_frequency(self, term: str) -> int:
        """How many counted passages (see the class) hold `term`."""
        postings = self._postings_of(term)
        return 0 if postings is None else postings[2]

    def indexed(self, term: str) -> bool:
        """Whether any passage in the index holds `term` (a superseded version's too), in its text or its name."""
        return self._postings_of(term) is not None or (self._names is not None and self._names.holds(term))

    def _postings_of(self, term: str) -> Postings | None:
        if term not in self._postings:
            if len(self._postings) >= self._CACHE_TERMS:
                self._postings.pop(next(iter(self._postings)))
            self._postings[term] = _counted_postings(self._snapshot.postings("body", term), self._counted)
        return self._postings[term]

    def top_arrays(self, terms: list[str], k: int, counts: Sequence[float] | None = None,
                   mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The k best seqs (int64) and their scores (float64) for the OR of `terms`, best first; ties at
        the cut-off all kept.

        `counts[i]` is how often `terms[i]` occurs in the query (default 1):
        each term's BM25 contribution is multiplied by it. `mask` (over
        document numbers, see `docnum_seqs`) restricts the scored postings.
        """
        scores = np.zeros(self.total, dtype=np.float64)
        matched = np.zeros(self.total, dtype=bool)
        add_bm25(scores, matched, [self._postings_of(term) for term in terms], counts, self.counted, self.k1,
                 self._norm)
        if self._names is not None:
            self._names.add_scores(terms, counts, scores, matched)
        if mask is not None:
            matched &= mask
        candidates = np.flatnonzero(matched)
        if candidates.size == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        if candidates.size > k:
            cut = np.partition(scores[candidates], candidates.size - k)[candidates.size - k]
            candidates = candidates[scores[candidates] >= cut]  # keep every tie at the cut-off
        order = candidates[np.argsort(-scores[candidates], kind="stable")]
        return self._all_seqs[order], scores[order]

    def docnum_seqs(self) -> np.ndarray:
        """Each document number's passage seq (a filter masks by it)."""
        return self._all_seqs


def _counted_postings(found: tuple[np.ndarray, np.ndarray] | None, counted: np.ndarray | None) -> Postings | None:
    """A term's postings with how many counted passages hold it (hidden ones stay scored, never counted)."""
    if found is None:
        return None
    ids, tfs = found
    return ids, tfs, len(ids) if counted is None else int(counted[ids].sum())


class _NameField:
    """BM25 of the name field (document name and title) with its own IDF and lengths, counted over the same
    passages as the text's statistics (Bm25Scorer), weighted by NAME_WEIGHT and added to the text's score."""

    _CACHE_TERMS = 1024

    def __init__(self, snapshot: Snapshot, k1: float, b: float, counted: np.ndarray | None) -> None:
        self._snapshot, self._counted, self.k1 = snapshot, counted, k1
        lengths = snapshot.lengths("name")
        self.counted = len(lengths) if counted is None else int(counted.sum())
        held = float(lengths.sum() if counted is None else lengths[counted].sum())
        self._norm = k1 * ((1.0 - b) + b * lengths / ((held / self.counted if self.counted else 0.0) or 1.0))
        self._postings: dict[str, Postings | None] = {}

    def postings(self, term: str) -> Postings | None:
        """(document numbers, name-field frequencies, how many counted passages' names hold it)."""
        if term not in self._postings:
            if len(self._postings) >= self._CACHE_TERMS:
                self._postings.pop(next(iter(self._postings)))
            self._postings[term] = _counted_postings(self._snapshot.postings("name", term), self._counted)
        return self._postings[term]

    def holds(self, term: str) -> bool:
        return self.postings(term) is not None

    def add_scores(self, terms: list[str], counts: Sequence[float] | None, scores: np.ndarray,
                   matched: np.ndarray) -> None:
        add_bm25(scores, matched, [self.postings(term) for term in terms], counts, self.counted, self.k1,
                 self._norm, NAME_WEIGHT)
