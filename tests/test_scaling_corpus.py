"""The scaling benchmark's documents and stand-in vectors (benchmarks/scaling_corpus.py): what its figures rest on.

The million-passage row compares kx with a floor that regenerates the same
documents in another process and indexes the same vectors; these hold the
generator to that: the same seed gives the same documents, they add up to
about the passages asked for as kx's chunker cuts them, several to a
document, and a text's vector is a unit vector that depends on its text only;
and a build a stopped run left, resumed (scaling.py --resume), skips what it
holds and ends holding what a fresh build holds.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.text.chunking import chunk_text

from .helpers import REPO, needs_shared


@pytest.fixture
def corpus(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import scaling_corpus

    return scaling_corpus


@needs_shared("cranfield", "corpus.jsonl")
def test_documents_are_seeded_varied_and_cut_into_about_the_passages_asked(corpus) -> None:
    pool = corpus.sentence_pool(["cranfield"])
    docs = list(corpus.documents(1500, 7, pool))
    assert docs == list(corpus.documents(1500, 7, pool))                 # the floor's process sees the same
    assert docs != list(corpus.documents(1500, 8, pool))
    cut = [len(chunk_text(text, 1000, 200)) for _name, text in docs]
    assert 0.9 * 1500 <= sum(cut) <= 1.1 * 1500                          # kx's chunker, not the estimate
    assert np.median(cut) >= 3 and max(cut) > 3 * np.median(cut)         # several passages each, lengths vary
    assert len({name for name, _t in docs}) == len(docs)
    passages = [c.text for _name, text in docs for c in chunk_text(text, 1000, 200)]
    assert len(set(passages)) > 0.99 * len(passages)                     # recombined, not copies
    assert len(corpus.query_texts(20, 1, pool)) == 20


def test_stand_in_vectors_are_unit_and_depend_on_the_text_only(corpus) -> None:
    texts = ["alpha beta", "gamma", "alpha beta", ""]
    first = corpus.vectors(texts)
    assert first.shape == (4, corpus.DIM) and first.dtype == np.float32
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(first[0], first[2]) and not np.allclose(first[0], first[1])
    embedder = corpus.StandIn()
    assert np.array_equal(embedder.encode(texts[1:2]), first[1:2])      # the engine's path, the floor's vectors
    assert embedder.count == 1 and embedder.card.dimension == corpus.DIM


@pytest.mark.slow
@needs_shared("scifact", "corpus.jsonl")
@needs_shared("cranfield", "corpus.jsonl")
@needs_shared("cisi", "corpus.jsonl")
def test_a_resumed_build_ingests_what_the_stopped_one_left_and_ends_as_a_fresh_one(corpus, tmp_path) -> None:
    import scaling

    from engine import load_settings
    from engine.open_backend import open_backend

    kind = scaling.corpus_of("collections")
    docs, _vectors = kind.documents(300, 300)
    backend = open_backend(load_settings({"home": str(tmp_path), "embed_model": "none"}, env={}),
                           embedder=kind.embedder())
    backend.ingest(kind.dataset, docs[:7])                              # the stopped run's part
    left, skipped = scaling.remaining(backend, kind, 300)
    assert skipped == 7 and [d.name for d in left] == [d.name for d in docs[7:]]
    report = backend.ingest(kind.dataset, left)
    cut = sum(len(chunk_text(d.data.decode(), 1000, 200)) for d in docs)
    assert (report.documents, report.passages) == (len(docs), cut)      # what a fresh build of 300 holds
    assert len(report.results) == len(left)                             # the held ones were not offered again
    assert scaling.remaining(backend, kind, 300) == ([], len(docs))
    backend.close()
