"""One contract, every backend: the embedded engine, milvus-lite (.db), `milvus-lite server` over http://,
and a Milvus cluster when KX_TEST_MILVUS_URI names one (the step before trusting it).

Each test runs once per backend (tests/backends.py) and asserts what a user
of any of them must be able to rely on: ingest and dedupe, listing, the
three query modes with explained hits, fingerprint refusals, provenance,
pre-computed vectors, the error statuses and deterministic answers; and
the lineages of issue 22: the latest version by default, every version on
request, retirement that survives a restart, and `--where` filters applied
inside both retrievers (k hits from a filtered set under 5 % of passages).
"""

from __future__ import annotations

import numpy as np
import pytest

from engine import KxError, Status
from engine.extract import Extracted, Section
from engine.text.inputs import DocumentInput, from_bytes, from_text

from .helpers import HashEmbedder, inject_extraction

NOTES = {
    "refunds": "Customers receive their money back within thirty days of purchase, receipt in hand.",
    "parking": "The parking garage opens at seven and closes at ten in the evening for staff cars.",
    "vacation": "Vacation requests go through the portal two weeks ahead; managers approve vacation days.",
    "laptops": "Every laptop carries an asset tag sticker; facilities keep the list of asset tags.",
    "zorblax": "The zorblax calibration rig sits in lab three next to the oscilloscope bench.",
}
ZORBLAX = "zorblax calibration rig sits next lab three oscilloscope bench"   # words no other note has
LONG = " ".join(f"Section {i} of the travel policy explains mileage, hotels and per diem rates in detail."
                for i in range(12))


def _notes():
    return [from_text(text, name) for name, text in NOTES.items()]


def test_ingest_adds_dedupes_and_lists(backend_factory) -> None:
    backend = backend_factory()
    report = backend.ingest("notes", [*_notes(), from_text(NOTES["refunds"], "refunds-copy"),
                                      from_text(LONG, "travel")])
    assert [r.status for r in report.results] == ["added"] * 5 + ["unchanged", "added"]
    assert report.created and report.documents == 6
    travel = report.results[-1]
    assert travel.passages > 1 and report.passages == 5 + travel.passages
    again = backend.ingest("notes", [from_text(LONG, "travel"), from_text(NOTES["parking"], "parking")])
    assert [r.status for r in again.results] == ["unchanged", "unchanged"]
    assert not again.created and (again.documents, again.passages) == (6, report.passages)
    assert again.results[0].passages == travel.passages and again.results[0].ref == travel.ref
    [summary] = backend.list_datasets()
    assert (summary.name, summary.documents, summary.passages) == ("notes", 6, report.passages)
    assert summary.embed_model == "hash-words@test" and summary.fingerprint["dimension"] == 16
    assert backend.dataset_summary("notes") == summary


def test_a_first_ingest_that_stores_nothing_leaves_no_dataset(backend_factory) -> None:
    backend = backend_factory()
    report = backend.ingest("empty", [from_bytes(b"\x00\x01binary", "blob", "application/octet-stream")])
    assert [r.status for r in report.results] == ["refused"] and not report.created
    assert backend.list_datasets() == []
    with pytest.raises(KxError) as err:
        backend.dataset_summary("empty")
    assert err.value.status is Status.NOT_FOUND


@pytest.mark.parametrize("mode", ["hybrid", "dense", "sparse"])
def test_every_mode_answers_with_explained_hits(backend_factory, mode: str) -> None:
    backend = backend_factory()
    backend.ingest("notes", _notes())
    result = backend.query("notes", ZORBLAX, k=3, mode=mode, rerank=False)  # at once after the flush
    assert result.mode == mode and len(result.hits) == (1 if mode == "sparse" else 3)  # BM25 matches one note
    top = result.hits[0]
    assert top.document_name == "zorblax" and top.text == NOTES["zorblax"] and top.label == "[chunk 1/1]"
    assert [h.rank for h in result.hits] == list(range(1, len(result.hits) + 1))
    assert all(h.mmr_moved == 0 for h in result.hits)
    for hit in result.hits:
        assert (hit.dense_rank is not None) == (mode != "sparse")
        if mode != "dense":  # words only the zorblax note has: sparse finds it alone
            assert (hit.sparse_rank is not None) == (hit.document_name == "zorblax")
    if mode == "hybrid":
        assert top.dense_rank == 1 and top.sparse_rank == 1
        # RRF K=60, first in both lists, and in hybrid's third list (the fused head by best sentence)
        assert top.sentence_rank is not None
        assert top.fused_score == pytest.approx(2 / 61 + 1 / (60 + top.sentence_rank))
    if mode == "sparse":
        assert top.score > 0 and top.score == top.sparse_score   # BM25 magnitude, whatever sign Milvus returns
    if mode == "dense":
        assert -1.0 <= top.score <= 1.0 and top.score == top.dense_score


