"""Tests for engine.fusion against values worked out by hand in the comments.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_info

import engine.fusion as fusion
from engine.config import SPEC_BY_NAME
from engine.errors import KxError, Status
from engine.fusion import (
    DUPLICATE_BAND,
    DUPLICATE_MAX_PASSES,
    DUPLICATE_MIN_PASSES,
)

from .fusion_spec import Fused, Ranked, rank_list, rrf, strengths

ROOT = Path(__file__).resolve().parents[1]


def hits(*refs: str) -> list[Ranked]:
    """A list in rank order; raw scores count down so they are visibly distinct."""
    return [Ranked(ref, float(len(refs) - i)) for i, ref in enumerate(refs)]


def by_ref(fused: list[Fused]) -> dict[str, Fused]:
    return {f.ref: f for f in fused}


def test_rank_list_sorts_by_score_then_ref() -> None:
    # b and c tie on 0.5, so ascending ref puts b first; the input order
    # (c before b) must not matter.
    out = rank_list([Ranked("c", 0.5), Ranked("a", 0.2), Ranked("b", 0.5), Ranked("d", 0.9)])
    assert [h.ref for h in out] == ["d", "b", "c", "a"]


def test_rank_list_keeps_best_score_of_duplicates() -> None:
    out = rank_list([Ranked("a", 0.1), Ranked("b", 0.3), Ranked("a", 0.7), Ranked("a", 0.4)])
    assert out == [Ranked("a", 0.7), Ranked("b", 0.3)]


def test_rank_list_empty_and_nan() -> None:
    assert rank_list([]) == []
    with pytest.raises(KxError) as err:
        rank_list([Ranked("a", float("nan"))])
    assert err.value.status is Status.INVALID_ARGUMENT


def test_rrf_hand_worked_k60() -> None:
    dense = hits("both1", "dense2", "liked_d", "x1")
    sparse = hits("both1", "sparse2", "x2", "liked_d", "only_s")
    # Ranks and hand-worked RRF scores with k = 60:
    #   both1:   dense 1, sparse 1        -> 1/61 + 1/61 = 2/61          ~ 0.032787
    #   liked_d: dense 3, sparse 4        -> 1/63 + 1/64                 ~ 0.031498
    #   dense2:  dense 2 only             -> 1/62                        ~ 0.016129
    #   sparse2: sparse 2 only            -> 1/62 (exact tie with dense2)
    #   x1:      dense 4 only             -> 1/64                        ~ 0.015625
    #   x2:      sparse 3 only            -> 1/63                        ~ 0.015873
    #   only_s:  sparse 5 only            -> 1/65                        ~ 0.015385
    out = rrf({"dense": dense, "sparse": sparse}, k=60)
    scores = {f.ref: f.score for f in out}
    assert scores["both1"] == pytest.approx(2 / 61)
    assert scores["liked_d"] == pytest.approx(1 / 63 + 1 / 64)
    assert scores["dense2"] == pytest.approx(1 / 62)
    assert scores["sparse2"] == pytest.approx(1 / 62)
    assert scores["x1"] == pytest.approx(1 / 64)
    assert scores["x2"] == pytest.approx(1 / 63)
    assert scores["only_s"] == pytest.approx(1 / 65)
    # dense2 and sparse2 tie exactly, so ascending ref: "dense2" < "sparse2".
    assert [f.ref for f in out] == ["both1", "liked_d", "dense2", "sparse2", "x2", "x1", "only_s"]


def test_rrf_liked_by_both_beats_top_of_one() -> None:
    # "solo" is rank 1 in dense only:            1/61        ~ 0.016393
    # "both" is rank 3 in dense, 4 in sparse:    1/63 + 1/64 ~ 0.031498
    # so the passage both retrievers liked wins although neither put it first.
    dense = hits("solo", "d2", "both")
    sparse = hits("s1", "s2", "s3", "both")
    out = by_ref(rrf({"dense": dense, "sparse": sparse}))
    assert out["solo"].score == pytest.approx(1 / 61)
    assert out["both"].score == pytest.approx(1 / 63 + 1 / 64)
    assert out["both"].score > out["solo"].score


def test_rrf_ranks_and_raw_carry_none_for_absence() -> None:
    dense = [Ranked("a", 0.91), Ranked("b", 0.85)]
    sparse = [Ranked("c", 12.5), Ranked("a", 7.25)]
    out = by_ref(rrf({"sparse": sparse, "dense": dense}))
    assert dict(out["a"].ranks) == {"dense": 1, "sparse": 2}
    assert dict(out["a"].raw) == {"dense": 0.91, "sparse": 7.25}
    assert dict(out["b"].ranks) == {"dense": 2, "sparse": None}
    assert dict(out["b"].raw) == {"dense": 0.85, "sparse": None}
    assert dict(out["c"].ranks) == {"dense": None, "sparse": 1}
    assert dict(out["c"].raw) == {"dense": None, "sparse": 12.5}
    # Every fused hit names every retriever, even ones with an empty list.
    out2 = rrf({"dense": dense, "sparse": []})
    assert all(set(f.ranks) == {"dense", "sparse"} == set(f.raw) for f in out2)


def test_rrf_exact_tie_that_floats_would_split() -> None:
    # k = 60:  1/63 + 1/140 = (140 + 63) / 8820 = 203/8820 = 29/1260
    #          1/84 + 1/90  = (90 + 84)  / 7560 = 174/7560 = 29/1260
    # An exact tie. Naive float sums differ in the last bit
    # (0.023015873015873014 vs ...017), which would put "b" first;
    # the tie must break on ref instead, so "a" comes first.
    assert 1 / 63 + 1 / 140 != 1 / 84 + 1 / 90
    filler = [f"f{i:03d}" for i in range(200)]

    def at(ranks: dict[int, str], length: int) -> list[Ranked]:
        refs = list(filler[:length])
        for rank, ref in ranks.items():
            refs[rank - 1] = ref
        return hits(*refs)

    dense = at({3: "a", 24: "b"}, 30)
    sparse = at({80: "a", 30: "b"}, 80)
    out = by_ref(rrf({"dense": dense, "sparse": sparse}, k=60))
    assert out["a"].ranks == {"dense": 3, "sparse": 80}
    assert out["b"].ranks == {"dense": 24, "sparse": 30}
    assert out["a"].score == out["b"].score == pytest.approx(29 / 1260)
    order = [f.ref for f in rrf({"dense": dense, "sparse": sparse}, k=60)]
    assert order.index("a") + 1 == order.index("b")


def test_rrf_single_list_keeps_its_order() -> None:
    # Scores 1/61 > 1/62 > ... strictly decrease with rank, so the list order
    # survives even where raw scores tie or refs are not alphabetical.
    ranked = [Ranked("z", 0.9), Ranked("m", 0.5), Ranked("a", 0.5), Ranked("q", 0.1)]
    out = rrf({"dense": ranked})
    assert [f.ref for f in out] == ["z", "m", "a", "q"]
    assert [f.score for f in out] == pytest.approx([1 / 61, 1 / 62, 1 / 63, 1 / 64])


def test_rrf_repeated_ref_in_one_list_counts_first_rank_only() -> None:
    # "a" at positions 1 and 3: only 1/61 counts; "b" keeps position 2 -> 1/62.
    out = by_ref(rrf({"dense": hits("a", "b", "a")}))
    assert out["a"].score == pytest.approx(1 / 61)
    assert out["a"].ranks == {"dense": 1}
    assert out["b"].ranks == {"dense": 2}


def test_rrf_empty() -> None:
    assert rrf({}) == []
    assert rrf({"dense": [], "sparse": []}) == []


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_rrf_rejects_bad_k(k: object) -> None:
    with pytest.raises(KxError) as err:
        rrf({"dense": hits("a")}, k=k)  # type: ignore[arg-type]
    assert err.value.status is Status.INVALID_ARGUMENT
    assert "rrf_k" in err.value.message


def test_rrf_k1_hand_worked() -> None:
    # k = 1: rank 1 -> 1/2, rank 2 -> 1/3.  a: 1/2 + 1/3 = 5/6;  b: 1/3 + 1/2 = 5/6,
    # an exact tie broken by ref; c: 1/4.
    out = rrf({"x": hits("a", "b", "c"), "y": hits("b", "a")}, k=1)
    assert [f.ref for f in out] == ["a", "b", "c"]
    assert [f.score for f in out] == pytest.approx([5 / 6, 5 / 6, 1 / 4])


def reference_rrf(lists: dict[str, list[Ranked]], k: int) -> list[tuple[str, float, dict, dict]]:
    """The obvious dict-accumulation version, in exact arithmetic."""
    total: dict[str, Fraction] = {}
    ranks: dict[str, dict[str, int | None]] = {}
    raw: dict[str, dict[str, float | None]] = {}
    for name, ranked in lists.items():
        seen = set()
        for i, hit in enumerate(ranked):
            if hit.ref in seen:
                continue
            seen.add(hit.ref)
            total[hit.ref] = total.get(hit.ref, Fraction(0)) + Fraction(1, k + i + 1)
            ranks.setdefault(hit.ref, {})[name] = i + 1
            raw.setdefault(hit.ref, {})[name] = hit.score
    rows = []
    for ref, value in total.items():
        rows.append(
            (
                ref,
                float(value),
                {n: ranks[ref].get(n) for n in lists},
                {n: raw[ref].get(n) for n in lists},
            )
        )
    rows.sort(key=lambda r: (-r[1], r[0]))
    return rows


ref_st = st.text(alphabet="0123456789abcdef", min_size=1, max_size=2)


list_st = st.lists(
    st.builds(Ranked, ref_st, st.floats(-10, 10, allow_nan=False)),
    max_size=25,
)


lists_st = st.dictionaries(st.sampled_from(["dense", "sparse", "title", "x"]), list_st, max_size=4)


@settings(max_examples=300, deadline=None)
@given(lists=lists_st, k=st.integers(1, 100))
def test_rrf_matches_reference(lists: dict[str, list[Ranked]], k: int) -> None:
    got = rrf(lists, k=k)
    want = reference_rrf(lists, k)
    assert [(f.ref, f.score, dict(f.ranks), dict(f.raw)) for f in got] == want
    # Naive float sums agree to rounding error.
    for f in got:
        naive = sum(1.0 / (k + r) for r in f.ranks.values() if r is not None)
        assert f.score == pytest.approx(naive, rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(lists=lists_st, k=st.integers(1, 100))
def test_rrf_independent_of_dict_order(lists: dict[str, list[Ranked]], k: int) -> None:
    reversed_lists = dict(reversed(list(lists.items())))
    assert rrf(lists, k=k) == rrf(reversed_lists, k=k)


def mmr(*args, **kwargs) -> fusion.Diversified:
    """engine.fusion.mmr at the operator's default near-duplicate threshold (read from the setting's declaration)
    unless a test names one."""
    if len(args) < 6:
        kwargs.setdefault("duplicate_threshold", SPEC_BY_NAME["mmr_duplicate_threshold"].default())
    return fusion.mmr(*args, **kwargs)


def order_of(*args, **kwargs) -> list[int]:
    """mmr's pick order alone."""
    return mmr(*args, **kwargs).order


