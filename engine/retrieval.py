"""What a query reads a backend through: the `Searcher` protocol and one retriever's `Candidates`.

engine/query.py is written against these alone; the embedded backend's `DatasetSearcher`
(engine/embedded/readers.py) and Milvus's `MilvusSearcher` (engine/milvus/search.py) implement them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .filters import PassageFilter, Where
from .fingerprint import Fingerprint
from .fusion import round_like_python
from .rows import DocumentRow, PassageRow

# Sparse queries look up at most this many distinct indexed terms (the rarest):
# a pasted 100,000-character query must not turn into an OR of 20,000 postings.
MAX_QUERY_TERMS = 512
_SCORE_DECIMALS = 6


@dataclass
class Candidates:
    """One retriever's list: passage keys with their raw scores (rounded to 6 decimals), best first.

    Keys are what the backend reads passages by (seqs here, refs in Milvus);
    equal scores are not yet in ref order: fusion (engine/fusion.py `fuse`)
    orders them, reading refs through `Searcher.refs`.
    """

    keys: list[Any]
    scores: np.ndarray       # float64, one per key
    dropped_terms: int = 0   # query terms left out to keep a huge query fast
    kept_terms: str = "rarest"  # which MAX_QUERY_TERMS terms a huge query kept (said in the query's notes)

    @classmethod
    def of(cls, keys: list[Any], scores: np.ndarray | list[float]) -> Candidates:
        """A list from raw scores, rounded as every retriever's are before ranking."""
        return cls(list(keys), round_like_python(np.asarray(scores, dtype=np.float64), _SCORE_DECIMALS))

    @classmethod
    def empty(cls) -> Candidates:
        return cls([], np.zeros(0, dtype=np.float64))

    def __len__(self) -> int:
        return len(self.keys)


class Searcher(Protocol):
    """What engine/query.py reads a dataset through: the embedded `DatasetSearcher`
    (engine/embedded/readers.py), or another backend's (engine/milvus/search.py). Passage keys
    (`Candidates.keys`) are whatever the backend numbers passages by: commit-order integers in the embedded
    backend, refs in Milvus."""

    fingerprint: Fingerprint
    notes: list[str]
    dense_passages: int   # passages the dense index holds (embedded so far)
    total_passages: int   # passages committed
    sparse_passages: int  # passages the keyword index holds: all committed ones, unless its commit failed
    dense_problem: str | None   # why dense search cannot answer at all (a damaged graph that cannot be rebuilt)

    def dense_candidates(self, vector: np.ndarray, pool: int, only: PassageFilter | None = None) -> Candidates: ...

    def sparse_candidates(self, text: str, pool: int, only: PassageFilter | None = None) -> Candidates: ...

    def passage_filter(self, where: Where, versions: str) -> PassageFilter | None:
        """The passages a query may answer with: `where`'s, of the current versions only unless
        `versions` is "all"; None when that is every passage."""
        ...

    def versions(self, documents: dict[str, DocumentRow]) -> dict[str, tuple[int, str | None]]:
        """For documents (by ref): (version number from 1, the ref of the version superseding it or None)."""
        ...

    def refs(self, keys: list[Any]) -> list[str | None]:
        """Each key's passage ref (None for a key the catalogue no longer holds), in order."""
        ...

    def longest_document(self) -> int:
        """At least the most passages any document holds (a backend that does not count says sys.maxsize)."""
        ...

    def chunk_counts(self, keys: list[Any]) -> list[int]:
        """Each key's document's passage count (engine/ranking.py's long-document correction), in order."""
        ...

    def passages(self, seqs: list[Any]) -> dict[Any, PassageRow]: ...

    def vectors(self, seqs: list[Any]) -> np.ndarray: ...

    def documents(self, refs: list[str]) -> dict[str, DocumentRow]: ...

    # Query expansion's sparse side (engine/expansion.py): a backend whose BM25 it scores itself expands it;
    # one whose server scores BM25 (Milvus) expands the dense list only and says so in the query's notes.
    expands_sparse: bool

    def sparse_expanded(self, text: str, feedback: list[tuple[str, float]], pool: int,
                        only: PassageFilter | None = None) -> tuple[Candidates, list[str]]:
        """The sparse list for `text` expanded with RM3 terms from `feedback` (passage text, weight), and the
        terms added. Asked only of a searcher whose `expands_sparse` is True."""
        ...