def test_answers_are_deterministic_and_mmr_marks_duplicates(backend_factory) -> None:
    backend = backend_factory()
    base = "Receipts for travel expenses are filed within ten days of the trip."
    backend.ingest("notes", [*_notes(), from_text(base, "expenses"), from_text(base + " ", "expenses-copy"),
                             from_text(LONG, "travel")])
    first = backend.query("notes", "travel expenses receipts", k=30, mode="hybrid", rerank=True)
    again = backend.query("notes", "travel expenses receipts", k=30, mode="hybrid", rerank=True)
    assert [h.to_dict() for h in first.hits] == [h.to_dict() for h in again.hits]
    names = [h.document_name for h in first.hits]
    assert names[0] in ("expenses", "expenses-copy")
    copy = next(h for h in first.hits if h.document_name != names[0] and h.document_name.startswith("expenses"))
    assert copy.duplicate_of == first.hits[0].passage_ref and copy.rank > 2   # MMR pushed the near-copy down


def test_dense_order_is_the_same_on_every_backend(backend_factory, kx_home) -> None:
    """The same vectors give the same dense ranking: HNSW over a handful of passages is exact everywhere."""
    from engine import Engine, load_settings

    backend = backend_factory()
    reference = Engine(load_settings({"chunk_size": 200, "chunk_overlap": 40, "home": str(kx_home / "ref")}),
                       embedder=HashEmbedder())
    for target in (backend, reference):
        target.ingest("notes", [*_notes(), from_text(LONG, "travel")])
    ours = backend.query("notes", "asset tags for the laptop", k=8, mode="dense", rerank=False)
    theirs = reference.query("notes", "asset tags for the laptop", k=8, mode="dense", rerank=False)
    reference.close()
    assert [h.passage_ref for h in ours.hits] == [h.passage_ref for h in theirs.hits]
    assert [h.dense_score for h in ours.hits] == pytest.approx([h.dense_score for h in theirs.hits], abs=1e-5)


def test_a_different_chunk_config_is_refused_on_ingest_and_query(backend_factory) -> None:
    backend_factory().ingest("notes", _notes())
    other = backend_factory(chunk_size=300)
    for attempt in (lambda: other.ingest("notes", [from_text("one more note about parking permits")]),
                    lambda: other.query("notes", "parking")):
        with pytest.raises(KxError) as err:
            attempt()
        assert err.value.status is Status.FAILED_PRECONDITION
        assert "chunk_size: 200 -> 300" in err.value.message
    other_model = backend_factory(embedder=HashEmbedder(dimension=24))
    with pytest.raises(KxError) as err:
        other_model.ingest("notes", [from_text("a note from another model")])
    assert err.value.status is Status.FAILED_PRECONDITION and "dimension: 16 -> 24" in err.value.message


PAGES = ["1 Scope\n" + "Cold chain loggers record temperatures every minute of the trip. " * 3,
         "2 Method\n" + "Each logger reading is smoothed by its age and its carrier. " * 4,
         "2.1 Checks\n" + "Forty shipments from two carriers validated the smoother. " * 3]
PAPER_TEXT = "".join(PAGES)
PAPER_BYTES = b"%PDF-1.7 a stand-in: the test hands ingest its Extracted"
PAPER = Extracted(text=PAPER_TEXT, media_type="application/pdf",
                  page_starts=tuple(sum(len(p) for p in PAGES[:i]) for i in range(3)),
                  sections=(Section(0, 1, "1 Scope"), Section(PAPER_TEXT.index("2 Method"), 1, "2 Method"),
                            Section(PAPER_TEXT.index("2.1 Checks"), 2, "2.1 Checks")),
                  title="Cold chains", extractor="fake-pdf/1")


