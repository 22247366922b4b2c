"""kx's BM25 anchored on an independent implementation (bm25s), not only on whoosh's own search.

tests/test_bm25_parity.py holds the numpy scorer to whoosh scoring the same formula; both read the same
postings, so a mistake in the formula they share would pass there. bm25s computes BM25 from the tokens alone.
Where the two differ by design, the comparison says so:
- bm25s's "lucene" variant drops BM25's (k1 + 1) numerator factor (as Lucene 8 does); kx keeps it: kx's score
  is (k1 + 1) times bm25s's. The IDF is the same, ln(1 + (N - n + 0.5) / (n + 0.5)).
- whoosh stores each passage's length in one byte, quantised above 10 tokens (11 reads back as 12); kx's
  statistics use those stored lengths. The passages here are at most 10 tokens long, where the byte is exact.
- kx adds the name field's BM25 (its own IDF and lengths) at NAME_WEIGHT: bm25s scores that field as a corpus
  of its own, added with the same weight.
"""

from __future__ import annotations

import random

import bm25s
import numpy as np
import pytest

from engine import Engine
from engine.embedded.bm25 import NAME_WEIGHT
from engine.embedded.dataset import Dataset
from engine.text.analysis import build_analyzer, name_field_text
from engine.text.inputs import from_text

WORDS = ("refund return receipt token vpn badge leave holiday travel expense hotel mileage laptop password "
         "printer office parking desk meeting budget").split()


def _bm25s_scores(corpus: list[list[str]], query: list[str], k1: float, b: float) -> np.ndarray:
    retriever = bm25s.BM25(k1=k1, b=b, method="lucene", dtype="float64")
    retriever.index(corpus, show_progress=False)
    return np.asarray(retriever.get_scores(query), dtype=np.float64)


@pytest.mark.parametrize("k1, b", [(1.2, 0.75), (0.9, 1.0)])
def test_kx_bm25_equals_bm25s_on_a_small_corpus(hash_engine: Engine, k1: float, b: float) -> None:
    rng = random.Random(7)
    names = [rng.choice(["travel policy", "laptop guide", "office notes"]) + f" {i}" for i in range(60)]
    texts = [" ".join(rng.choices(WORDS, k=rng.randint(2, 10))) + f" unique{i}" for i in range(60)]
    texts = [" ".join(t.split()[-10:]) for t in texts]  # at most 10 tokens: whoosh's length byte is exact
    hash_engine.ingest("anchor", [from_text(text, name) for text, name in zip(texts, names)])
    analyzer = build_analyzer(True)
    body = [[t.text for t in analyzer(text)] for text in texts]
    name_tokens = [[t.text for t in analyzer(name_field_text(name, None))] for name in names]
    assert all(1 <= len(tokens) <= 10 for tokens in body)

    scorer = Dataset(hash_engine.settings, "anchor").sparse(True).open_scorer(k1, b)
    with hash_engine.reading("anchor") as searcher:
        text_of = {seq: row.text for seq, row in searcher.passages(scorer.docnum_seqs().tolist()).items()}
    index_of = {seq: texts.index(text) for seq, text in text_of.items()}
    assert sorted(index_of.values()) == list(range(60))  # one passage per document

    for query in (["refund", "hotel"], ["laptop", "guide", "budget"], ["travel"], ["office", "desk", "unique3"]):
        seqs, scores = scorer.top_arrays(query, 1000)
        got = dict(zip(seqs.tolist(), scores.tolist()))
        expected = (k1 + 1.0) * (_bm25s_scores(body, query, k1, b)
                                 + NAME_WEIGHT * _bm25s_scores(name_tokens, query, k1, b))
        want = {seq: float(expected[i]) for seq, i in index_of.items() if expected[i] > 0}
        assert set(got) == set(want), query
        for seq, score in want.items():
            assert got[seq] == pytest.approx(score, rel=1e-9, abs=1e-12), (query, seq)