def hand_pool() -> tuple[list[str], list[float], np.ndarray]:
    refs = ["a", "b", "c"]
    relevance = [1.0, 0.75, 0.0]  # min 0, max 1, so rel_norm = relevance
    vectors = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]], dtype=np.float32)
    return refs, relevance, vectors


def test_mmr_hand_worked_lambda_half() -> None:
    refs, relevance, vectors = hand_pool()
    # Cosines: cos(a,b) = 0.8, cos(a,c) = 0.0, cos(b,c) = 0.6.
    # lam = 0.5, score = 0.5 * rel - 0.5 * maxsim ** 16
    # step 1 (the most relevant):  a
    # step 2: b 0.375 - 0.5 * 0.8**16 (0.028147) = 0.360926;  c 0.0 - 0.0 = 0.0  -> b
    # step 3: c                                                                 -> c
    # (the old linear penalty, 0.5 * 0.8 = 0.4, put b behind the irrelevant c)
    assert order_of(refs, relevance, vectors, k=3, lam=0.5) == [0, 1, 2]


def test_mmr_hand_worked_lambda_01_spreads_close_neighbours() -> None:
    refs, relevance, vectors = hand_pool()
    # lam = 0.1, score = 0.1 * rel - 0.9 * maxsim ** 16
    # step 2: b 0.075 - 0.9 * 0.028147 = 0.049667;  c 0.0  -> b still (0.8 is a neighbour, not a copy)
    assert order_of(refs, relevance, vectors, k=3, lam=0.1) == [0, 1, 2]
    # cos(a,b) = 0.96: b is a near-duplicate (>= 0.92) and goes behind c whatever lam
    close = np.array([[1.0, 0.0], [0.96, 0.28], [0.0, 1.0]], dtype=np.float32)
    for lam in (0.0, 0.5, 0.9, 0.99):
        assert order_of(refs, relevance, close, k=3, lam=lam) == [0, 2, 1]


