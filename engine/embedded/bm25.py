"""BM25 over the sparse index's postings, scored with numpy (the scorer behind the sparse-index port,
engine/embedded/sparse_port.py TermScorer): the text field's BM25 plus the name field's at NAME_WEIGHT.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .sparse_segments import SegmentTerms, _iterated, field_lengths, stored_seqs

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
    """BM25 over whoosh's postings, scored with numpy instead of whoosh's matcher tree.

    whoosh stores the index and its postings; walking its pure-Python
    matchers cost 25-85 ms a query on 12k passages, while reading the few
    postings lists a query needs and scoring them as arrays costs a few ms.
    Scores are BM25 with the Robertson/Lucene IDF, ln(1 + (N - n + 0.5) / (n + 0.5)),
    over whoosh's own (quantised) field lengths; tests check parity against
    whoosh's own search with the same statistics (tests/test_bm25_parity.py)
    and against an independent BM25, bm25s (tests/test_bm25_anchor.py).

    The statistics come from the passages that count, never from whoosh's merge state: N is how many
    passages the index holds that are neither deleted (a re-index's leftovers) nor `hidden` (superseded
    or retired documents' passages); a term's document frequency counts its postings among those; the
    average length is the mean of their quantised lengths (whole numbers, so their sum is exact in any
    order). whoosh's own N counts deleted documents until a merge drops them, and its total length is
    the exact lengths' sum for documents added in a segment but the quantised ones' for documents a
    merge copied: the same passages committed in other groups scored differently (issue 38). Counted
    this way, the same current passages give the same scores whatever the commits, kills, resumes or
    file order that put them there.
    """

    _CACHE_TERMS = 4096

    def __init__(self, reader, k1: float, b: float, hidden: np.ndarray | None = None) -> None:
        """`hidden`: sorted passage seqs left out of the statistics (superseded and retired documents')."""
        self._reader = reader
        self.k1, self.b = k1, b
        self.total = reader.doc_count_all()   # document numbers, deleted ones included
        lengths = field_lengths(reader, "body", self.total)
        if lengths is None:  # a reader shape field_lengths does not know: whoosh's own per-document walk
            lengths = np.fromiter((reader.doc_field_length(i, "body", 0) or 0 for i in range(self.total)),
                                  dtype=np.float64, count=self.total)
        self._live = None
        if reader.has_deletions():
            self._live = np.fromiter((not reader.is_deleted(i) for i in range(self.total)), dtype=bool,
                                     count=self.total)
        self._seq: dict[int, int] = {}
        # every document number's seq when the index keeps the seq column (every index this version
        # writes); an older index's are read from stored fields as passages are first met
        self._all_seqs: np.ndarray | None = stored_seqs(reader, self.total)
        self._seq_array: np.ndarray | None = self._all_seqs
        # the passages the statistics count: live, and not hidden; None when that is every one
        counted = self._live
        if hidden is not None and hidden.size:
            shown = ~np.isin(self.docnum_seqs(), hidden, assume_unique=False)
            counted = shown if counted is None else counted & shown
        self._counted = counted
        self.counted = self.total if counted is None else int(counted.sum())
        held = float(lengths.sum() if counted is None else lengths[counted].sum())
        self.avgfl = (held / self.counted if self.counted else 0.0) or 1.0
        self._norm = k1 * ((1.0 - b) + b * lengths / self.avgfl)
        # term -> (doc numbers, term frequencies, document frequency); None when no document has it.
        # The reader is a snapshot, so entries stay true until the searcher reopens on a newer index.
        self._postings: dict[str, tuple[np.ndarray, np.ndarray, int] | None] = {}
        self._terms = SegmentTerms.of(reader, "body")
        self._names: _NameField | None = _NameField.of(reader, self.total, k1, b, counted) if NAME_WEIGHT else None

    def close(self) -> None:
        self._reader.close()

    def document_frequency(self, term: str) -> int:
        """How many counted passages (see the class) hold `term`."""
        postings = self._postings_of(term)
        return 0 if postings is None else postings[2]

    def indexed(self, term: str) -> bool:
        """Whether any passage in the index holds `term` (a superseded version's too), in its text or its name."""
        return self._postings_of(term) is not None or (self._names is not None and self._names.holds(term))

    def _postings_of(self, term: str) -> tuple[np.ndarray, np.ndarray, int] | None:
        if term not in self._postings:
            if len(self._postings) >= self._CACHE_TERMS:
                self._postings.pop(next(iter(self._postings)))
            if self._terms is not None:
                found = self._terms.postings(term)
            else:  # a reader shape SegmentTerms does not know: whoosh's own look-ups and iteration
                having = self._reader.doc_frequency("body", term)
                found = (*_iterated(self._reader.postings("body", term)), having) if having else None
            if found is not None:
                ids, tfs, _whooshs = found   # whoosh's frequency counts deleted documents: recounted
                found = (ids, tfs, len(ids) if self._counted is None else int(self._counted[ids].sum()))
            self._postings[term] = found
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
        if self._live is not None:
            matched &= self._live
        if mask is not None:
            matched &= mask
        candidates = np.flatnonzero(matched)
        if candidates.size == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        if candidates.size > k:
            cut = np.partition(scores[candidates], candidates.size - k)[candidates.size - k]
            candidates = candidates[scores[candidates] >= cut]  # keep every tie at the cut-off
        order = candidates[np.argsort(-scores[candidates], kind="stable")]
        return self._seqs_of(order), scores[order]

    def _seqs_of(self, docs: np.ndarray) -> np.ndarray:
        """The passage seqs of document numbers `docs`: stored fields read once per document per scorer,
        kept in an array (-1: not read yet)."""
        if self._seq_array is None:
            self._seq_array = np.full(self.total, -1, dtype=np.int64)
        seqs = self._seq_array[docs]
        unread = seqs < 0
        if unread.any():
            for i in np.flatnonzero(unread).tolist():
                seqs[i] = self._seq_of(int(docs[i]))
            self._seq_array[docs[unread]] = seqs[unread]
        return seqs

    def docnum_seqs(self) -> np.ndarray:
        """Each document number's passage seq (read once per scorer: a filter masks by it)."""
        if self._all_seqs is None:
            self._all_seqs = np.fromiter((self._seq_of(i) for i in range(self.total)), dtype=np.int64,
                                         count=self.total)
        return self._all_seqs

    def _seq_of(self, docnum: int) -> int:
        seq = self._seq.get(docnum)
        if seq is None:
            seq = self._seq[docnum] = int(self._reader.stored_fields(docnum)["seq"])
        return seq


class _NameField:
    """BM25 of the name field (document name and title) with its own IDF and lengths, counted over the same
    passages as the text's statistics (Bm25Scorer), weighted by NAME_WEIGHT and added to the text's score."""

    _CACHE_TERMS = 1024

    def __init__(self, terms: SegmentTerms, lengths: np.ndarray, counted: np.ndarray | None, k1: float,
                 b: float) -> None:
        self._terms, self._counted, self.k1 = terms, counted, k1
        self.counted = len(lengths) if counted is None else int(counted.sum())
        held = float(lengths.sum() if counted is None else lengths[counted].sum())
        self._norm = k1 * ((1.0 - b) + b * lengths / ((held / self.counted if self.counted else 0.0) or 1.0))
        self._postings: dict[str, tuple[np.ndarray, np.ndarray, int] | None] = {}

    @classmethod
    def of(cls, reader, total: int, k1: float, b: float, counted: np.ndarray | None) -> _NameField | None:
        """The reader's name field; None for an index without it or of a shape SegmentTerms cannot read."""
        if "name" not in reader.schema:
            return None
        terms = SegmentTerms.of(reader, "name")
        lengths = field_lengths(reader, "name", total)
        return None if terms is None or lengths is None else cls(terms, lengths, counted, k1, b)

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray, int] | None:
        """(document numbers, name-field frequencies, how many counted passages' names hold it)."""
        if term not in self._postings:
            if len(self._postings) >= self._CACHE_TERMS:
                self._postings.pop(next(iter(self._postings)))
            found = self._terms.postings(term)
            if found is not None:
                ids, tfs, _whooshs = found
                found = (ids, tfs, len(ids) if self._counted is None else int(self._counted[ids].sum()))
            self._postings[term] = found
        return self._postings[term]

    def holds(self, term: str) -> bool:
        return self.postings(term) is not None

    def add_scores(self, terms: list[str], counts: Sequence[float] | None, scores: np.ndarray,
                   matched: np.ndarray) -> None:
        add_bm25(scores, matched, [self.postings(term) for term in terms], counts, self.counted, self.k1,
                 self._norm, NAME_WEIGHT)
