"""Query expansion without a chat model: pseudo-relevance feedback from a first pass.

With `expand` (`kx datasets query --expand`, setting `query_expansion`) a
query runs once, its top `FEEDBACK_PASSAGES` fused passages are taken as
relevant, and it runs again with
- for the sparse list, RM3 terms: a feedback term model (each passage's
  term shares, weighted by its fused score), whose best `EXPANSION_TERMS`
  terms are mixed with the query's own at `ORIGINAL_WEIGHT` and used as BM25
  term weights (the query's total weight is kept, so scores stay on the
  first pass's scale);
- for the dense list, a Rocchio vector: the query vector plus `ROCCHIO_BETA`
  times the feedback passages' mean vector, unit length again (a hit's
  dense_score is then its cosine to that vector).
The second pass is fused by RRF (K, ties on ref) and MMR exactly as the
first; the result lists the terms that were added. Deterministic: terms tie
on the term itself.

Off by default: on Cranfield's short queries it adds +0.018 nDCG@10 to
hybrid, on CISI's paragraph-long ones the moved vector drifts and hybrid
loses 0.025 (BENCHMARKS.md, "Query expansion").

This module is the arithmetic only (a leaf: engine/embedded/readers.py weighs terms
with it); the second pass over a searcher is `ranking._expanded_lists`.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

# Measured on Cranfield and CISI (BENCHMARKS.md): 5 passages and 10 terms at an even mix; a Rocchio step of
# 0.25 instead of 0.5 lost 0.002 on Cranfield and gained nothing on CISI.
FEEDBACK_PASSAGES = 5
EXPANSION_TERMS = 10
ORIGINAL_WEIGHT = 0.5
ROCCHIO_BETA = 0.5


def rm3_weights(query_counts: Mapping[str, int], feedback: Sequence[tuple[Mapping[str, int], float]],
                document_frequency: Callable[[str], int]) -> tuple[dict[str, float], list[str]]:
    """BM25 term weights for the expanded query, and the terms added (best first).

    `query_counts`: the query's analysed terms and how often each occurs;
    `feedback`: each feedback passage's analysed term counts and its weight.
    A term no passage of the index holds is never added.
    """
    model: dict[str, float] = {}
    norm = sum(max(w, 0.0) for _counts, w in feedback) or 1.0
    for counts, weight in feedback:
        length = sum(counts.values())
        if not length or weight <= 0:
            continue
        for term, n in counts.items():
            model[term] = model.get(term, 0.0) + weight / norm * n / length
    ranked = sorted(model.items(), key=lambda kv: (-kv[1], kv[0]))
    chosen = [(t, w) for t, w in ranked if document_frequency(t) > 0][:EXPANSION_TERMS]
    chosen_total = sum(w for _t, w in chosen) or 1.0
    query_total = float(sum(query_counts.values())) or 1.0
    weights = {t: ORIGINAL_WEIGHT * c for t, c in query_counts.items()}
    for term, w in chosen:
        weights[term] = weights.get(term, 0.0) + (1.0 - ORIGINAL_WEIGHT) * query_total * w / chosen_total
    return weights, [t for t, _w in chosen if t not in query_counts]


def rocchio(query: np.ndarray, feedback: np.ndarray) -> np.ndarray:
    """The query vector moved towards the feedback vectors' mean, unit length."""
    moved = np.asarray(query, dtype=np.float32) + ROCCHIO_BETA * np.asarray(feedback, dtype=np.float32).mean(axis=0)
    return (moved / (float(np.linalg.norm(moved)) or 1.0)).astype(np.float32)