def test_mmr_demotes_a_near_duplicate_that_leads_the_list() -> None:
    refs = ["a", "b", "c", "d"]
    relevance = [1.0, 0.95, 0.5, 0.0]  # min 0, max 1: rel_norm = relevance
    # cos(a,b) = 0.96 (a near-copy), cos(a,c) = 0.6, cos(b,c) = 0.576, cos(c,d) = 0.8, d orthogonal to a, b
    vectors = np.array([[1.0, 0.0, 0.0], [0.96, 0.28, 0.0], [0.6, 0.0, 0.8], [0.0, 0.0, 1.0]], dtype=np.float32)
    # lam = 0.7, score = 0.7 * rel - 0.3 * maxsim ** 16, near-duplicates (maxsim >= 0.92) last
    # step 1: a
    # step 2: b is a near-duplicate of a;  c 0.35 - 0.3 * 0.6**16 (0.000282) = 0.349915;  d 0.0  -> c
    # step 3: b still a near-duplicate;  d 0.0 - 0.3 * 0.8**16 = -0.008444                      -> d
    # step 4: b, marked as a near-duplicate of a
    # (the old linear penalty kept b second: 0.665 - 0.3 * 0.96 = 0.377 > c 0.35 - 0.18 = 0.17)
    picks = mmr(refs, relevance, vectors, k=4, lam=0.7)
    assert [refs[i] for i in picks.order] == ["a", "c", "d", "b"]
    assert [None if d is None else refs[d] for d in picks.duplicate_of] == [None, None, None, "a"]
    # the threshold is the operator's: at 0.97 b is no longer a duplicate, and the sharpened
    # penalty 0.3 * 0.96**16 (0.156) still leaves it ahead of c: 0.665 - 0.156 = 0.509 > 0.35
    loose = mmr(refs, relevance, vectors, k=4, lam=0.7, duplicate_threshold=0.97)
    assert [refs[i] for i in loose.order] == ["a", "b", "c", "d"] and loose.duplicate_of == [None] * 4


