"""Filtered queries (engine/embedded/filtered.py): an allowed set whose vectors fit the budget is scored exactly, so
a filter matching few passages still returns the k best of them, the same passages and scores as exact search over
them; and whichever way the dense side goes (exact, exact scored by the graph, the graph widened), every mode
answers the same."""

from __future__ import annotations

import fnmatch
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import engine.embedded.filtered as filtered_module
import engine.embedded.readers as readers_module
from engine import Engine
from engine.embedded import dense as dense_module
from engine.embedded.filtered import FilterVectors
from engine.text.inputs import DocumentInput, from_text

from .helpers import HashEmbedder, small_engine

WORDS = ("invoice finance team travel expense report budget audit ledger payment receipt approval manager "
         "policy contract supplier refund quarter forecast").split()
QUERY = "finance team invoice payment approval"


def _docs(count: int, start: int = 0) -> list[DocumentInput]:
    """One passage each, words drawn at random (distinct texts: no two share a vector), in folders f0..f9."""
    rng = np.random.default_rng(start + 11)
    return [DocumentInput(f"f{i % 10}/doc-{i:04d}", " ".join(rng.choice(WORDS, 8)).encode() + f" n{i}".encode(),
                          media_type="text/plain") for i in range(start, start + count)]


def _reference(home: Path, where: str, k: int) -> list[tuple[str, float]]:
    """Exact dense search read straight from the catalogue: every embedded passage whose document name matches,
    by cosine with the query's vector, best first."""
    query = HashEmbedder().encode([QUERY])[0].astype(np.float64)
    db = sqlite3.connect(home / "datasets" / "corp" / "catalog.sqlite")
    rows = db.execute("SELECT p.ref, d.name, p.vector FROM passages p JOIN documents d ON d.ref = p.doc_ref").fetchall()
    db.close()
    scored = [(ref, float(np.frombuffer(vec, dtype=np.float32).astype(np.float64) @ query))
              for ref, name, vec in rows if fnmatch.fnmatchcase(name, where)]
    scored.sort(key=lambda pair: -pair[1])
    return scored[:k]


def _answer(engine: Engine, mode: str, where: str | None, k: int = 5) -> list[tuple]:
    result = engine.query("corp", QUERY, k=k, mode=mode, where=[f"name:{where}"] if where else None)
    return [(h.passage_ref, h.score, h.dense_score, h.sparse_score, h.fused_score) for h in result.hits]


@pytest.fixture
def corp(hash_engine: Engine) -> Engine:
    hash_engine.ingest("corp", _docs(400))
    return hash_engine


@pytest.mark.parametrize("regime", ["numpy", "graph-scored", "widened"])
def test_a_selective_filter_returns_the_exact_k_best_allowed_passages(corp: Engine, kx_home: Path, monkeypatch,
                                                                       regime: str) -> None:
    if regime == "graph-scored":   # an allowed set above the numpy limit: picked exactly, scored by voyager
        monkeypatch.setattr(filtered_module, "EXACT_FILTER_LIMIT", 3)
    if regime == "widened":        # no budget: the graph searched widened, as a filter too big to hold does
        monkeypatch.setattr(readers_module, "EXACT_FILTER_BYTES", 0)
    for where in ("f7/*", "*/doc-00[0-4]?", "f3/doc-03*"):   # 40, 50 and 4 passages of 400
        got = corp.query("corp", QUERY, k=8, mode="dense", rerank=False, where=[f"name:{where}"]).hits
        expected = _reference(kx_home, where, 8)
        assert [h.passage_ref for h in got] == [ref for ref, _ in expected], (regime, where)
        assert np.allclose([h.dense_score for h in got], [s for _, s in expected], atol=2e-6), (regime, where)


def test_the_graph_scored_pass_gives_a_passage_the_score_it_has_unfiltered(corp: Engine, monkeypatch) -> None:
    monkeypatch.setattr(filtered_module, "EXACT_FILTER_LIMIT", 3)
    unfiltered = {h.passage_ref: h.dense_score for h in corp.query("corp", QUERY, k=64, mode="dense").hits}
    filtered = corp.query("corp", QUERY, k=8, mode="dense", where=["name:f7/*"]).hits
    both = [h for h in filtered if h.passage_ref in unfiltered]
    assert both and all(h.dense_score == unfiltered[h.passage_ref] for h in both)


