"""The spec of Reciprocal Rank Fusion: the readable definition engine/fusion.py's `fuse` and `Pool.strengths`
are held to, bit for bit (tests/test_fusion.py, tests/test_search_parity.py).

Ranked and Fused objects, dicts and exact fractions: slow, and plain to read. The engine runs the same ranking
on arrays (engine/fusion.py); nothing in engine/ imports this module.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from numbers import Integral
from types import MappingProxyType

from engine.errors import invalid

__all__ = ["Ranked", "Fused", "rank_list", "rrf", "strengths"]


@dataclass(frozen=True)
class Ranked:
    """One retriever's hit: a passage ref and the retriever's raw score."""

    ref: str
    score: float


@dataclass(frozen=True)
class Fused:
    """One passage after fusion, with where each retriever put it."""

    ref: str
    score: float
    ranks: Mapping[str, int | None]
    raw: Mapping[str, float | None]


def rank_list(hits: Iterable[Ranked]) -> list[Ranked]:
    """Sort hits by score descending, ties by ref; keep each ref's best hit."""
    best: dict[str, Ranked] = {}
    for hit in hits:
        if math.isnan(hit.score):
            # NaN compares false with everything, so it would make the order
            # depend on input order.
            raise invalid(f"score for passage {hit.ref} is NaN; retrievers must return numeric scores")
        kept = best.get(hit.ref)
        if kept is None or hit.score > kept.score:
            best[hit.ref] = hit
    return sorted(best.values(), key=lambda h: (-h.score, h.ref))


def rrf(lists: Mapping[str, Sequence[Ranked]], k: int = 60) -> list[Fused]:
    """Reciprocal Rank Fusion: score = sum over lists of 1 / (k + rank).

    `lists` maps retriever name to hits already in rank order (rank 1 first).
    If a ref repeats within one list only its first (best) rank counts.
    """
    if isinstance(k, bool) or not isinstance(k, Integral) or k < 1:
        raise invalid(f"rrf_k must be an integer >= 1, got {k!r}; the usual value is 60")
    k = int(k)
    names = sorted(lists)
    ranks: dict[str, dict[str, int]] = {}
    raws: dict[str, dict[str, float]] = {}
    # Float sums rank almost everything. Different rank combinations can tie
    # exactly (1/63 + 1/140 == 1/84 + 1/90) while their float sums differ in
    # the last bit, so runs of nearly equal floats are re-sorted by their
    # exact rational sums, letting the ref, not rounding, break true ties.
    totals: dict[str, float] = {}
    for name in names:
        for position, hit in enumerate(lists[name], start=1):
            per_ref = ranks.setdefault(hit.ref, {})
            if name in per_ref:
                continue
            per_ref[name] = position
            raws.setdefault(hit.ref, {})[name] = hit.score
            totals[hit.ref] = totals.get(hit.ref, 0.0) + 1.0 / (k + position)

    exact_of: dict[str, Fraction] = {}

    def exact(ref: str) -> Fraction:
        value = exact_of.get(ref)
        if value is None:
            value = exact_of[ref] = sum((Fraction(1, k + r) for r in ranks[ref].values()), Fraction(0))
        return value

    order = sorted(totals, key=lambda ref: (-totals[ref], ref))
    settled: list[str] = []
    start = 0
    while start < len(order):
        end = start + 1
        while end < len(order) and totals[order[start]] - totals[order[end]] <= 1e-12 * totals[order[start]]:
            end += 1
        run = order[start:end]
        # A run of passages each found by one retriever is an exact tie already (1/(k+r) for one r: equal
        # floats, equal ranks) and is in ref order; only a run with a multi-list sum needs the rationals.
        if len(run) > 1 and any(len(ranks[ref]) > 1 for ref in run):
            run.sort(key=lambda ref: (-exact(ref), ref))
        settled.extend(run)
        start = end

    return [
        Fused(
            ref=ref,
            # float() of a Fraction is correctly rounded: exact ties get equal floats
            score=float(exact(ref)) if len(ranks[ref]) > 1 else totals[ref],
            ranks=MappingProxyType({n: ranks[ref].get(n) for n in names}),
            raw=MappingProxyType({n: raws[ref].get(n) for n in names}),
        )
        for ref in settled
    ]


def strengths(fused: Sequence[Fused], lists: Mapping[str, Sequence[Ranked]]) -> list[float]:
    """Each fused candidate's absolute relevance on one scale: its raw score in a retriever's list over that
    list's best score (negative scores count as 0), the highest across the lists; 0 where no list scored it.

    RRF keeps only ranks, so the fifth of five noise passages and the fifth of five relevant ones fuse to
    the same score; this is what MMR's duplicate floor reads to tell them apart.
    """
    tops = {name: hits[0].score for name, hits in lists.items() if hits and hits[0].score > 0}
    out = []
    for f in fused:
        best = 0.0
        for name, top in tops.items():
            raw = f.raw.get(name)
            if raw is not None and raw > 0:
                best = max(best, raw / top)
        out.append(best)
    return out