def test_mmr_keeps_same_topic_neighbours_ahead_of_unrelated_passages() -> None:
    refs = ["a", "b", "c", "d"]
    relevance = [1.0, 0.9, 0.85, 0.0]
    # b shares a's topic (cos 0.8); c is unrelated to both (cos 0); d is irrelevant
    vectors = np.array([[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]], dtype=np.float32)
    # lam = 0.7, step 2: b 0.63 - 0.3 * 0.8**16 (0.028147) = 0.601556;  c 0.595 - 0 = 0.595  -> b
    # step 3: c 0.595;  d 0.0 - 0.3 * 0.6**16 = -0.000085                                  -> c
    # (the old linear penalty promoted c over b: b 0.63 - 0.24 = 0.39 < 0.595)
    assert [refs[i] for i in order_of(refs, relevance, vectors, k=4, lam=0.7)] == ["a", "b", "c", "d"]


def test_mmr_relevance_is_min_max_normalised() -> None:
    refs, _, vectors = hand_pool()
    # RRF-scale relevance 0.032, 0.029, 0.020 -> (x - 0.020) / 0.012 = 1, 0.75, 0,
    # the same pool as the hand-worked case, so the same picks.
    assert order_of(refs, [0.032, 0.029, 0.020], vectors, k=3, lam=0.5) == [0, 1, 2]
    # Scaling all vectors does not matter: they are normalised defensively.
    assert order_of(refs, [0.032, 0.029, 0.020], vectors * 7.0, k=3, lam=0.5) == [0, 1, 2]


def test_mmr_near_duplicates_are_spread_out() -> None:
    rng = np.random.default_rng(7)
    d = 8
    base = np.eye(d, dtype=np.float32)
    dup = [base[0] + 0.01 * rng.standard_normal(d).astype(np.float32) for _ in range(3)]
    refs = ["d1", "d2", "d3", "u1", "u2", "u3"]
    relevance = [1.0, 0.99, 0.98, 0.9, 0.85, 0.8]
    vectors = np.stack([*dup, base[1], base[2], base[3]])
    # d2 and d3 are near-copies of d1 (cosine ~0.9999). Without strengths the floor reads
    # rel_norm = (r - 0.8) / 0.2: d2 0.95, d3 0.9, u1 0.5, u2 0.25, u3 0.
    # The copies pass DUPLICATE_MIN_PASSES (2) distinct picks whatever their relevance (u1, u2);
    # then u3 (0 < 0.5 * 0.95) is not relevant enough to pass them: d2, d3, then u3.
    picks = mmr(refs, relevance, vectors, k=6, lam=0.7)
    assert [refs[i] for i in picks.order] == ["d1", "u1", "u2", "d2", "d3", "u3"]
    assert [None if i is None else refs[i] for i in picks.duplicate_of] == [None] * 3 + ["d1", "d1", None]
    # lam = 1 ignores similarity: pure relevance order, nothing marked.
    assert order_of(refs, relevance, vectors, k=6, lam=1.0) == [0, 1, 2, 3, 4, 5]
    assert mmr(refs, relevance, vectors, k=6, lam=1.0).duplicate_of == [None] * 6


