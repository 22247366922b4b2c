"""Merge retriever hit lists (Reciprocal Rank Fusion) and diversify them (MMR).

Everything here is a pure function. The one rule that shapes the code: the
same inputs give the same output on any machine, so every tie breaks on
ascending passage ref and no result depends on dict order, summation order or
which BLAS kernel happened to run. The readable spec these array versions are
held to bit for bit (`rank_list`, `rrf`, `strengths`) is tests/fusion_spec.py;
which lists a query fuses, and in what order the steps run, is engine/ranking.py.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from numbers import Integral

import numpy as np
from threadpoolctl import ThreadpoolController

from engine.errors import invalid

__all__ = ["Diversified", "Pool", "fuse", "round_like_python", "mmr"]

# Cosine similarities are rounded to this many decimals before MMR uses them.
# Float32 embeddings carry about 7 significant digits, so digits past the 6th
# are representation noise (0.8 stored as float32 gives a cosine of
# 0.79999999...), and different BLAS kernels, or one kernel on different
# tiles of the matrix, disagree in the last bits. Rounding makes such
# near-equal values compare equal, so the ref tie-break, not noise, decides.
_SIM_DECIMALS = 6
# MMR scores are rounded too, so two candidates whose scores agree
# mathematically but were reached by different float operations still tie.
_SCORE_DECIMALS = 12
# MMR's redundancy term: the power that keeps same-topic neighbours (cosine
# 0.6-0.8) almost unpenalised (the cosine at which a passage counts as a
# near-duplicate is the setting mmr_duplicate_threshold, engine/config.py).
# Chosen from the figures in BENCHMARKS.md.
SHARPNESS = 16
# The floor under a near-duplicate's demotion (see mmr): it passes at least
# MIN and at most MAX distinct candidates, and between the two only those
# whose strength is at least BAND times its own. Chosen from the figures in
# BENCHMARKS.md (issue 24).
DUPLICATE_MIN_PASSES = 2
DUPLICATE_MAX_PASSES = 4
DUPLICATE_BAND = 0.5


def round_like_python(values: np.ndarray, decimals: int) -> np.ndarray:
    """`round(x, decimals)` of every float in `values`, bit for bit, as a float64 array.

    np.round scales, rounds to an integer and scales back, which is Python's
    answer (the double nearest the decimal rounding of x) except where the
    scaling itself rounds across a half: those few elements (a scaled value
    within 1e-6 of a half) are rounded by Python's own round.
    """
    x = np.asarray(values, dtype=np.float64)
    scale = 10.0 ** decimals
    scaled = x * scale
    out = np.rint(scaled) / scale
    near_half = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6
    if near_half.any():
        for i in np.flatnonzero(near_half).tolist():
            out[i] = round(float(x[i]), decimals)
    return out


@dataclass(frozen=True)
class Pool:
    """`fuse`'s answer: the fused candidate pool as arrays over candidate numbers (0 .. n-1, the caller's).

    `order` lists the candidates any list found, best first; `score[c]` is
    candidate c's fused score; `ranks[name][c]` its rank in that list from 1
    (0: not in it) and `raw[name][c]` the list's score for it (NaN: not in it);
    `tops[name]` is the list's best score (NaN for an empty list).
    """

    order: np.ndarray
    score: np.ndarray
    ranks: dict[str, np.ndarray]
    raw: dict[str, np.ndarray]
    tops: dict[str, float]
    # each list as ranked, by name, with the arrays it was given: what a later `fuse(..., reuse=this)` of the
    # same arrays does not rank again
    ranked: dict[str, _RankedList] = field(default_factory=dict, repr=False, compare=False)

    def strengths(self, candidates: np.ndarray) -> np.ndarray:
        """The spec's `strengths` (tests/fusion_spec.py) for these candidates: the highest raw score over its
        list's best score (positive scores only), 0 where no list scored one. RRF keeps only ranks, so the
        fifth of five noise passages and the fifth of five relevant ones fuse to the same score; this is
        what MMR's duplicate floor reads to tell them apart."""
        out = np.zeros(len(candidates), dtype=np.float64)
        for name, top in self.tops.items():
            if not top > 0:
                continue
            raw = self.raw[name][candidates]
            scored = raw > 0  # NaN (not in this list) compares false
            with np.errstate(invalid="ignore"):
                out = np.where(scored, np.maximum(out, raw / top), out)
        return out