def test_provenance_survives_the_round_trip(backend_factory, monkeypatch) -> None:
    inject_extraction(monkeypatch, lambda doc: PAPER if doc.data == PAPER_BYTES else None)
    backend = backend_factory()
    report = backend.ingest("papers", [from_bytes(PAPER_BYTES, "cold-chains", "application/pdf"),
                                       from_text("A plain note without pages or headings.", "note")])
    assert [r.status for r in report.results] == ["added", "added"]
    ref = report.results[0].ref
    assert backend.document_text("papers", ref) == PAPER_TEXT
    result = backend.query("papers", "carriers validated the smoother", k=10, mode="hybrid", rerank=False)
    paper_hits = [h for h in result.hits if h.document_ref == ref]
    assert len(paper_hits) == report.results[0].passages > 3
    chunks = sorted(h.chunk_index for h in paper_hits)
    assert chunks == list(range(len(chunks))) and {h.chunk_count for h in paper_hits} == {len(chunks)}
    for hit in paper_hits:
        assert PAPER_TEXT[hit.char_start:hit.char_end] == hit.text
        assert hit.document_title == "Cold chains" and hit.page_start is not None
        assert 1 <= hit.page_start <= hit.page_end <= 3
    assert {h.section for h in paper_hits} >= {"1 Scope", "2 Method › 2.1 Checks"}
    note = next(h for h in result.hits if h.document_name == "note")
    assert (note.page_start, note.page_end, note.section, note.document_title) == (None, None, None, None)