def copies_and_others(others: int) -> tuple[list[str], list[float], np.ndarray]:
    """c1 and its near-copy c2 lead the relevance; o1..oN are distinct from them and from each other."""
    d = others + 2
    base = np.eye(d, dtype=np.float32)
    refs = ["c1", "c2"] + [f"o{i}" for i in range(1, others + 1)]
    relevance = [1.0, 0.99] + [0.9 - 0.01 * i for i in range(others)]
    vectors = np.stack([base[0], base[0] + 0.001 * base[1]] + [base[i + 2] for i in range(others)])
    return refs, relevance, vectors


def test_mmr_a_near_duplicate_yields_to_relevant_passages_and_not_to_noise() -> None:
    assert (DUPLICATE_MIN_PASSES, DUPLICATE_MAX_PASSES, DUPLICATE_BAND) == (2, 4, 0.5)
    refs, relevance, vectors = copies_and_others(6)
    # strengths (each retriever's score over its best): c1 and c2 0.8; o1, o2, o3 relevant
    # (0.6, 0.5, 0.41 >= 0.5 * 0.8), o4..o6 noise (0.03)
    strength = [0.8, 0.8, 0.6, 0.5, 0.41, 0.03, 0.03, 0.03]
    picks = mmr(refs, relevance, vectors, k=8, lam=0.7, strength=strength)
    assert [refs[i] for i in picks.order] == ["c1", "o1", "o2", "o3", "c2", "o4", "o5", "o6"]
    assert picks.duplicate_of[4] == 0 and picks.duplicate_of.count(None) == 7
    # all noise after c1: the copy still passes the minimum of 2 (o1, o2), then stops
    noise = [0.8, 0.8] + [0.03] * 6
    picks = mmr(refs, relevance, vectors, k=8, lam=0.7, strength=noise)
    assert [refs[i] for i in picks.order][:4] == ["c1", "o1", "o2", "c2"]


def test_mmr_a_near_duplicate_passes_a_bounded_number_of_relevant_passages() -> None:
    refs, relevance, vectors = copies_and_others(6)
    # every other passage is as strong as the copy: it passes DUPLICATE_MAX_PASSES (4) and no more
    picks = mmr(refs, relevance, vectors, k=8, lam=0.7, strength=[0.8] * 8)
    assert [refs[i] for i in picks.order] == ["c1", "o1", "o2", "o3", "o4", "c2", "o5", "o6"]
    with pytest.raises(KxError, match="strengths"):
        mmr(refs, relevance, vectors, k=8, lam=0.7, strength=[0.8] * 7)
    with pytest.raises(KxError, match="strengths must be finite"):
        mmr(refs, relevance, vectors, k=8, lam=0.7, strength=[float("nan")] * 8)


def test_mmr_duplicate_of_names_the_most_similar_pick() -> None:
    refs = ["a", "b", "x"]
    relevance = [1.0, 0.5, 0.0]
    # b is distinct from a (cos 0); x is a near-copy of b (cos 0.995) and close to a (cos 0.0998)
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [0.0998, 0.995]], dtype=np.float32)
    picks = mmr(refs, relevance, vectors, k=3, lam=0.7)
    assert [refs[i] for i in picks.order] == ["a", "b", "x"]
    assert picks.duplicate_of == [None, None, 1]


def test_mmr_lambda_one_is_relevance_order_with_ref_ties() -> None:
    refs = ["m", "c", "x", "a"]
    relevance = [0.5, 0.9, 0.5, 0.5]
    vectors = np.ones((4, 3), dtype=np.float32)
    # c first (0.9); m, x, a tie at 0.5 -> a, m, x.
    assert [refs[i] for i in order_of(refs, relevance, vectors, k=4, lam=1.0)] == ["c", "a", "m", "x"]


def test_mmr_tie_breaks_on_ref_not_relevance() -> None:
    refs = ["r", "p", "q", "z"]
    relevance = [0.5 + 2**-16, 1.0, 0.5, 0.0]  # rel_norm = relevance (min 0, max 1), exact in binary
    vectors = np.array([[0.5, 0.75**0.5, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, -1.0]],
                       dtype=np.float32)
    # cos(r,p) = 0.5, cos(q,p) = 0, cos(z,p) = 0, cos(z,q) = -1 (no penalty below 0)
    # lam = 0.5
    # step 1: p
    # step 2: r 0.5 * (0.5 + 2**-16) - 0.5 * 0.5**16 = 0.25 exactly;  q 0.25 - 0 = 0.25;  z 0.0
    #         an exact tie; ascending ref picks q although r is more relevant
    # step 3: r 0.25, z 0.0                                         -> r
    assert [refs[i] for i in order_of(refs, relevance, vectors, k=4, lam=0.5)] == ["p", "q", "r", "z"]