@dataclass(frozen=True)
class _RankedList:
    """One list as `fuse` ranked it: the (numbers, scores) it was given, its members and their places in rank
    order, and its rank and raw arrays over the candidates."""

    given: tuple[np.ndarray, np.ndarray]
    ref_order: np.ndarray
    members: np.ndarray
    positions: np.ndarray
    rank: np.ndarray
    raw: np.ndarray
    top: float


def _ranked_list(name: str, given: tuple[np.ndarray, np.ndarray], ref_order: np.ndarray, n: int) -> _RankedList:
    members = np.asarray(given[0], dtype=np.int64)
    scores = np.asarray(given[1], dtype=np.float64)
    if np.isnan(scores).any():
        raise invalid(f"a score in the {name} list is NaN; retrievers must return numeric scores")
    ranked = np.lexsort((ref_order[members], -scores))
    members, scores = members[ranked], scores[ranked]
    positions = np.arange(1, len(members) + 1, dtype=np.int64)
    rank = np.zeros(n, dtype=np.int64)
    rank[members] = positions
    if np.count_nonzero(rank) != len(members):  # a repeat (fewer places filled): its first place is its best
        _, first = np.unique(members, return_index=True)
        keep = np.sort(first)
        members, scores = members[keep], scores[keep]
        positions = np.arange(1, len(members) + 1, dtype=np.int64)
        rank[:] = 0
        rank[members] = positions
    raw = np.full(n, np.nan)
    raw[members] = scores
    return _RankedList(given, ref_order, members, positions, rank, raw,
                       float(scores[0]) if len(scores) else float("nan"))


def fuse(lists: Mapping[str, tuple[np.ndarray, np.ndarray]], ref_order: np.ndarray, k: int,
         reuse: Pool | None = None) -> Pool:
    """Reciprocal Rank Fusion on arrays: score = sum over lists of 1 / (k + rank); `k` is settings.rrf_k.

    The spec's answer (tests/fusion_spec.py: `rank_list` of each list, then
    `rrf`, on Ranked and Fused objects and exact fractions): the same order
    and the same float scores.

    `lists` maps a retriever's name to (candidate numbers, raw scores), in any
    order; `ref_order[c]` is candidate c's place in ascending passage-ref order
    (the tie-breaker everywhere, as in the spec). A candidate
    repeated within a list counts once, with its best score. No Ranked or
    Fused objects and no fractions, except inside a run of nearly equal fused
    scores that holds a passage found by several lists (`_settle_runs`): the exact
    score of a passage found by several lists, 1/(k+a) + 1/(k+b) + ..., is the
    correctly rounded quotient of two integers (over the common denominator
    (k+a)(k+b)...), one float division.

    `reuse`: an earlier answer (hybrid fuses again once its sentence list is known); a list given as the very
    arrays it was given then, with the very same `ref_order` array, is not ranked again.
    """
    if isinstance(k, bool) or not isinstance(k, Integral) or k < 1:
        raise invalid(f"rrf_k must be an integer >= 1, got {k!r}; it is the setting rrf_k (engine/config.py)")
    k = int(k)
    ref_order = np.asarray(ref_order, dtype=np.int64)
    n = len(ref_order)
    total = np.zeros(n, dtype=np.float64)
    found = np.zeros(n, dtype=np.int64)
    ranks: dict[str, np.ndarray] = {}
    raws: dict[str, np.ndarray] = {}
    tops: dict[str, float] = {}
    known = reuse.ranked if reuse is not None else {}
    ranked_lists: dict[str, _RankedList] = {}
    for name in sorted(lists):
        given = lists[name]
        listed = known.get(name)
        if listed is None or listed.given[0] is not given[0] or listed.given[1] is not given[1] \
                or listed.ref_order is not ref_order:
            listed = _ranked_list(name, given, ref_order, n)
        members, positions = listed.members, listed.positions
        total[members] += 1.0 / (k + positions)  # in name order, from 0.0: the spec's float sums exactly
        found[members] += 1
        ranks[name], raws[name], tops[name] = listed.rank, listed.raw, listed.top
        ranked_lists[name] = listed

    candidates = np.flatnonzero(found)
    order = candidates[np.lexsort((ref_order[candidates], -total[candidates]))]
    multi = found > 1
    _settle_runs(order, total, multi, ranks, k, ref_order)
    score = _exact_scores(total, multi, ranks, k)
    return Pool(order, score, ranks, raws, tops, ranked_lists)