def test_pre_computed_vectors_need_no_model(backend_factory) -> None:
    backend = backend_factory(embedder=None, embed_model="none")
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((4, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    docs = [from_text(f"record number {i} about topic {'abcd'[i]}", f"r{i}") for i in range(4)]
    report = backend.ingest("vecs", docs, vectors=vectors)
    assert [r.passages for r in report.results] == [1, 1, 1, 1]
    assert backend.dataset_summary("vecs").fingerprint["embed_model"] == "precomputed"
    result = backend.query("vecs", vector=vectors[2], k=2)
    assert result.mode == "dense" and result.hits[0].document_name == "r2"
    assert result.hits[0].dense_score == pytest.approx(1.0, abs=1e-4)
    assert backend.query("vecs", "topic c", mode="sparse", k=4).hits[0].document_name == "r2"
    for bad in (lambda: backend.query("vecs", vector=vectors[0][:5]),
                lambda: backend.ingest("vecs", [from_text("x")], vectors=np.ones((1, 5), dtype=np.float32))):
        with pytest.raises(KxError) as err:
            bad()
        assert err.value.status is Status.INVALID_ARGUMENT and "dimension" in err.value.message


def test_user_mistakes_have_statuses_not_tracebacks(backend_factory) -> None:
    backend = backend_factory()
    backend.ingest("notes", _notes())
    cases = [
        (lambda: backend.query("missing", "anything"), Status.NOT_FOUND, "does not exist"),
        (lambda: backend.dataset_summary("missing"), Status.NOT_FOUND, "create it with"),
        (lambda: backend.document_text("notes", "0" * 64), Status.NOT_FOUND, "is not in dataset"),
        (lambda: backend.query("Bad Name!", "x"), Status.INVALID_ARGUMENT, "not allowed"),
        (lambda: backend.ingest("../up", [from_text("x")]), Status.INVALID_ARGUMENT, "not allowed"),
        (lambda: backend.query("notes", "   "), Status.INVALID_ARGUMENT, "empty"),
        (lambda: backend.query("notes", "x", k=0), Status.INVALID_ARGUMENT, "k must be"),
        (lambda: backend.query("notes", "x", mode="fuzzy"), Status.INVALID_ARGUMENT, "mode must be"),
    ]
    for call, status, words in cases:
        with pytest.raises(KxError) as err:
            call()
        assert err.value.status is status and words in err.value.message
    result = backend.query("notes", "the of and", mode="sparse")   # nothing indexable for BM25 ...
    assert result.hits == [] or all(h.sparse_rank for h in result.hits)   # ... or only what it matched
    assert backend.query("notes", "x", k=500).k == 64                       # clamped to KX_MAX_K, said


# -- lineages, retirement and filters (issue 22), the same on every backend -------------------------

TOPICS = ["invoices are paid within thirty days of receipt by the finance team",
          "the finance team pays invoices after approval by a manager",
          "late invoices incur a fee and the finance team sends a reminder"]


def _filter_corpus() -> list[DocumentInput]:
    """120 plain notes and 5 markdown guides: the guides are 4 % of the passages (one passage each)."""
    docs = [DocumentInput(f"plain/{i:03d}", f"{TOPICS[i % 3]} case {i}".encode(), media_type="text/plain")
            for i in range(120)]
    docs += [DocumentInput(f"special/{i}", f"travel expenses handbook chapter {i} with invoices".encode(),
                           source_path=f"/docs/special/{i}.md", media_type="text/markdown") for i in range(5)]
    return docs


def test_a_filter_matching_under_5_percent_still_returns_k_hits(backend_factory) -> None:
    backend = backend_factory()
    report = backend.ingest("corp", _filter_corpus())
    assert report.passages == 125
    special = {r.ref for r in report.results[-5:]}
    for mode in ("hybrid", "dense", "sparse"):
        plain = backend.query("corp", "finance team invoices", k=5, mode=mode, rerank=False)
        assert len(plain) == 5 and not any(h.document_name.startswith("special/") for h in plain), mode
        for clause in ("type:md", "name:special/*", "name:/docs/special/*"):
            hits = backend.query("corp", "finance team invoices", k=5, mode=mode, rerank=False, where=[clause])
            assert len(hits) == 5 and {h.document_ref for h in hits} == special, (mode, clause)
        narrower = backend.query("corp", "invoices", k=5, mode=mode, where=["name:special/[12]", "type:md"])
        assert sorted(h.document_name for h in narrower) == ["special/1", "special/2"], mode
        either = backend.query("corp", "invoices", k=10, mode=mode, where=["name:special/1", "name:plain/007"])
        assert sorted(h.document_name for h in either) == ["plain/007", "special/1"], mode
        assert len(backend.query("corp", "finance", k=5, mode=mode, where=["pages:1-3"])) == 0  # text has no pages
        assert len(backend.query("corp", "finance", k=5, mode=mode, where=["type:pdf"])) == 0
    prefixes = sorted(special)[:2]
    by_ref = backend.query("corp", "invoices", k=10, where=[f"ref:{','.join(r[:8] for r in prefixes)}"])
    assert {h.document_ref for h in by_ref} == set(prefixes)
    with pytest.raises(KxError) as err:
        backend.query("corp", "invoices", where=["colour:red"])
    assert err.value.status is Status.INVALID_ARGUMENT and "--where type:pdf" in err.value.message


def test_pages_and_type_filters_narrow_to_passages(backend_factory, monkeypatch) -> None:
    inject_extraction(monkeypatch, lambda doc: PAPER if doc.data == PAPER_BYTES else None)
    backend = backend_factory()
    report = backend.ingest("papers", [from_bytes(PAPER_BYTES, "cold-chains", "application/pdf"),
                                       from_text("A plain note about carriers and loggers.", "note")])
    paper = report.results[0].ref
    for mode in ("hybrid", "dense", "sparse"):
        pdf = backend.query("papers", "carriers loggers", k=20, mode=mode, where=["type:pdf"])
        assert pdf.hits and {h.document_ref for h in pdf} == {paper}, mode
        second = backend.query("papers", "loggers logger carriers carrier", k=20, mode=mode, where=["pages:2"])
        assert second.hits and all(h.page_start <= 2 <= h.page_end for h in second), mode
        everything = backend.query("papers", "loggers logger carriers carrier", k=20, mode=mode,
                                   where=["type:pdf"])
        assert {h.passage_ref for h in second} < {h.passage_ref for h in everything}, mode


def test_only_the_latest_version_answers_unless_all_are_asked_for(backend_factory) -> None:
    backend = backend_factory()
    texts = [f"The shipping guide, edition {n}: parcels leave the depot at {n} o'clock."
             for n in ("one", "two", "three")]
    refs = []
    for text in texts:   # one file edited twice: three ingests under one name
        report = backend.ingest("notes", [from_text(text, "guide"), from_text(NOTES["parking"], "parking")])
        refs.append(report.results[0].ref)
    assert [r.status for r in report.results] == ["added", "unchanged"]
    for mode in ("hybrid", "dense", "sparse"):
        latest = backend.query("notes", "shipping guide edition parcels depot", k=10, mode=mode)
        guide = [h for h in latest if h.document_name == "guide"]
        assert [h.text for h in guide] == [texts[2]] and guide[0].version == 3 and guide[0].superseded_by is None
        every = backend.query("notes", "shipping guide edition parcels depot", k=10, mode=mode, versions="all")
        seen = {h.document_ref: (h.version, h.superseded_by) for h in every if h.document_name == "guide"}
        assert seen == {refs[0]: (1, refs[2]), refs[1]: (2, refs[2]), refs[2]: (3, None)}, mode
    shown = backend.list_documents("notes")
    assert sorted((d.name, d.ref) for d in shown) == sorted([("guide", refs[2]), ("parking", shown[0].ref)])
    stored = backend.list_documents("notes", versions="all")
    assert [(d.name, d.version) for d in stored if d.name == "guide"] == [("guide", 1), ("guide", 2), ("guide", 3)]
    summary = backend.dataset_summary("notes")
    assert (summary.documents, summary.versions, summary.retired) == (2, 4, 0)
    # the first edition's bytes offered again: unchanged (stored once), and current again
    again = backend.ingest("notes", [from_text(texts[0], "guide")])
    assert [r.status for r in again.results] == ["unchanged"]
    top = backend.query("notes", "shipping guide edition parcels depot", k=10)
    assert [h.text for h in top if h.document_name == "guide"] == [texts[0]]
    with pytest.raises(KxError) as err:
        backend.list_documents("notes", versions="some")
    assert err.value.status is Status.INVALID_ARGUMENT


def test_a_retired_lineage_stops_answering_survives_a_restart_and_comes_back(backend_factory) -> None:
    backend = backend_factory()
    backend.ingest("notes", _notes())
    watching = backend_factory()   # another process's view (a gateway), opened before the retirement
    assert "parking" in {h.document_name for h in watching.query("notes", "parking garage vacation laptop", k=5)}
    assert backend.retire("notes", ["parking", "no-such-note"]) == ["parking"]
    assert backend.retire("notes", ["parking"]) == []   # retired already
    for reader in (backend, watching, backend_factory()):   # the last: a restart
        for mode in ("hybrid", "dense", "sparse"):
            names = {h.document_name for h in reader.query("notes", "parking garage vacation laptop", k=5, mode=mode)}
            assert "parking" not in names and names, mode
        assert "parking" not in {d.name for d in reader.list_documents("notes")}
        [retired] = [d for d in reader.list_documents("notes", versions="all") if d.name == "parking"]
        assert retired.retired and retired.superseded_by is None
        summary = reader.dataset_summary("notes")
        assert (summary.documents, summary.versions, summary.retired) == (4, 5, 1)
        hits = reader.query("notes", "parking garage vacation laptop", k=5, versions="all")
        assert "parking" in {h.document_name for h in hits}
    back = backend.ingest("notes", [from_text(NOTES["parking"], "parking")])   # the file is put back
    assert [r.status for r in back.results] == ["unchanged"]
    assert watching.query("notes", "parking garage vacation laptop", k=5).hits[0].document_name == "parking"
    assert backend.dataset_summary("notes").retired == 0
    with pytest.raises(KxError) as err:
        backend.retire("missing", ["x"])
    assert err.value.status is Status.NOT_FOUND


def test_a_copy_keeps_its_own_name_and_path_and_retires_on_its_own(backend_factory) -> None:
    """A second file with stored bytes takes them on under its name (listed once, under the first's); it
    is found as a copy with its own path, shows that path once the first file moves on, and retires alone."""
    backend = backend_factory()
    text = NOTES["refunds"]
    backend.ingest("notes", [DocumentInput("a", text.encode(), "/docs/a.txt"),
                             DocumentInput("b", text.encode(), "/docs/b.txt"), *_notes()[1:]])
    listed = [d.name for d in backend.list_documents("notes")]
    assert "a" in listed and "b" not in listed   # one document, under the first file's name
    [(ref, path)] = backend.copies("notes").values()
    assert backend.copies("notes") == {"b": (ref, "/docs/b.txt")}
    backend.ingest("notes", [DocumentInput("a", (text + " Edited.").encode(), "/docs/a.txt")])
    assert backend.copies("notes") == {}   # b's bytes are listed under b now, with b's path
    shown = {d.name: d.source_path for d in backend.list_documents("notes") if d.name in ("a", "b")}
    assert shown == {"a": "/docs/a.txt", "b": "/docs/b.txt"}
    assert backend.retire("notes", ["b"]) == ["b"]
    names = [h.document_name for h in backend_factory().query("notes", "money back thirty days receipt", k=5)]
    assert "b" not in names and "a" in names