@pytest.mark.parametrize("mode", ["dense", "sparse", "hybrid"])
def test_every_mode_answers_the_same_whichever_way_the_dense_side_goes(corp: Engine, monkeypatch, mode: str) -> None:
    monkeypatch.setattr(filtered_module, "EXACT_FILTER_LIMIT", 3)
    exact = {where: _answer(corp, mode, where) for where in ("f7/*", "f[1-6]/*", "*")}
    monkeypatch.setattr(readers_module, "EXACT_FILTER_BYTES", 0)
    corp.close()   # fresh readers: nothing kept from the exact passes
    for where, answer in exact.items():
        assert _answer(corp, mode, where) == answer, where
        assert len(answer) == 5


def test_sparse_with_a_filter_is_the_unfiltered_list_narrowed(corp: Engine) -> None:
    every = corp.query("corp", QUERY, k=64, mode="sparse").hits
    narrowed = [(h.passage_ref, h.sparse_score) for h in every if h.document_name.startswith("f7/")][:5]
    got = corp.query("corp", QUERY, k=5, mode="sparse", where=["name:f7/*"]).hits
    assert len(narrowed) == 5 and [(h.passage_ref, h.sparse_score) for h in got] == narrowed


def test_a_reader_reopened_after_a_commit_reads_only_the_new_allowed_vectors(corp: Engine, monkeypatch) -> None:
    monkeypatch.setattr(filtered_module, "EXACT_FILTER_LIMIT", 3)   # kept rows are scored by the graph
    monkeypatch.setattr(dense_module, "_TAIL_FROM", 50)   # the commit goes to the graph's tail: the graph stays
    corp.query("corp", QUERY, k=5, mode="dense", where=["name:f7/*"])
    read: list[int] = []
    original = readers_module.DatasetSearcher._read_vectors
    monkeypatch.setattr(readers_module.DatasetSearcher, "_read_vectors",
                        lambda self, seqs: read.append(len(seqs)) or original(self, seqs))
    corp.ingest("corp", _docs(30, start=400))   # 3 more in f7/
    after = _answer(corp, "dense", "f7/*")
    assert read == [3]
    corp.close()
    fresh = small_engine()
    assert _answer(fresh, "dense", "f7/*") == after
    fresh.close()


def test_filter_vectors_keep_the_latest_filters_within_the_budget(monkeypatch) -> None:
    rows = {seq: np.full(4, seq, dtype=np.float32) for seq in range(1, 40)}
    asked: list[list[int]] = []

    def read(seqs: list[int]) -> np.ndarray:
        asked.append(seqs)
        return np.stack([rows[s] for s in seqs])

    kept = FilterVectors(budget=20 * 16)   # 20 rows of 4 float32; a filter at most 10 of them
    first = np.arange(1, 11)
    assert (kept.vectors("a", first, read, 4)[:, 0] == first).all() and asked == [first.tolist()]
    kept.vectors("a", first, read, 4)
    assert len(asked) == 1   # held
    moved = np.array([2, 3, 11, 12])   # another snapshot of "a": rows 2, 3 kept, 11 and 12 read
    assert (kept.vectors("a", moved, read, 4)[:, 0] == moved).all() and asked[-1] == [11, 12]
    kept.vectors("b", np.arange(20, 30), read, 4)
    kept.vectors("c", np.arange(30, 39), read, 4)   # over the budget: "a", the least recently used, goes
    assert kept.held_bytes <= 20 * 16 and kept.fits(10, 4) and not kept.fits(11, 4)
    kept.vectors("a", moved, read, 4)
    assert asked[-1] == moved.tolist()
    monkeypatch.setattr(filtered_module, "_READ_ROWS", 4)   # a large set is read a slice at a time
    assert (kept.vectors("d", np.arange(1, 11), read, 4)[:, 0] == np.arange(1, 11)).all()
    assert asked[-3:] == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10]]


def test_the_tail_is_scored_as_the_graph_search_scores_it(tmp_path: Path, monkeypatch) -> None:
    from .test_dense_tail import _Corpus

    monkeypatch.setattr(dense_module, "_TAIL_FROM", 50)
    monkeypatch.setattr(dense_module, "_TAIL_LIMIT", 30)
    corpus = _Corpus(tmp_path)
    corpus.index().catch_up(corpus.catalogue, corpus.add(60))
    index = corpus.index()
    index.catch_up(corpus.catalogue, corpus.add(10))   # 10 in the tail
    index = corpus.index()
    index.load(corpus.catalogue)
    query = np.random.default_rng(3).standard_normal(8).astype(np.float32)
    seqs, sims = index.search_arrays(query, 70, 300)
    stored = np.stack([corpus.vectors[int(s)] for s in seqs])
    assert (seqs > 60).sum() == 10
    assert np.array_equal(index.similarities(query, seqs, stored), sims.astype(np.float32))