def _exact(ranks: dict[str, np.ndarray], k: int, c: int) -> Fraction:
    """Candidate c's fused score as one fraction: the sum of 1/p over its places p = k + rank (numerator:
    each product leaving one place out), so a run's sort makes one per member, no chain of additions."""
    places = [k + int(rank[c]) for rank in ranks.values() if rank[c]]
    denominator = math.prod(places)
    return Fraction(sum(denominator // p for p in places), denominator)


def _settle_runs(order: np.ndarray, total: np.ndarray, multi: np.ndarray, ranks: dict[str, np.ndarray], k: int,
                 ref_order: np.ndarray) -> None:
    """The spec RRF's runs of nearly equal floats (tests/fusion_spec.py `rrf`), re-sorted in place by their
    exact sums where one holds a multi-list passage.

    Different rank combinations can tie exactly (1/63 + 1/140 == 1/84 + 1/90) while their float sums differ
    in the last bit. A run longer than one starts where the next sum is within the tolerance of it: only
    those places are visited (in order, each past the run before), not the ~200 candidates one by one.
    """
    ordered = total[order]
    near = np.flatnonzero(ordered[:-1] - ordered[1:] <= 1e-12 * ordered[:-1])
    if not len(near):
        return
    sums = ordered.tolist()
    # how many multi-list passages precede each place: a run holds one when the count grows across it
    several = [0] + np.cumsum(multi[order]).tolist()
    m, past = len(sums), 0
    for start in near.tolist():
        if start < past:
            continue  # inside the run before
        end, head = start + 1, sums[start]
        tolerance = 1e-12 * head
        while end < m and head - sums[end] <= tolerance:
            end += 1
        if several[end] > several[start]:
            run = order[start:end].tolist()
            run.sort(key=lambda c: (-_exact(ranks, k, c), int(ref_order[c])))
            order[start:end] = run
        past = end


def _exact_scores(total: np.ndarray, multi: np.ndarray, ranks: dict[str, np.ndarray], k: int) -> np.ndarray:
    """The fused scores: the float sums, and for a passage found by several lists its exact sum, sum(1/p),
    correctly rounded.

    Over the common denominator prod(p) the numerator is sum(prod(p) / p), both integers. While both are
    below 2**53 they are exact as floats, and one IEEE division rounds their quotient correctly: what
    float(Fraction) gives, without a Fraction per passage (hybrid fuses 3-4 lists, ~30 such passages).
    """
    score = total.copy()
    if not multi.any():
        return score
    names, n = list(ranks), len(total)
    if len(names) * float(k + n) ** len(names) < 2.0 ** 53:  # a bound on both: every place is <= k + n
        chosen = np.flatnonzero(multi)
        listed = np.stack([ranks[name][chosen] for name in names])
        places = np.where(listed > 0, listed + k, 1)
        denominator = np.prod(places, axis=0)
        numerator = np.sum(np.where(listed > 0, denominator // places, 0), axis=0)
        score[multi] = numerator.astype(np.float64) / denominator.astype(np.float64)
    else:  # very long lists: the rationals themselves
        for c in np.flatnonzero(multi).tolist():
            score[c] = float(_exact(ranks, k, c))
    return score


@dataclass(frozen=True)
class Diversified:
    """MMR's picks, and for each pick the pick it nearly repeats.

    `order` holds indices into the candidates, in pick order; `duplicate_of[i]`
    is the index of the earlier pick that `order[i]` is a near-duplicate of
    (cosine at or above the threshold), or None.
    """

    order: list[int]
    duplicate_of: list[int | None]


def mmr(
    refs: Sequence[str],
    relevance: Sequence[float],
    vectors: np.ndarray,
    k: int,
    lam: float,
    duplicate_threshold: float,
    strength: Sequence[float] | None = None,
) -> Diversified:
    """Maximal Marginal Relevance with a redundancy term that tells near-duplicates from neighbours.

    Each step picks, among the candidates left, the one maximising

        lam * rel_norm - (1 - lam) * max(0, s) ** SHARPNESS

    where rel_norm is relevance min-max normalised over the candidates and s
    is the candidate's highest cosine to an already picked one; the first
    pick is the most relevant. Ties go to the ascending ref.

    A candidate with s >= duplicate_threshold is a near-duplicate. It is
    demoted with a floor: it gives up its slot to at least
    DUPLICATE_MIN_PASSES distinct candidates, then only to distinct
    candidates that are themselves relevant (their `strength` at least
    DUPLICATE_BAND times its own), and never to more than
    DUPLICATE_MAX_PASSES of them. `strength` is an absolute relevance on one
    scale for the whole pool (ranking.py: each retriever's raw score over its
    best one), because rank-based relevance (RRF) cannot tell a relevant
    runner-up from noise; without it, rel_norm stands in.

    Why this shape (figures in BENCHMARKS.md): with the plain linear penalty
    (1 - lam) * s, a copy that leads the fused list keeps its slot (its
    relevance lead is worth more than 0.3 x 0.99), while same-topic passages
    of one document (cosine 0.6-0.8) are penalised nearly as much, so
    unrelated passages jump ahead of them. The power leaves neighbours almost
    alone (0.7 ** 16 = 0.003, 0.8 ** 16 = 0.03, 0.9 ** 16 = 0.19) and still
    spreads out very close passages. Sending every near-duplicate behind the
    whole pool buried it below noise (a copy that was the only other relevant
    passage fell out of the top 10); the floor demotes it past what is worth
    reading and no further.
    lam = 1 is the plain relevance order (no similarity, nothing marked).
    """
    n = len(refs)
    vecs = _checked_mmr_inputs(refs, relevance, vectors, k, lam, duplicate_threshold, strength)
    if n == 0 or k == 0:
        return Diversified([], [])

    # Work in ascending-ref order so the arithmetic (and any BLAS blocking)
    # sees the same matrix whatever order the caller passed the pool in;
    # then position in this order is the tie-breaker too.
    order = sorted(range(n), key=refs.__getitem__)
    # A few dozen floats: plain Python floats, the same IEEE operations as the float64 arrays they replace
    # (numpy's per-call overhead cost more than the arithmetic); tests/test_fusion.py holds mmr to the
    # array version bit for bit.
    rel = [float(relevance[i]) for i in order]
    if not all(map(math.isfinite, rel)):
        raise invalid("mmr relevance scores must be finite numbers")
    # Rounded here as the loop rounds its scores, so lam == 1 below and the
    # loop agree on which relevances tie.
    rel_norm = _rounded(_min_max(rel), _SCORE_DECIMALS)
    take = min(k, n)

    if lam == 1.0:
        # The similarity term has weight 0: this is just the relevance order; sorted is stable, so equal
        # relevances keep ascending ref order.
        by_relevance = sorted(range(n), key=lambda i: -rel_norm[i])
        return Diversified([order[i] for i in by_relevance[:take]], [None] * take)

    if strength is None:
        floor = rel_norm
    else:
        floor = [float(strength[i]) for i in order]
        if not all(map(math.isfinite, floor)):
            raise invalid("mmr strengths must be finite numbers")
        floor = _rounded(floor, _SIM_DECIMALS)

    with _blas_controller().limit(limits=1, user_api="blas"):
        sims = _cosine_matrix(vecs[order])

    return _greedy_picks(order, rel_norm, floor, sims.tolist(), take, lam, duplicate_threshold)


def _checked_mmr_inputs(refs: Sequence[str], relevance: Sequence[float], vectors: np.ndarray, k: int, lam: float,
                        duplicate_threshold: float, strength: Sequence[float] | None) -> np.ndarray:
    """`mmr`'s arguments checked (a clear error for each bad one); the vectors as an array."""
    n = len(refs)
    if not (0.0 <= lam <= 1.0):  # also rejects NaN
        raise invalid(f"mmr_lambda must be in [0, 1], got {lam!r}; 1 means relevance only, 0 diversity only")
    if not (0.0 < duplicate_threshold <= 1.0):  # also rejects NaN
        raise invalid(f"mmr_duplicate_threshold must be in (0, 1], got {duplicate_threshold!r}; "
                      "the cosine at which a passage counts as a near-duplicate (the setting mmr_duplicate_threshold)")
    if isinstance(k, bool) or not isinstance(k, Integral) or k < 0:
        raise invalid(f"mmr k must be an integer >= 0, got {k!r}")
    if len(relevance) != n:
        raise invalid(f"mmr got {n} refs but {len(relevance)} relevance scores; pass one score per ref")
    if strength is not None and len(strength) != n:
        raise invalid(f"mmr got {n} refs but {len(strength)} strengths; pass one per ref")
    vecs = np.asarray(vectors)
    if vecs.ndim != 2 or vecs.shape[0] != n:
        raise invalid(f"mmr vectors must have shape ({n}, d), got {vecs.shape}; pass one row per ref")
    if not np.all(np.isfinite(vecs)):
        raise invalid("mmr vectors must be finite; re-embed the passages")
    if len(set(refs)) != n:
        # Refs are the tie-breaker; a repeated ref would leave ties undecided.
        raise invalid("mmr refs must be unique; fuse or de-duplicate the pool first")
    return vecs


def _greedy_picks(order: list[int], rel_norm: list[float], floor: list[float], sims: list[list[float]],
                  take: int, lam: float, duplicate_threshold: float) -> Diversified:
    """MMR's greedy loop over a few dozen candidates (positions in ascending-ref order), in plain Python.

    numpy's per-call overhead made up most of MMR's time: ten steps of a dozen array operations each over
    ~30 elements (1.4 ms of a ~6 ms search). The same float operations in the same order on Python floats
    give the same bits: `round(x * 1e12) / 1e12` is np.round(x, 12) (multiply, round half to even,
    divide), `x ** SHARPNESS` calls the C pow numpy calls, and a strict `>` scan keeps the first maximum as
    np.argmax does (the smallest ref among ties). tests/test_fusion.py checks it against the array
    version on random pools.
    """
    n = len(order)
    scale = 10.0 ** _SCORE_DECIMALS
    keep = 1.0 - lam
    gain = [lam * r for r in rel_norm]
    # each candidate's score as the array loop computed it every step, kept and recomputed only when the
    # candidate's similarity to the picks grows (the score's one changing term); the first pick has
    # nothing to be redundant with, so the most relevant goes first, even at lam = 0
    score = list(rel_norm)
    picked: list[int] = []
    duplicate_of: list[int | None] = []
    max_sim = [-math.inf] * n   # -inf until the first pick: max over an empty set; the penalty is then 0
    nearest = [-1] * n          # which pick each candidate is most similar to (the first such pick on ties)
    passes = [0] * n            # distinct picks made since each candidate became a near-duplicate
    # the candidates left, in ascending position (ascending ref), split into distinct ones and near-duplicates:
    # max() keeps the first of equal maxima, the smallest ref, as the array loop's argmax did; only the
    # candidates left are scanned and updated (a picked one's values are never read again)
    distinct = list(range(n))
    copies: list[int] = []
    by_score = score.__getitem__
    for _step in range(take):
        best = max(distinct, key=by_score) if distinct else -1
        if copies:
            copy = max(copies, key=by_score)
            if best < 0 or passes[copy] >= DUPLICATE_MAX_PASSES or (
                    passes[copy] >= DUPLICATE_MIN_PASSES and floor[best] < DUPLICATE_BAND * floor[copy]):
                best = copy
        duplicate = max_sim[best] >= duplicate_threshold
        picked.append(best)
        if duplicate:
            duplicate_of.append(nearest[best])
            copies.remove(best)
        else:
            duplicate_of.append(None)
            distinct.remove(best)
            for i in copies:
                passes[i] += 1
        row = sims[best]
        crossed = False
        for group in (distinct, copies):
            for i in group:
                similar = row[i]
                if similar > max_sim[i]:
                    nearest[i] = best
                    max_sim[i] = similar
                    # lam * rel_norm - (1 - lam) * max(0, s) ** SHARPNESS, rounded as np.round(x, 12) rounds
                    score[i] = round((gain[i] - keep * (similar if similar > 0.0 else 0.0) ** SHARPNESS)
                                     * scale) / scale
                    crossed = crossed or (similar >= duplicate_threshold and group is distinct)
        if crossed:  # candidates that became near-duplicates of this pick move over, order kept
            copies = sorted(copies + [i for i in distinct if max_sim[i] >= duplicate_threshold])
            distinct = [i for i in distinct if max_sim[i] < duplicate_threshold]
    return Diversified([order[i] for i in picked], [None if d is None else order[d] for d in duplicate_of])


_CONTROLLER: ThreadpoolController | None = None
_CONTROLLER_MODULES = 0


def _blas_controller() -> ThreadpoolController:
    # Finding the loaded BLAS libraries costs ~0.1-1 ms; do it once, and again
    # only when new modules were imported since (one may have brought its own
    # BLAS, e.g. onnxruntime or torch, which the old controller would not limit).
    global _CONTROLLER, _CONTROLLER_MODULES
    if _CONTROLLER is None or len(sys.modules) != _CONTROLLER_MODULES:
        _CONTROLLER = ThreadpoolController()
        _CONTROLLER_MODULES = len(sys.modules)
    return _CONTROLLER


def _min_max(values: list[float]) -> list[float]:
    """`values` mapped onto [0, 1]: RRF scores (~0.016-0.033) and cosines live on different scales, so lam
    weighs like against like. All equal: all 1."""
    low, high = min(values), max(values)
    if high == low:
        return [1.0] * len(values)
    span = high - low
    return [(v - low) / span for v in values]


def _rounded(values: list[float], decimals: int) -> list[float]:
    """np.round(values, decimals) on Python floats, bit for bit: numpy multiplies by 10 ** decimals, rounds
    half to even to an integer and divides back, as this does (exact while |x| * 10 ** decimals < 2 ** 53)."""
    scale = 10.0 ** decimals
    return [round(v * scale) / scale for v in values]


def _cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    vecs = vectors.astype(np.float64)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    # A zero vector stays zero and so has similarity 0 with everything.
    safe = np.where(norms > 0.0, norms, 1.0)
    unit = vecs / safe
    sims = unit @ unit.T
    np.clip(sims, -1.0, 1.0, out=sims)
    return np.round(sims, _SIM_DECIMALS, out=sims)
