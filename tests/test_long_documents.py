"""The end-to-end half of tests/unit/test_long_documents.py: dense's long-document correction through the
real model, on real text (Cranfield's abstracts: one long "book" of them beside short records)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from engine import Engine, load_settings
from engine.ranking import LONG_DOCUMENT_PASSAGES, LONG_DOCUMENT_PENALTY
from engine.text.inputs import from_text

from .helpers import SHARED_DATA, needs_shared

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
