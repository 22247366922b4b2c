"""A large graph takes small commits as an exactly searched tail (engine/embedded/dense.py): the graph file stays
as it was, a reader reopening keeps the graph it loaded, and what dense returns is the graph's answer with
the tail's exact best merged in by similarity."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine.embedded import dense as dense_module
from engine.embedded.dense import DenseIndex
from engine.embedded.store import Catalogue
from engine.fingerprint import Fingerprint
from engine.rows import NewDocument, NewPassage

DIM = 8


@pytest.fixture
def small_tail(monkeypatch):
    monkeypatch.setattr(dense_module, "_TAIL_FROM", 50)
    monkeypatch.setattr(dense_module, "_TAIL_LIMIT", 30)


class _Corpus:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.catalogue = Catalogue(folder / "catalog.sqlite")
        self.rng = np.random.default_rng(5)
        self.vectors: dict[int, np.ndarray] = {}
        self.fingerprint = Fingerprint("m", "mean", DIM, "c1", 100, 10, "t1", True)

    def add(self, n: int) -> int:
        start = self.catalogue.max_passage_seq()
        vectors = self.rng.standard_normal((n, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        docs = [NewDocument(ref=f"d{start + i}", name=f"n{start + i}", source_path=None, media_type="text/plain",
                            data=f"d{start + i}".encode(), text_length=4,
                            passages=[NewPassage(ref=f"p{start + i}", chunk_index=0, chunk_count=1, char_start=0,
                                                 char_end=4, text="text")]) for i in range(n)]
        self.catalogue.commit_documents(docs, vectors, self.fingerprint)
        for i in range(n):
            self.vectors[start + i + 1] = vectors[i]
        return self.catalogue.max_passage_seq()

    def index(self) -> DenseIndex:
        return DenseIndex(self.folder, DIM)

    def sidecar(self) -> dict:
        return json.loads((self.folder / "dense.json").read_text())


def _identity(path: Path) -> tuple:
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


def test_a_small_commit_on_a_large_graph_goes_to_the_tail_and_a_full_tail_is_folded_in(tmp_path, small_tail):
    corpus = _Corpus(tmp_path)
    writer = corpus.index()
    writer.catch_up(corpus.catalogue, corpus.add(60))   # below _TAIL_FROM: a graph, as always
    graph = tmp_path / "dense.voy"
    before = _identity(graph)
    assert corpus.sidecar()["count"] == 60 and "graph_count" not in corpus.sidecar()

    assert writer.catch_up(corpus.catalogue, corpus.add(10)) == 10
    assert _identity(graph) == before                    # the graph file was not rewritten
    meta = corpus.sidecar()
    assert (meta["watermark"], meta["count"], meta["graph_watermark"], meta["graph_count"]) == (70, 70, 60, 60)
    reader = corpus.index()
    reader.load(corpus.catalogue)
    assert len(reader) == 70 and reader.held == 70 and reader.consistent_with(corpus.catalogue)

    writer.catch_up(corpus.catalogue, corpus.add(25))    # 35 > _TAIL_LIMIT: folded into a new graph
    assert _identity(graph) != before
    meta = corpus.sidecar()
    assert (meta["watermark"], meta["count"]) == (95, 95) and "graph_count" not in meta
    fresh = corpus.index()
    fresh.load(corpus.catalogue)
    assert len(fresh.load()) == 95 and len(fresh) == 95
    corpus.catalogue.close()


def test_dense_answers_are_the_graphs_with_the_tails_exact_best_merged_in(tmp_path, small_tail):
    corpus = _Corpus(tmp_path)
    writer = corpus.index()
    writer.catch_up(corpus.catalogue, corpus.add(60))
    writer.catch_up(corpus.catalogue, corpus.add(20))
    reader = corpus.index()
    reader.load(corpus.catalogue)
    graph_only = corpus.index()
    graph_only.load()   # no catalogue: the graph alone
    assert len(graph_only) == 60 and graph_only.held == 60
    for seq in (3, 65, 80):   # a graph passage and tail passages find themselves first
        seqs, sims = reader.search_arrays(corpus.vectors[seq], 5, 64)
        assert seqs[0] == seq and sims[0] == pytest.approx(1.0, abs=1e-5)
    query = corpus.rng.standard_normal(DIM).astype(np.float32)
    seqs, sims = reader.search_arrays(query, 10, 64)
    g_seqs, g_sims = graph_only.search_arrays(query, 10, 64)
    unit = query / np.linalg.norm(query)
    tail = sorted(((float(np.float32(corpus.vectors[s] @ unit)), s) for s in range(61, 81)), reverse=True)
    merged = sorted([(float(np.float32(v)), s, 0) for s, v in zip(g_seqs, g_sims)]
                    + [(v, s, 1) for v, s in tail[:10]], key=lambda row: (-row[0], row[2]))[:10]
    assert seqs.tolist() == [s for _v, s, _o in merged]
    assert np.allclose(sims, [v for v, _s, _o in merged], atol=1e-6)
    assert np.all(np.diff(sims) <= 0)
    assert reader.search_arrays(query, 10, 64)[0].tolist() == seqs.tolist()   # one state, one order
    corpus.catalogue.close()


def test_a_reopened_reader_keeps_the_loaded_graph_and_reads_only_the_new_tail(tmp_path, small_tail):
    corpus = _Corpus(tmp_path)
    writer = corpus.index()
    writer.catch_up(corpus.catalogue, corpus.add(60))
    old = corpus.index()
    old.load(corpus.catalogue)
    writer.catch_up(corpus.catalogue, corpus.add(5))
    new = corpus.index()
    new.adopt(old)
    new.load(corpus.catalogue)
    assert new.load() is old.load() and len(new) == 65 and new.held == 65
    fresh = corpus.index()
    fresh.load(corpus.catalogue)
    query = corpus.rng.standard_normal(DIM).astype(np.float32)
    assert new.search_arrays(query, 10, 64)[0].tolist() == fresh.search_arrays(query, 10, 64)[0].tolist()

    writer.catch_up(corpus.catalogue, corpus.add(40))   # folded: a new graph file, so nothing is adopted
    newest = corpus.index()
    newest.adopt(new)
    newest.load(corpus.catalogue)
    assert newest.load() is not new.load() and len(newest) == 105
    corpus.catalogue.close()


def test_a_sidecar_vouching_for_a_tail_the_catalogue_lacks_is_not_held(tmp_path, small_tail):
    corpus = _Corpus(tmp_path)
    writer = corpus.index()
    writer.catch_up(corpus.catalogue, corpus.add(60))
    writer.catch_up(corpus.catalogue, corpus.add(10))
    meta = corpus.sidecar()
    meta["count"] = 75   # edited: five more than the catalogue holds in the tail's range
    (tmp_path / "dense.json").write_text(json.dumps(meta))
    reader = corpus.index()
    reader.load(corpus.catalogue)
    assert reader.held == 60 and len(reader) == 60        # the graph only
    assert not reader.consistent_with(corpus.catalogue)   # and the searcher leaves it out until rebuilt
    corpus.catalogue.close()


def test_best_first_is_a_stable_sort_of_the_whole_array() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        values = rng.integers(0, 6, size=int(rng.integers(1, 40))).astype(np.float32)  # many ties
        k = int(rng.integers(0, 45))
        assert dense_module.best_first(values, k).tolist() == np.argsort(-values, kind="stable")[:k].tolist()


def test_passage_counts_read_on_from_the_last_count_are_the_full_counts(tmp_path) -> None:
    from engine.embedded.catalogue import passages as store

    corpus = _Corpus(tmp_path)
    catalogue = corpus.catalogue

    def full(seq: int) -> int:
        return int(catalogue._db.execute("SELECT COUNT(*) FROM passages WHERE +seq <= ?", (seq,)).fetchone()[0])

    corpus.add(30)
    for seq in (30, 10, 25, 0, 30):
        assert catalogue.passages_upto(seq) == full(seq)
    corpus.add(7)
    key = (str(catalogue.path), catalogue.dataset_id)
    assert store._COUNTED[key] == (30, 30)   # remembered: the next count reads only the rows after it
    assert catalogue.passages_upto(37) == 37 and catalogue.passages_upto(33) == 33 == full(33)
    assert catalogue.passages_upto(99) == 37 and store._COUNTED[key] == (37, 37)   # beyond the top: not kept
    other = _Corpus(tmp_path / "other") if (tmp_path / "other").mkdir() is None else None
    assert other is not None and other.catalogue.passages_upto(37) == 0   # another catalogue's own count
    catalogue.close()
    other.catalogue.close()


def test_an_engine_reopened_after_small_commits_answers_as_a_fresh_one(hash_engine, small_tail) -> None:
    """Through the engine: commits to a large graph go to the tail, the long-lived reader reopens keeping
    its graph and advancing its lineage state, and answers exactly as an engine opened afresh (same index
    state, same order), in every mode, with a version superseded and a lineage retired along the way."""
    from engine import Engine
    from engine.text.inputs import from_text

    words = ["harbour", "lighthouse", "whiskers", "garden", "ledger", "comet", "violin", "glacier"]

    def doc(i: int, name: str | None = None):
        text = f"note {i}: {words[i % 8]} and {words[(i * 3) % 8]} by the {words[(i * 5) % 8]} ({i})"
        return from_text(text, name=name or f"n{i}")

    hash_engine.ingest("big", [doc(i) for i in range(60)])
    first = hash_engine.query("big", "harbour lighthouse", k=5)
    reader = hash_engine.searcher("big")
    folder = reader.dataset.folder
    graph = _identity(folder / "dense.voy")
    hash_engine.ingest("big", [doc(i) for i in range(60, 66)] + [doc(999, name="n3")])   # n3: a new version
    assert hash_engine.retire("big", ["n5"]) == ["n5"]   # a retired lineage: the lineage mark moves
    assert _identity(folder / "dense.voy") == graph and json.loads((folder / "dense.json").read_text())["count"] == 67
    for mode in ("hybrid", "dense", "sparse"):
        for versions in ("latest", "all"):
            for where in (None, ["name:n6*"]):   # a filter: the exact pass over the allowed passages
                again = hash_engine.query("big", "harbour lighthouse comet", k=8, mode=mode, versions=versions,
                                          where=where)
                fresh_engine = Engine(hash_engine.settings, embedder=hash_engine.embedder())
                fresh = fresh_engine.query("big", "harbour lighthouse comet", k=8, mode=mode, versions=versions,
                                           where=where)
                fresh_engine.close()
                assert [h.to_dict() for h in again] == [h.to_dict() for h in fresh], (mode, versions, where)
                assert again.hits and (where is None or all(h.document_name.startswith("n6") for h in again))
    reopened = hash_engine.searcher("big")
    assert reopened is not reader and reopened.dense.load() is reader.dense.load()   # the graph carried over
    assert len(reopened.dense) == 67 and first.hits


def test_a_fresh_writer_extends_the_tail_without_loading_the_graph(tmp_path, small_tail, monkeypatch) -> None:
    corpus = _Corpus(tmp_path)
    corpus.index().catch_up(corpus.catalogue, corpus.add(60))
    import voyager

    def no_load(*_args, **_kwargs):
        raise AssertionError("the graph was loaded")

    monkeypatch.setattr(voyager.Index, "load", staticmethod(no_load))
    for n in (4, 6):   # each commit through a fresh index, as a writer opens one per commit
        writer = corpus.index()
        assert writer.catch_up(corpus.catalogue, corpus.add(n)) == n and writer._index is None
    meta = corpus.sidecar()
    assert (meta["watermark"], meta["count"], meta["graph_watermark"], meta["graph_count"]) == (70, 70, 60, 60)
    monkeypatch.undo()
    reader = corpus.index()
    reader.load(corpus.catalogue)
    assert len(reader) == 70 and reader.consistent_with(corpus.catalogue)
    seqs, sims = reader.search_arrays(corpus.vectors[68], 3, 64)
    assert seqs[0] == 68
    # a tail that would overflow goes the usual way: loaded, folded into a new graph
    corpus.index().catch_up(corpus.catalogue, corpus.add(25))
    assert "graph_count" not in corpus.sidecar() and corpus.sidecar()["count"] == 95
    corpus.catalogue.close()