def test_mmr_identical_candidates_tie_on_ref() -> None:
    refs = ["c3", "a1", "b2"]
    vectors = np.tile(np.array([[0.6, 0.8]], dtype=np.float32), (3, 1))
    # All relevance equal -> all rel_norm 1.0; all vectors equal -> all near-duplicates of the first.
    picks = mmr(refs, [0.3, 0.3, 0.3], vectors, k=3, lam=0.5)
    assert [refs[i] for i in picks.order] == ["a1", "b2", "c3"]
    assert picks.duplicate_of == [None, 1, 1]


def test_mmr_zero_vector_has_zero_similarity() -> None:
    refs = ["a", "z", "b"]
    relevance = [1.0, 0.5, 0.6]
    vectors = np.array([[1.0, 0.0], [0.0, 0.0], [3.0, 0.0]], dtype=np.float32)
    # rel_norm = (r - 0.5) / 0.5: a 1.0, z 0.0, b 0.2; cos(a,b) = 1 (a duplicate), cos(z,*) = 0.
    # lam = 0.5
    # step 1: a
    # step 2: b is a near-duplicate of a;  z 0.0 - 0 = 0  -> z
    # step 3: b                                          -> b
    assert [refs[i] for i in order_of(refs, relevance, vectors, k=3, lam=0.5)] == ["a", "z", "b"]


def test_mmr_lambda_zero_is_pure_diversity() -> None:
    refs, relevance, vectors = hand_pool()
    # lam = 0: score = -maxsim ** 16 after the first pick, which is the most relevant: a.
    # step 2: b -0.8**16 = -0.028147, c -0.0 -> c.  step 3: b.
    assert order_of(refs, relevance, vectors, k=3, lam=0.0) == [0, 2, 1]
    # the most relevant goes first even when it is not the smallest ref
    assert order_of(["b", "a"], [1.0, 0.0], np.eye(2), k=2, lam=0.0) == [0, 1]


def test_mmr_k_bounds() -> None:
    refs, relevance, vectors = hand_pool()
    assert order_of(refs, relevance, vectors, k=10, lam=0.5) == [0, 1, 2]
    assert order_of(refs, relevance, vectors, k=1, lam=0.5) == [0]
    assert order_of(refs, relevance, vectors, k=0, lam=0.5) == []
    assert order_of([], [], np.zeros((0, 4), dtype=np.float32), k=5, lam=0.5) == []


@pytest.mark.parametrize("lam", [-0.01, 1.01, float("nan")])
def test_mmr_rejects_lambda_outside_unit_interval(lam: float) -> None:
    refs, relevance, vectors = hand_pool()
    with pytest.raises(KxError) as err:
        order_of(refs, relevance, vectors, k=3, lam=lam)
    assert err.value.status is Status.INVALID_ARGUMENT
    assert "mmr_lambda" in err.value.message


@pytest.mark.parametrize("threshold", [0.0, -0.5, 1.01, float("nan")])
def test_mmr_rejects_a_duplicate_threshold_outside_0_1(threshold: float) -> None:
    refs, relevance, vectors = hand_pool()
    with pytest.raises(KxError) as err:
        order_of(refs, relevance, vectors, k=3, lam=0.5, duplicate_threshold=threshold)
    assert err.value.status is Status.INVALID_ARGUMENT and "mmr_duplicate_threshold" in err.value.message


@pytest.mark.parametrize(
    "refs, relevance, vectors, k",
    [
        (["a", "b"], [1.0], np.zeros((2, 2)), 2),  # relevance length
        (["a", "b"], [1.0, 0.5], np.zeros((3, 2)), 2),  # vector rows
        (["a", "b"], [1.0, 0.5], np.zeros(2), 2),  # not 2-d
        (["a", "a"], [1.0, 0.5], np.zeros((2, 2)), 2),  # duplicate ref
        (["a", "b"], [1.0, float("nan")], np.zeros((2, 2)), 2),  # NaN relevance
        (["a", "b"], [1.0, 0.5], np.array([[np.inf, 0.0], [0.0, 1.0]]), 2),  # inf vector
        (["a", "b"], [1.0, 0.5], np.zeros((2, 2)), -1),  # negative k
    ],
)
def test_mmr_rejects_bad_inputs(refs: list[str], relevance: list[float], vectors: np.ndarray, k: int) -> None:
    with pytest.raises(KxError) as err:
        order_of(refs, relevance, vectors, k=k, lam=0.5)
    assert err.value.status is Status.INVALID_ARGUMENT


pool_st = st.integers(1, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.text("0123456789abcdef", min_size=4, max_size=4), min_size=n, max_size=n, unique=True),
        # Few distinct relevance values so ties are common.
        st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), min_size=n, max_size=n),
        st.integers(0, 2**32 - 1),
        st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]),
        st.integers(0, 45),
    )
)


