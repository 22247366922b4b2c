"""The offline brain's candidates: every ranking a run has seen, fused by weighted RRF.

Each search of a run ranks passages deeper than the run reads. Rather than
read each search's own top in turn, the brain adds every ranking here and
reads the best fused passages it has not read yet, so a passage that several
parts of the goal rank well is read before one that a single fragment ranks
first. Fusion is Reciprocal Rank Fusion with a weight per ranking:

    score(p) = sum over rankings r of weight(r) / (rrf_k + rank_r(p))

over ranks, not retriever scores, because scores of different queries are
not comparable; rrf_k is settings.rrf_k (KX_RRF_K, its default declared in engine/config.py), the
engine's own fusion constant (engine/ranking.py). Ties break on the order passages were first seen (an
earlier, broader search's rank first), so one reading gives one order.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence

from ..records import Hit


class FusedCandidates:
    """Passages ranked by any search of the run, in weighted-RRF order."""

    def __init__(self, rrf_k: int) -> None:
        self.rrf_k = rrf_k
        self.hits: dict[str, Hit] = {}       # ref -> the hit as first ranked
        self._score: dict[str, float] = {}
        self._seen: dict[str, int] = {}      # ref -> when first seen (the tie-break)

    def add(self, hits: Sequence[Hit], weight: float) -> None:
        """Fold one ranking (best first) in with `weight`; a ref repeated within it counts once."""
        counted: set[str] = set()
        for rank, hit in enumerate(hits, start=1):
            ref = hit.passage_ref
            if ref in counted:
                continue
            counted.add(ref)
            if ref not in self.hits:
                self.hits[ref] = hit
                self._seen[ref] = len(self._seen)
            self._score[ref] = self._score.get(ref, 0.0) + weight / (self.rrf_k + rank)

    def score(self, ref: str) -> float:
        return self._score.get(ref, 0.0)

    def order(self, refs: Iterable[str]) -> list[str]:
        """`refs`, best fused first."""
        return sorted(refs, key=self._key)

    def best(self, n: int, skip: Container[str] = ()) -> list[Hit]:
        """The `n` best fused passages not in `skip` (those already read)."""
        return [self.hits[ref] for ref in self.order(r for r in self.hits if r not in skip)[:max(0, n)]]

    def _key(self, ref: str) -> tuple[float, int]:
        return -self._score.get(ref, 0.0), self._seen.get(ref, len(self._seen))
