"""The dataset store: names, dedupe, refusals, provenance, fingerprint, derived indexes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine import Engine, KxError, Status, load_settings
from engine.embedded.dataset import Dataset
from engine.embedded.store import Catalogue
from engine.text.inputs import extract_text, from_bytes, from_file, from_jsonl, from_text

from .helpers import HashEmbedder

HANDBOOK = [
    "Refunds are paid within 30 days of purchase.\n\nReturns need form RMA-7 and the receipt. " * 4,
    "Badges must be worn at all times. The KX-4021 token is required for VPN access.",
    "Annual leave is 25 days. Unused days carry over up to five days into the next year.",
]


@pytest.mark.parametrize("bad", ["../x", "/etc", "", "a\x00b", "x" * 200, "Caps", "a/b", "..", ".hidden", "a b"])
def test_unsafe_dataset_names_are_refused_before_touching_any_file(hash_engine: Engine, kx_home: Path, bad) -> None:
    with pytest.raises(KxError) as caught:
        hash_engine.ingest(bad, [from_text("hello")])
    assert caught.value.status is Status.INVALID_ARGUMENT
    assert "dataset name" in caught.value.message
    assert not kx_home.exists() or not any(kx_home.rglob("*"))


def test_same_bytes_twice_are_unchanged_and_cost_nothing(hash_engine: Engine) -> None:
    first = hash_engine.ingest("hb", [from_text(t) for t in HANDBOOK])
    assert [r.status for r in first.results] == ["added"] * 3
    assert first.created
    calls = hash_engine.embedder().calls
    again = hash_engine.ingest("hb", [from_text(HANDBOOK[1], name="renamed"), from_text(HANDBOOK[0])])
    assert [r.status for r in again.results] == ["unchanged", "unchanged"]
    assert (again.documents, again.passages) == (first.documents, first.passages)
    assert hash_engine.embedder().calls == calls  # nothing was embedded
    assert not again.created


def test_duplicate_inside_one_command_is_added_once(hash_engine: Engine) -> None:
    report = hash_engine.ingest("hb", [from_text(HANDBOOK[2]), from_text(HANDBOOK[2], name="copy")])
    assert [r.status for r in report.results] == ["added", "unchanged"]
    assert report.documents == 1


def test_bad_inputs_are_refused_with_reasons_and_the_rest_go_in(hash_engine: Engine, tmp_path: Path) -> None:
    good = tmp_path / "good.md"
    good.write_text(HANDBOOK[0])
    binary = tmp_path / "photo.jpg"
    binary.write_bytes(b"\xff\xd8\xff\x00\x10JFIF\x00" * 20)
    latin1 = tmp_path / "old.txt"
    latin1.write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    blank = tmp_path / "blank.txt"
    blank.write_text("  \n\t \n")
    folder = tmp_path / "folder"
    folder.mkdir()
    big = tmp_path / "big.txt"
    big.write_text("word " * 100)
    engine = Engine(hash_engine.settings.__class__(**{**hash_engine.settings.__dict__, "max_document_bytes": 100}),
                    embedder=HashEmbedder())
    limit = engine.settings.max_document_bytes
    docs = [from_file(p, 10**6) for p in (good, binary, latin1, empty, blank, folder, tmp_path / "missing.md")]
    docs.append(from_file(big, limit))
    report = engine.ingest("hb", docs)
    by_name = {r.name: r for r in report.results}
    assert by_name["good"].status == "added"
    reasons = {name: (r.code, r.reason) for name, r in by_name.items() if r.status == "refused"}
    # JPEG's first bytes make it an image to read by OCR, and Pillow says it is none
    assert reasons["photo"][0] == "INVALID_ARGUMENT" and "not a readable image" in reasons["photo"][1]
    assert "BytesIO" not in reasons["photo"][1]
    assert "not valid UTF-8" in reasons["old"][1] and "old.txt" in reasons["old"][1]
    assert "empty" in reasons["empty"][1] and "empty" in reasons["blank"][1]
    assert "directory" in reasons["folder"][1]
    assert reasons["missing"][0] == "NOT_FOUND" and "missing.md" in reasons["missing"][1]
    assert "KX_MAX_DOCUMENT_BYTES" in reasons["big"][1]
    assert all("accepts" in r[1] for n, r in reasons.items() if n in ("old", "folder"))
    assert report.documents == 1


def test_a_command_where_everything_is_refused_leaves_no_dataset(hash_engine: Engine, kx_home: Path) -> None:
    report = hash_engine.ingest("ghost", [from_text("   ")])
    assert report.count("refused") == 1
    assert hash_engine.list_datasets() == []
    assert not (kx_home / "datasets" / "ghost").exists()


def test_every_passage_points_at_its_exact_range_in_the_parent(hash_engine: Engine) -> None:
    text = "\n\n".join(f"Section {i}. " + "The quick brown fox jumps over the lazy dog. " * 6 for i in range(8))
    hash_engine.ingest("prov", [from_text(text, name="long")])
    dataset = Dataset(hash_engine.settings, "prov")
    catalogue = dataset.reading()
    doc = catalogue.documents()[0]
    passages = catalogue.passages_of(doc.ref)
    parent = extract_text(from_bytes(catalogue.document_bytes(doc.ref)))
    assert parent == text  # original bytes are kept
    assert len(passages) == doc.passage_count > 1
    for i, p in enumerate(passages):
        assert parent[p.char_start:p.char_end] == p.text
        assert p.label == f"[chunk {i + 1}/{len(passages)}]"
        assert len(p.text) <= 200


def test_jsonl_records_become_documents_named_by_their_ids(hash_engine: Engine, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        '{"_id": "d1", "title": "Refunds", "text": "Money back within 30 days."}\n'
        '{"id": "d2", "text": "Same words, other id."}\n'
        '{"_id": "d3", "title": "Twin", "text": "Money back within 30 days."}\n'
        'not json\n'
        '{"_id": "d5"}\n'
    )
    report = hash_engine.ingest("beir", list(from_jsonl(corpus, 10**6)))
    statuses = [(r.name, r.status) for r in report.results]
    assert statuses[:3] == [("d1", "added"), ("d2", "added"), ("d3", "added")]
    assert [s for _, s in statuses[3:]] == ["refused", "refused"]
    assert "corpus.jsonl:4" in report.results[3].reason
    catalogue = Dataset(hash_engine.settings, "beir").reading()
    first = catalogue.passages_of(report.results[0].ref)[0]
    assert first.text.startswith("Refunds\n\nMoney back")


def test_changed_chunk_size_is_refused_naming_the_field(hash_engine: Engine, kx_home: Path) -> None:
    hash_engine.ingest("hb", [from_text(HANDBOOK[0])])
    other = Engine(load_settings({"chunk_size": 150, "chunk_overlap": 40}), embedder=HashEmbedder())
    with pytest.raises(KxError) as caught:
        other.ingest("hb", [from_text(HANDBOOK[1])])
    assert caught.value.status is Status.FAILED_PRECONDITION
    assert caught.value.message == (
        "dataset 'hb' was built under other index settings (chunk_size: 200 -> 150); this command set chunk_size "
        "(flag). To use the dataset's own, drop those settings, or override them for one command: kx --set "
        "chunk_size=200 datasets query hb \"your question\" (the same --set works before any kx command). To build "
        "a copy under the new settings: kx datasets rebuild hb --as NEW_NAME --set chunk_size=150"
    )
    assert other.dataset_summary("hb").documents == 1  # nothing lost, nothing added


def test_precomputed_vectors_need_no_model_and_must_match_the_dimension(kx_home: Path) -> None:
    engine = Engine(load_settings({"embed_model": "none"}))
    report = engine.ingest("vecs", [from_text("alpha"), from_text("beta")], vectors=[[1, 0, 0], [0, 1, 0]])
    assert report.count("added") == 2 and report.passages == 2
    assert engine.dataset_summary("vecs").fingerprint["dimension"] == 3
    with pytest.raises(KxError) as caught:
        engine.ingest("vecs", [from_text("gamma")], vectors=[[1, 0, 0, 0]])
    assert caught.value.status is Status.INVALID_ARGUMENT and "3-dimensional" in caught.value.message
    for bad in ([[float("nan"), 0, 0]], [[0, 0, 0]], [[1, 0]] * 2):
        with pytest.raises(KxError) as caught:
            engine.ingest("vecs", [from_text("delta")], vectors=bad)
        assert caught.value.status is Status.INVALID_ARGUMENT
    with pytest.raises(KxError) as caught:
        engine.ingest("vecs", [from_text("plain text needs a model")])
    assert caught.value.status is Status.FAILED_PRECONDITION
    assert "KX_SERVE_EMBED_MODEL" in caught.value.message
    assert engine.dataset_summary("vecs").documents == 2


def test_sparse_follows_each_commit_group_and_dense_updates_once(hash_engine: Engine, monkeypatch) -> None:
    from engine.embedded.dense import DenseIndex
    from engine.embedded.sparse import SparseIndex

    calls = {"dense": 0, "sparse": 0}
    commits = []
    original_commit = Catalogue.commit_documents
    monkeypatch.setattr(Catalogue, "commit_documents",
                        lambda self, *a, **kw: (commits.append(1), original_commit(self, *a, **kw))[1])
    for cls, key in ((DenseIndex, "dense"), (SparseIndex, "sparse")):
        original = cls.catch_up

        def counting(self, catalogue, upto, *more, _original=original, _key=key, **options):
            calls[_key] += 1
            return _original(self, catalogue, upto, *more, **options)

        monkeypatch.setattr(cls, "catch_up", counting)
    settings = hash_engine.settings.__class__(**{**hash_engine.settings.__dict__, "ingest_commit_passages": 2})
    engine = Engine(settings, embedder=HashEmbedder())
    report = engine.ingest("hb", [from_text(t) for t in HANDBOOK] + [from_text(f"note {i}") for i in range(20)])
    # each commit group is keyword-searchable as it lands; the dense graph is saved once for this small ingest
    assert len(commits) > 1 and calls == {"dense": 1, "sparse": len(commits)}
    dataset = Dataset(settings, "hb")
    dense, sparse = dataset.dense(16), dataset.sparse(True)
    assert dense.watermark == sparse.watermark == report.passages
    assert len(dense) == report.passages
    with engine.reading("hb") as searcher:
        hits = searcher.sparse_candidates("KX-4021 token", 5).keys
    catalogue = dataset.reading()
    top = catalogue.passages_by_seq([hits[0]])[hits[0]]
    assert "KX-4021" in top.text


def test_indexes_left_behind_by_a_crash_are_healed(hash_engine: Engine) -> None:
    hash_engine.ingest("hb", [from_text(HANDBOOK[0])])
    dataset = Dataset(hash_engine.settings, "hb")
    # a crash after the catalogue commit but before the indexes caught up:
    os.remove(dataset.folder / "dense.json")
    (dataset.folder / "sparse.json").write_text('{"watermark": 0, "stopwords": true, "tokenizer": "kx-words-1"}')
    catalogue = dataset.reading()
    assert dataset.indexes_behind(catalogue)
    report = hash_engine.ingest("hb", [from_text(HANDBOOK[1])])
    assert not dataset.indexes_behind(dataset.reading())
    assert len(dataset.dense(16)) == report.passages
    # the sparse index holds each passage once, not twice
    assert dataset.sparse(True).open_scorer(1.2, 0.75).total == report.passages


def test_a_damaged_dense_file_is_rebuilt_from_the_catalogue(hash_engine: Engine) -> None:
    hash_engine.ingest("hb", [from_text(HANDBOOK[0])])
    dataset = Dataset(hash_engine.settings, "hb")
    (dataset.folder / "dense.voy").write_bytes(b"garbage")
    (dataset.folder / "dense.json").write_text('{"watermark": 1, "dimension": 16}')
    report = hash_engine.ingest("hb", [from_text(HANDBOOK[2])])
    assert len(dataset.dense(16)) == report.passages


def test_listing_shows_counts_model_and_creation(hash_engine: Engine) -> None:
    hash_engine.ingest("b-set", [from_text(HANDBOOK[0])])
    hash_engine.ingest("a-set", [from_text(t) for t in HANDBOOK])
    listed = hash_engine.list_datasets()
    assert [s.name for s in listed] == ["a-set", "b-set"]
    assert listed[0].documents == 3 and listed[0].passages >= 3
    assert listed[0].embed_model == "hash-words@test" and listed[0].created_at > 0


def test_a_damaged_sparse_index_is_rebuilt_from_the_catalogue(hash_engine: Engine) -> None:
    hash_engine.ingest("hb", [from_text(HANDBOOK[1])])
    dataset = Dataset(hash_engine.settings, "hb")
    for f in (dataset.folder / "sparse").iterdir():
        f.write_bytes(b"garbage")
    report = hash_engine.ingest("hb", [from_text(HANDBOOK[2])])
    with hash_engine.reading("hb") as searcher:
        assert len(searcher.sparse_candidates("KX-4021", 5).keys) == 1
    assert dataset.sparse(True).open_scorer(1.2, 0.75).total == report.passages


@pytest.mark.slow  # threads racing an ingest: seconds
def test_queries_from_many_threads_while_ingesting_all_answer(hash_engine: Engine) -> None:
    import threading

    hash_engine.ingest("live", [from_text(t) for t in HANDBOOK])
    errors: list[BaseException] = []
    answers: list[int] = []

    def ask() -> None:
        try:
            for _ in range(25):
                answers.append(len(hash_engine.query("live", "annual leave token refunds", k=5).hits))
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
    for i in range(10):  # each ingest makes the open readers stale mid-flight
        hash_engine.ingest("live", [from_text(f"Parking note {i}: bays close at ten.")])
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert len(answers) == 150 and all(n > 0 for n in answers)
    assert any("Parking note 9" in h.text for h in hash_engine.query("live", "parking bays", k=20).hits)
