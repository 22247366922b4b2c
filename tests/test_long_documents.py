"""Dense's long-document correction (engine/ranking.py, LONG_DOCUMENT_PENALTY): a book's thousand passages
hold by chance one near any question, so a pile's books must not crowd out the short file that answers.
The slow test checks it through the real model on real text (Cranfield's abstracts: one long "book" of them
beside short records).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from engine import Engine, load_settings
from engine.ranking import LONG_DOCUMENT_DEPTH, LONG_DOCUMENT_PASSAGES, LONG_DOCUMENT_PENALTY, dense_list
from engine.retrieval import Candidates
from engine.text.inputs import from_text

from .helpers import SHARED_DATA, needs_shared


class _Graph:
    """A searcher's dense side: (key, cosine, its document's passage count), best first; records the depths
    it was asked for."""

    def __init__(self, rows: list[tuple[int, float, int]]) -> None:
        self.rows, self.asked = sorted(rows, key=lambda r: -r[1]), list[int]()
        self.count = {key: n for key, _, n in rows}

    def dense_candidates(self, vector, pool, only=None) -> Candidates:
        self.asked.append(pool)
        top = self.rows[:pool]
        return Candidates.of([key for key, _, _ in top], [cos for _, cos, _ in top])

    def chunk_counts(self, keys):
        return [self.count[key] for key in keys]

    def longest_document(self) -> int:
        return max(self.count.values())


def _penalty(n: int) -> float:
    n = max(n, LONG_DOCUMENT_PASSAGES)
    return LONG_DOCUMENT_PENALTY * (math.sqrt(2 * math.log(n)) - math.sqrt(2 * math.log(LONG_DOCUMENT_PASSAGES)))


def test_a_pile_of_short_documents_gets_the_graphs_own_answer() -> None:
    graph = _Graph([(key, 0.9 - key / 100, 1 + key % LONG_DOCUMENT_PASSAGES) for key in range(40)])
    found = dense_list(graph, np.zeros(4), 10, None)
    plain = graph.dense_candidates(None, 10)
    assert found.keys == plain.keys and np.array_equal(found.scores, plain.scores)
    assert graph.asked == [10, 10]  # never asked deeper


def test_a_books_chance_neighbour_no_longer_outranks_the_short_document_that_answers() -> None:
    # the book's passage is 0.02 closer; a 1,000-passage book's chance of that is what the correction takes back
    graph = _Graph([(1, 0.52, 1000), (2, 0.50, 3), (3, 0.40, 1000)])
    found = dense_list(graph, np.zeros(4), 2, None)
    assert found.keys == [2, 1]
    assert found.scores[0] == 0.5 and found.scores[1] == round(0.52 - _penalty(1000), 6)
    assert graph.asked == [LONG_DOCUMENT_DEPTH * 2]  # once, deeper


def test_a_clearly_closer_passage_of_a_book_still_comes_first() -> None:
    graph = _Graph([(1, 0.70, 1200), (2, 0.50, 2)])
    assert dense_list(graph, np.zeros(4), 2, None).keys == [1, 2]
    assert _penalty(1200) < 0.09  # bounded: a book loses at most ~0.086 of cosine


def test_inside_one_document_the_order_is_the_graphs() -> None:
    rows = [(key, 0.8 - key / 50, 869) for key in range(20)]
    found = dense_list(_Graph(rows), np.zeros(4), 10, None)
    assert found.keys == list(range(10))


def test_a_short_documents_passage_below_the_pool_can_move_up_into_it() -> None:
    graph = _Graph([(key, 0.60 - key / 1000, 900) for key in range(10)] + [(99, 0.58, 1)])
    found = dense_list(graph, np.zeros(4), 10, None)
    assert found.keys[0] == 99 and 99 not in graph.dense_candidates(None, 10).keys


CRANFIELD = SHARED_DATA / "cranfield" / "corpus.jsonl"


@pytest.mark.slow
@needs_shared("cranfield", "corpus.jsonl")
def test_a_long_documents_passages_are_scored_less_its_chance_and_short_ones_as_cosines(real_embedder) -> None:
    records = [json.loads(line) for line, _ in zip(CRANFIELD.open(encoding="utf-8"), range(48))]
    book = "\n\n".join(r["text"] for r in records[:40])   # ~40 passages at the default chunk size
    engine = Engine(load_settings({}), embedder=real_embedder)
    engine.ingest("pile", [from_text(book, name="Collected Abstracts")]
                  + [from_text(r["text"], name=f"record {r['_id']}") for r in records[40:]])
    question = "boundary layer transition on a flat plate at supersonic speed"
    hits = engine.query("pile", question, k=10, mode="dense", rerank=False).hits
    assert {h.document_name for h in hits} >= {"Collected Abstracts"}
    query = real_embedder.encode([question])[0]
    for hit in hits:
        cosine = float(np.dot(query, real_embedder.encode([hit.text])[0]))
        n = max(hit.chunk_count, LONG_DOCUMENT_PASSAGES)
        expected = cosine - LONG_DOCUMENT_PENALTY * (math.sqrt(2 * math.log(n))
                                                     - math.sqrt(2 * math.log(LONG_DOCUMENT_PASSAGES)))
        assert hit.score == pytest.approx(expected, abs=2e-4), hit.document_name
    # the book's passages lose what its size gives them by chance, and nothing else does
    book_hits = [h for h in hits if h.document_name == "Collected Abstracts"]
    assert book_hits[0].chunk_count > LONG_DOCUMENT_PASSAGES
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    engine.close()
