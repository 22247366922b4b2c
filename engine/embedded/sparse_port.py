"""The sparse-index port: what the embedded backend asks of its keyword index, whoever implements it.

readers.py (the query side) and dataset.py (the writer's catch-up) depend on these two protocols only;
engine/embedded/sparse.py's `SparseIndex` implements them over kx's own postings segments
(engine/embedded/postings.py), scored by bm25.py's `Bm25Scorer`. Another implementation (a different keyword
store) fits behind the same calls without readers.py changing. The highlighter reads the same analyzer
through engine/text/analysis.py `matching_spans`, the only place a token's characters are read.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

if TYPE_CHECKING:  # numpy only for the annotations: importing this port loads nothing
    import numpy as np

    from .store import Catalogue


class TermScorer(Protocol):
    """BM25 over one snapshot of the index: term statistics and the top passages for a set of terms.

    Statistics count the passages that are current (live and not hidden: issue 38), never the store's
    merge state, and a passage's score is its text's BM25 plus its name field's at NAME_WEIGHT."""

    def document_frequency(self, term: str) -> int:
        """How many counted passages hold `term` in their text."""
        ...

    def indexed(self, term: str) -> bool:
        """Whether any passage in the index holds `term` (a superseded version's too), in text or name."""
        ...

    def top_arrays(self, terms: list[str], k: int, counts: Sequence[float] | None = None,
                   mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The k best seqs and their scores for the OR of `terms` (each weighted by `counts`), best first,
        ties at the cut-off kept; `mask` (over `docnum_seqs`' positions) restricts the scored passages."""
        ...

    def docnum_seqs(self) -> np.ndarray:
        """Each of the snapshot's positions' passage seq (the space a `mask` is written in)."""
        ...

    def close(self) -> None:
        ...


class SparseIndexPort(Protocol):
    """A dataset's keyword index: caught up from the catalogue, analysed with the dataset's analyzer."""

    @property
    def watermark(self) -> int:
        """The highest passage seq the index holds and vouches for (0: rebuild from the catalogue)."""
        ...

    def consistent_with(self, catalogue: Catalogue) -> bool:
        """Whether the index describes this catalogue's passages up to its watermark (not a fork's)."""
        ...

    def forget(self) -> None:
        """Drop what vouches for the index: the next catch-up rebuilds it from the catalogue."""
        ...

    def catch_up(self, catalogue: Catalogue, upto: int,
                 on_progress: Callable[[int, int], None] | None = None) -> int:
        """Index the catalogue's passages above the watermark up to `upto` in one commit; how many."""
        ...

    def term_counts(self, text: str) -> dict[str, int]:
        """Each query term of `text` (the index's analyzer) and how often it occurs, in first-seen order."""
        ...

    def exists(self) -> bool:
        """Whether the index has been written at all (a dataset never caught up has none)."""
        ...

    def signature_files(self) -> list[Path]:
        """The files whose identity (inode, size, mtime) changes whenever the index does: its record of
        what it holds first (a reader reopens when one of them changed)."""
        ...

    def open_scorer(self, k1: float, b: float, hidden: np.ndarray | None = None) -> TermScorer:
        """A scorer over the index as it is now; `hidden` passage seqs are left out of its statistics."""
        ...