@settings(max_examples=200, deadline=None)
@given(pool=pool_st)
def test_mmr_deterministic_and_permutation_invariant(pool: tuple) -> None:
    refs, relevance, seed, lam, k = pool
    n = len(refs)
    rng = np.random.default_rng(seed)
    # Some exact duplicate rows so similarity ties happen too.
    vectors = rng.standard_normal((n, 6)).astype(np.float32)
    vectors[::3] = vectors[0]
    first = [refs[i] for i in order_of(refs, relevance, vectors, k=k, lam=lam)]
    assert [refs[i] for i in order_of(refs, relevance, vectors, k=k, lam=lam)] == first
    assert len(first) == min(k, n) and len(set(first)) == len(first)

    perm = random.Random(seed).sample(range(n), n)
    p_refs = [refs[i] for i in perm]
    p_rel = [relevance[i] for i in perm]
    picked = order_of(p_refs, p_rel, vectors[perm], k=k, lam=lam)
    assert [p_refs[i] for i in picked] == first


@settings(max_examples=100, deadline=None)
@given(pool=pool_st)
def test_mmr_lambda_one_matches_sorted_relevance(pool: tuple) -> None:
    refs, relevance, seed, _, k = pool
    vectors = np.random.default_rng(seed).standard_normal((len(refs), 4)).astype(np.float32)
    want = sorted(range(len(refs)), key=lambda i: (-relevance[i], refs[i]))[:k]
    assert order_of(refs, relevance, vectors, k=k, lam=1.0) == want


def test_mmr_runs_blas_single_threaded_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[int]] = []
    real = fusion._cosine_matrix

    def spy(vectors: np.ndarray) -> np.ndarray:
        seen.append([lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"])
        return real(vectors)

    before = threadpool_info()
    monkeypatch.setattr(fusion, "_cosine_matrix", spy)
    refs, relevance, vectors = hand_pool()
    order_of(refs, relevance, vectors, k=3, lam=0.5)
    assert seen and all(n == 1 for n in seen[0])
    assert threadpool_info() == before


def test_strengths_put_each_retrievers_scores_on_one_scale() -> None:
    lists = {"dense": [Ranked("a", 0.8), Ranked("b", 0.4), Ranked("n", -0.1)],
             "sparse": [Ranked("b", 12.0), Ranked("c", 3.0)]}
    fused = rrf(lists)
    got = dict(zip([f.ref for f in fused], strengths(fused, lists)))
    # a: 0.8 / 0.8; b: max(0.4 / 0.8, 12 / 12); c: 3 / 12; n: a negative cosine counts as 0
    assert got == {"a": 1.0, "b": 1.0, "c": 0.25, "n": 0.0}
    # a list whose best score is not positive says nothing
    assert strengths(rrf({"sparse": [Ranked("x", -2.0)]}), {"sparse": [Ranked("x", -2.0)]}) == [0.0]


def _array_min_max(values: np.ndarray) -> np.ndarray:
    """mmr's min-max normalising as numpy arrays (how it was written before the Python floats): the oracle's."""
    low, high = float(values.min()), float(values.max())
    if high == low:
        return np.ones_like(values)
    return (values - low) / (high - low)


def _array_mmr_loop(rel_norm: np.ndarray, floor: np.ndarray, sims: np.ndarray, take: int, lam: float,
                    threshold: float) -> tuple[list[int], list[int | None]]:
    """MMR's greedy loop as numpy array operations (how it was written before the plain-Python loop):
    the oracle the Python loop must match bit for bit, picks and duplicate marks."""
    n = len(rel_norm)
    picked: list[int] = []
    duplicate_of: list[int | None] = []
    available = np.ones(n, dtype=bool)
    max_sim = np.full(n, -np.inf)
    nearest = np.full(n, -1)
    passes = np.zeros(n, dtype=np.int64)
    for step in range(take):
        if step == 0:
            scores = rel_norm.copy()
        else:
            penalty = np.maximum(max_sim, 0.0) ** fusion.SHARPNESS
            scores = np.round(lam * rel_norm - (1.0 - lam) * penalty, 12)
        scores[~available] = -np.inf
        duplicate = max_sim >= threshold
        best = int(np.argmax(np.where(duplicate, -np.inf, scores)))
        copy = int(np.argmax(np.where(duplicate, scores, -np.inf)))
        if not available[best] or duplicate[best]:
            best = copy
        elif available[copy] and duplicate[copy] and (
                passes[copy] >= DUPLICATE_MAX_PASSES
                or (passes[copy] >= DUPLICATE_MIN_PASSES and floor[best] < DUPLICATE_BAND * floor[copy])):
            best = copy
        picked.append(best)
        duplicate_of.append(int(nearest[best]) if duplicate[best] else None)
        available[best] = False
        if not duplicate[best]:
            passes[duplicate] += 1
        closer = sims[best] > max_sim
        nearest[closer] = best
        np.maximum(max_sim, sims[best], out=max_sim)
    return picked, duplicate_of


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), lam=st.sampled_from([0.0, 0.3, 0.5, 0.7, 0.9]),
       threshold=st.sampled_from([0.5, 0.8, 0.92, 1.0]), copies=st.integers(0, 6))