def test_the_compiled_name_test_agrees_with_each_glob() -> None:
    from engine.filters import name_matches, parse_where

    names = [("f07/doc-0010", None), ("f07/doc-0011", "/data/f07/doc-0011.md"), ("guide/a.b", "/x/guide/a.b"),
             ("Guide/x", None), ("a\nb", None), ("[x]", "/p/[x]"), ("f1/doc", "f7/doc"), ("", None)]
    for globs in (["*0"], ["*/f07/*"], ["f0[!7]/*", "*.b"], ["guide/*"], ["a?b"], ["[[]x]"], ["*"], ["f7/*"]):
        test = parse_where([f"name:{g}" for g in globs]).name_test()
        assert test is not None
        for name, path in names:
            assert test(name, path) == any(name_matches(g, name, path) for g in globs), (globs, name, path)
    assert parse_where(["type:pdf"]).name_test() is None


@pytest.mark.slow
def test_filtered_queries_through_the_real_model_match_exact_search(handbook_home: Path, real_embedder,
                                                                    monkeypatch) -> None:
    from engine import load_settings

    question = "how many days do I have to return an item for a refund"
    monkeypatch.setattr(filtered_module, "EXACT_FILTER_LIMIT", 1)   # the graph-scored exact pass
    engine = Engine(load_settings({"home": str(handbook_home)}, env={}), embedder=real_embedder)
    where = ["name:re*"]   # refunds-and-returns and remote-work, of six
    answers = {mode: engine.query("handbook", question, k=5, mode=mode, where=where).hits
               for mode in ("dense", "sparse", "hybrid")}
    db = sqlite3.connect(handbook_home / "datasets" / "handbook" / "catalog.sqlite")
    rows = db.execute("SELECT p.ref, d.name, p.vector FROM passages p JOIN documents d ON d.ref = p.doc_ref "
                      "WHERE d.name GLOB 're*'").fetchall()
    db.close()
    query = real_embedder.encode([question])[0]
    exact = sorted(((float(np.frombuffer(v, dtype=np.float32) @ query), ref) for ref, _n, v in rows), reverse=True)
    assert [h.passage_ref for h in answers["dense"]] == [ref for _s, ref in exact[:5]]
    assert answers["hybrid"][0].document_name == "refunds-and-returns"
    monkeypatch.setattr(readers_module, "EXACT_FILTER_BYTES", 0)   # the graph widened, as before
    engine.close()
    for mode, hits in answers.items():
        again = engine.query("handbook", question, k=5, mode=mode, where=where).hits
        assert [(h.passage_ref, h.score, h.dense_score) for h in again] == \
            [(h.passage_ref, h.score, h.dense_score) for h in hits], mode
    engine.close()


def test_a_reopened_reader_resolves_a_filter_from_the_last_one_and_answers_as_a_fresh_one(corp: Engine,
                                                                                        monkeypatch) -> None:
    from engine.embedded.catalogue.passages import PassageReads

    monkeypatch.setattr(dense_module, "_TAIL_FROM", 50)   # small commits go to the graph's tail: it stays loaded
    asked: list[int] = []
    original = PassageReads.allowed_seqs
    monkeypatch.setattr(PassageReads, "allowed_seqs", lambda self, *args, **kw: asked.append(
        kw.get("after_document", 0)) or original(self, *args, **kw))
    kinds = [(where, versions) for where in ("f7/*", "*/doc-01*") for versions in ("latest", "all")]

    def answers(engine: Engine) -> list:
        # k 64: every allowed passage is in the answer (f7/ has 42 documents at most), a wrong one too
        return [engine.query("corp", QUERY, k=64, mode="hybrid", where=[f"name:{w}"], versions=v).hits
                for w, v in kinds]

    def same_as_fresh() -> None:
        fresh = small_engine()
        assert [[(h.passage_ref, h.score) for h in a] for a in answers(corp)] == \
            [[(h.passage_ref, h.score) for h in a] for a in answers(fresh)]
        fresh.close()

    answers(corp)
    edited = from_text("finance team invoice ledger audit", name="f7/doc-0017")
    # new documents; a new version of an allowed one (the old one hidden); the old bytes again (shown again: the
    # latest view is resolved from scratch)
    for change, incremental in (_docs(20, start=400), [True] * 4), ([edited], [True] * 4), \
            ([_docs(400)[17]], [False, True, False, True]):
        corp.ingest("corp", change)
        asked.clear()
        same_as_fresh()
        assert [after > 0 for after in asked] == incremental + [False] * len(kinds), asked