def test_mmr_python_loop_matches_the_array_loop_bit_for_bit(seed: int, n: int, lam: float, threshold: float,
                                                             copies: int) -> None:
    # Pools like a query's: RRF-like relevances with ties, strengths, and near-duplicate clusters (copies of
    # a row with a little noise, some exact), so every branch of the duplicate floor is taken.
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, 16))
    for _ in range(copies):
        a, b = rng.integers(0, n, 2)
        vectors[b] = vectors[a] + rng.standard_normal(16) * rng.choice([0.0, 0.05, 0.2])
    relevance = (1.0 / (60 + rng.integers(1, 30, n)) + 1.0 / (60 + rng.integers(1, 30, n))).tolist()
    strength = np.round(rng.random(n), 3).tolist()
    rel_norm = np.round(_array_min_max(np.asarray(relevance)), 12)
    sims = fusion._cosine_matrix(vectors.astype(np.float32))
    floor = np.round(np.asarray(strength), 6)
    take = int(rng.integers(1, n + 1))
    want = _array_mmr_loop(rel_norm, floor, sims, take, lam, threshold)
    got = fusion._greedy_picks(list(range(n)), rel_norm.tolist(), floor.tolist(), sims.tolist(), take, lam,
                               threshold)
    assert (got.order, got.duplicate_of) == want


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), lam=st.sampled_from([0.0, 0.3, 0.7, 1.0]),
       copies=st.integers(0, 6), ties=st.booleans())
def test_mmr_matches_its_numpy_array_version_bit_for_bit(seed: int, n: int, lam: float, copies: int,
                                                          ties: bool) -> None:
    """The whole of mmr (the ref order, min-max normalising and rounding on Python floats, the cosines, the
    loop) against the numpy array version it replaced, on pools passed in a shuffled ref order."""
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, 16)).astype(np.float32)
    for _ in range(copies):
        a, b = rng.integers(0, n, 2)
        vectors[b] = vectors[a] + rng.standard_normal(16).astype(np.float32) * rng.choice([0.0, 0.01, 0.2])
    if ties:   # RRF-like sums: many exact ties
        relevance = (1.0 / (60 + rng.integers(1, 8, n)) + 1.0 / (60 + rng.integers(1, 8, n))).tolist()
    else:
        relevance = (rng.random(n) * rng.choice([1e-3, 1.0, 30.0])).tolist()
    strength = (rng.random(n) * rng.choice([0.0, 1.0])).tolist()
    refs = [f"{int(x):016x}" for x in rng.permutation(10**6)[:n]]
    got = fusion.mmr(refs, relevance, vectors, n, lam, 0.92, strength)

    order = sorted(range(n), key=refs.__getitem__)
    rel_norm = np.round(_array_min_max(np.asarray(relevance, dtype=np.float64)[order]), 12)
    if lam == 1.0:
        picks = np.lexsort((np.arange(n), -rel_norm)).tolist()
        want = ([order[i] for i in picks], [None] * n)
    else:
        floor = np.round(np.asarray(strength, dtype=np.float64)[order], 6)
        sims = fusion._cosine_matrix(vectors[order])
        picks, marks = _array_mmr_loop(rel_norm, floor, sims, n, lam, 0.92)
        want = ([order[i] for i in picks], [None if m is None else order[m] for m in marks])
    assert (got.order, got.duplicate_of) == want


def test_rounding_python_floats_is_numpys_rounding_halves_included() -> None:
    rng = np.random.default_rng(5)
    for decimals in (6, 12):
        halves = (np.arange(0, 4001) + 0.5) / 10.0 ** decimals   # x.5 after scaling: half to even, as np.round
        values = np.concatenate([halves, rng.random(20_000), rng.random(2_000) * 1e-9])
        assert fusion._rounded(values.tolist(), decimals) == np.round(values, decimals).tolist()


@pytest.mark.slow  # a fresh process
def test_import_does_not_pull_in_torch() -> None:
    code = "import sys, engine.fusion; sys.exit(1 if 'torch' in sys.modules else 0)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
