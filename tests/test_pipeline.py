"""The two-stage ingest: keyword-searchable at once, embedded behind, resumable after any stop.

Unit tests use the deterministic HashEmbedder and stop stage 2 on purpose
(`should_stop`); the end-to-end test runs the real `kx` in its own process
with the real model, queries it from this one while it embeds, kills it, and
finishes the backlog with two `kx datasets embed` racing each other.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from engine import Engine, KxError, Status, load_settings
from engine.embedded.dataset import Dataset
from engine.records import Progress
from engine.text.inputs import from_jsonl, from_text
from kx_tui.cli.progress import PipelineProgress

from .helpers import SHARED_DATA, HashEmbedder, kx_process, needs_shared, run_cli

HANDBOOK = [
    "Parcels ship from the Leeds warehouse within two working days of the order.",
    "Refunds for a damaged logger are paid within fourteen days of its return.",
    "The office is open from nine to five on weekdays; closed on public holidays.",
    "Annual leave is twenty-five days a year, plus public holidays.",
]


def _stopped_ingest(engine: Engine, name: str, texts: list[str]) -> None:
    """Stage 1 only: commit and index for keywords, then stop before embedding anything."""
    engine.ingest(name, [from_text(t) for t in texts], should_stop=lambda: True)


def _vector_lengths(home: Path, name: str) -> list[int]:
    db = sqlite3.connect(f"file:{home / 'datasets' / name / 'catalog.sqlite'}?mode=ro", uri=True)
    try:
        return [row[0] for row in db.execute("SELECT length(vector) FROM passages ORDER BY seq")]
    finally:
        db.close()


def test_committed_passages_answer_by_keyword_before_any_is_embedded(hash_engine: Engine, kx_home: Path) -> None:
    _stopped_ingest(hash_engine, "hb", HANDBOOK)
    summary = hash_engine.dataset_summary("hb")
    assert summary.documents == 4 and summary.backlog == summary.passages == 4
    assert all(d.backlog == 1 for d in hash_engine.list_documents("hb"))

    sparse = hash_engine.query("hb", "damaged logger refund", mode="sparse")
    assert sparse[0].text.startswith("Refunds") and sparse.dense_coverage == 0.0
    assert not any("dense covers" in note for note in sparse.notes)  # nothing dense was asked

    hybrid = hash_engine.query("hb", "damaged logger refund", mode="hybrid")
    assert hybrid[0].text.startswith("Refunds") and hybrid[0].dense_rank is None
    assert hybrid.dense_coverage == 0.0
    assert any("dense covers 0 of 4 passages; embedding continues" in note for note in hybrid.notes)

    with pytest.raises(KxError) as refused:  # never "0 hits" for passages that are there
        hash_engine.query("hb", "damaged logger refund", mode="dense")
    assert refused.value.status is Status.FAILED_PRECONDITION
    assert "kx datasets embed hb" in refused.value.message


def _slow_extraction(monkeypatch, seconds: float) -> None:
    """Every document takes `seconds` to extract, as a PDF does in its worker process."""
    from engine.extract import Extracted

    from .helpers import inject_extraction

    def slow(doc):
        time.sleep(seconds)
        return Extracted(doc.data.decode("utf-8"), "text/plain")

    inject_extraction(monkeypatch, slow)


def test_embedding_runs_while_later_documents_are_still_extracted(monkeypatch, kx_home: Path) -> None:
    engine = Engine(load_settings({"chunk_size": 200, "chunk_overlap": 40, "ingest_commit_passages": 2}),
                    embedder=HashEmbedder())
    _slow_extraction(monkeypatch, 0.25)
    words = ["amber", "birch", "cedar", "dune", "ember", "fjord", "garnet", "heath",
             "iris", "juniper", "kelp", "larch", "maple", "nettle", "oak", "pine"]
    texts = [f"The {w} parcel ships from the Leeds warehouse." for w in words]
    events: list[object] = []
    engine.ingest("hb", [from_text(t, name=f"note-{i}") for i, t in enumerate(texts)], on_event=events.append)

    last_document = max(i for i, e in enumerate(events) if getattr(e, "status", None) is not None)
    embedded_early = [e for e in events[:last_document]
                      if isinstance(e, Progress) and e.stage == "embedding" and e.done > 0]
    assert embedded_early, "stage 2 waited for stage 1 to finish"
    # every passage has its vector: each embedded once, none left
    assert set(_vector_lengths(kx_home, "hb")) == {HashEmbedder().card.dimension * 4}
    result = engine.query("hb", "the garnet parcel", mode="hybrid")
    assert result.dense_coverage == 1.0 and "garnet" in result[0].text


def test_a_stop_asked_from_the_embedding_thread_ends_the_ingest_and_keeps_its_commits(
        monkeypatch, kx_home: Path) -> None:
    engine = Engine(load_settings({"chunk_size": 200, "chunk_overlap": 40, "ingest_commit_passages": 2}),
                    embedder=HashEmbedder())
    _slow_extraction(monkeypatch, 0.2)
    import threading

    def on_event(event: object) -> None:  # what the TUI does when its worker is cancelled
        if isinstance(event, Progress) and event.stage == "embedding" and event.done > 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        engine.ingest("hb", [from_text(f"Note {i} about the Leeds warehouse.", name=f"n{i}") for i in range(20)],
                      on_event=on_event)
    assert not [t for t in threading.enumerate() if t.name == "kx-embed"]  # nothing left running
    summary = engine.dataset_summary("hb")
    assert 0 < summary.documents < 20  # stage 1 stopped early; what it committed stays, searchable
    assert len(engine.query("hb", "Leeds warehouse", mode="sparse")) > 0
    engine.embed("hb")
    assert engine.dataset_summary("hb").backlog == 0


def test_a_dense_query_never_hears_about_stopwords(hash_engine: Engine) -> None:
    hash_engine.ingest("hb", [from_text(t) for t in HANDBOOK])
    dense = hash_engine.query("hb", "the of and", mode="dense")
    assert len(dense) > 0 and dense.dense_coverage == 1.0
    assert not any("sparse" in note or "stopwords" in note for note in dense.notes)
    sparse = hash_engine.query("hb", "the of and", mode="sparse")
    assert any("only stopwords" in note for note in sparse.notes)


def test_embed_finishes_the_backlog_once_and_dense_then_covers_all(hash_engine: Engine, kx_home: Path) -> None:
    _stopped_ingest(hash_engine, "hb", HANDBOOK)
    embedder = hash_engine.embedder()
    assert isinstance(embedder, HashEmbedder)
    events: list[object] = []
    report = hash_engine.embed("hb", on_event=events.append)
    assert report.embedded == 4 and report.dataset.backlog == 0 and set(_vector_lengths(kx_home, "hb")) == {16 * 4}
    steps = [e for e in events if isinstance(e, Progress) and e.stage == "embedding"]
    assert steps[0].done == 0 and steps[-1].done == steps[-1].total == 4
    calls = embedder.calls
    again = hash_engine.embed("hb")
    assert again.embedded == 0 and again.dataset.backlog == 0 and embedder.calls == calls  # nothing left: no model call

    dense = hash_engine.query("hb", "damaged logger refund", mode="dense")
    assert dense.dense_coverage == 1.0 and not any("dense covers" in n for n in dense.notes)
    dataset = Dataset(hash_engine.settings, "hb")
    assert len(dataset.dense(16)) == 4


def test_a_later_ingest_finishes_an_earlier_backlog(hash_engine: Engine, kx_home: Path) -> None:
    _stopped_ingest(hash_engine, "hb", HANDBOOK[:2])
    hash_engine.ingest("hb", [from_text(t) for t in HANDBOOK[2:]])
    assert hash_engine.dataset_summary("hb").backlog == 0
    assert len(hash_engine.query("hb", "annual leave days", mode="dense")) == 4
    # re-running an ingest whose documents are all "unchanged" still finishes a backlog
    _stopped_ingest(hash_engine, "two", HANDBOOK)
    report = hash_engine.ingest("two", [from_text(t) for t in HANDBOOK])
    assert report.count("unchanged") == 4 and hash_engine.dataset_summary("two").backlog == 0


def test_readers_see_the_embedding_progress_without_reopening_every_query(hash_engine: Engine) -> None:
    _stopped_ingest(hash_engine, "hb", HANDBOOK)
    searcher = hash_engine.searcher("hb")
    assert searcher.current() and hash_engine.searcher("hb") is searcher  # a backlog alone reopens nothing
    hash_engine.embed("hb")
    assert not searcher.current()  # the dense index moved on: the next query reopens
    assert hash_engine.query("hb", "leave", mode="hybrid").dense_coverage == 1.0


def test_the_cli_embed_command_and_list_show_the_backlog(hash_engine: Engine, kx_home: Path) -> None:
    _stopped_ingest(hash_engine, "hb", HANDBOOK)
    listed = run_cli("datasets", "list")
    assert "to embed" in listed.stdout and "kx datasets embed NAME" in listed.stdout
    as_json = json.loads(run_cli("datasets", "list", "--json").stdout)
    assert as_json[0]["backlog"] == 4
    missing = run_cli("datasets", "embed", "nope")
    assert missing.code == Status.NOT_FOUND.exit_code and missing.stderr.startswith("error: NOT_FOUND")


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_progress_is_one_plain_line_every_five_seconds() -> None:
    import io

    buffer = io.StringIO()
    clock = _Clock()
    progress = PipelineProgress(Console(file=buffer, force_terminal=False, width=200), clock=clock)
    progress.update(Progress("reading", 10, 10, unit="documents", passages=300))
    assert buffer.getvalue() == ""  # short work stays silent
    for second in range(1, 31):
        clock.now = float(second)
        progress.update(Progress("embedding", second * 10, 300))
    lines = buffer.getvalue().splitlines()
    assert len(lines) == 6  # seconds 1, 6, 11, ..., 26; at 30 s the work is done and the result says the rest
    # the first within FIRST_LINE_SECONDS, and no rate nor ETA before the stage moved for RATE_SECONDS
    assert lines[0] == "kx: reading 10/10 documents (300 passages committed); embedding 10/300 passages (1 s)"
    assert "10.0 passages/s, ETA 0:00:04 (26 s)" in lines[-1]


def test_off_a_terminal_silence_is_still_a_line_the_model_export_included() -> None:
    """No event for seconds (a first use exports the model's graph): the ticker still says what is going on."""
    import io

    from engine.records import Notice

    buffer = io.StringIO()
    clock = _Clock()
    progress = PipelineProgress(Console(file=buffer, force_terminal=False, width=200), clock=clock)
    clock.now = 1.0
    progress.tick()
    assert buffer.getvalue() == "kx: starting (1 s)\n"
    progress.update(Progress("reading", 3, 3, unit="documents", passages=3))
    progress.notice(Notice("preparing", "exporting the model (once, about 10 s)"))
    for second in range(2, 15):
        clock.now = float(second)
        progress.tick()
    lines = buffer.getvalue().splitlines()
    assert lines[1] == "preparing: exporting the model (once, about 10 s)"
    assert lines[2:] == ["kx: reading 3/3 documents (3 passages committed); preparing the model (5 s so far) (6 s)",
                         "kx: reading 3/3 documents (3 passages committed); preparing the model (10 s so far) (11 s)"]
    progress.notice(Notice("preparing", "ONNX graph of m ready: min cosine 0.9999999 to torch on 7 probes"))
    clock.now = 20.0
    progress.tick()
    assert "preparing the model" not in buffer.getvalue().splitlines()[-1]


def test_on_a_terminal_both_stages_draw_bars() -> None:
    import io

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=120)
    with PipelineProgress(console) as progress:
        assert set(progress._tasks) == {"start"}   # a spinner from the first moment
        progress.update(Progress("reading", 0, 3, unit="documents", passages=0))
        assert set(progress._tasks) == {"reading"}   # a bar from the first document, however small the job
        progress.update(Progress("embedding", 1, 9))
        assert set(progress._tasks) == {"reading", "embedding"}


def _scifact_jsonl(tmp_path: Path, documents: int) -> Path:
    source = SHARED_DATA / "scifact" / "corpus.jsonl"  # the tests calling this carry needs_shared("scifact")
    out = tmp_path / "corpus.jsonl"
    with source.open() as fh, out.open("w") as dest:
        for _ in range(documents):
            dest.write(fh.readline())
    return out


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_device_setting_picks_cuda_only_where_onnxruntime_has_it() -> None:
    from engine.embedding.devices import CPU_PROVIDER, CUDA_PROVIDER, choose_providers

    assert choose_providers("cpu", [CUDA_PROVIDER, CPU_PROVIDER]) == ([CPU_PROVIDER], "CPU (KX_EMBED_DEVICE=cpu)")
    for device in ("auto", "cuda"):
        providers, reason = choose_providers(device, [CUDA_PROVIDER, CPU_PROVIDER])
        assert providers[0][0] == CUDA_PROVIDER and providers[-1] == CPU_PROVIDER and "CUDA GPU" in reason
        providers, reason = choose_providers(device, [CPU_PROVIDER])
        assert providers == [CPU_PROVIDER] and "pip install onnxruntime-gpu" in reason


def test_the_watcher_finishes_a_backlog_at_start_even_with_an_empty_folder(hash_engine: Engine,
                                                                          tmp_path: Path) -> None:
    from engine.watch.watcher import FolderWatcher

    _stopped_ingest(hash_engine, "hb", HANDBOOK)
    folder = tmp_path / "inbox"
    folder.mkdir()
    watcher = FolderWatcher(hash_engine, "hb", folder, settle_seconds=0.1)
    watcher.start()
    try:
        _wait_for(lambda: hash_engine.dataset_summary("hb").backlog == 0, 30, "the watcher to embed the backlog")
    finally:
        assert watcher.stop(timeout=10)
    assert hash_engine.query("hb", "annual leave", mode="dense").dense_coverage == 1.0


def test_the_backlog_and_coverage_come_through_the_gateway_and_the_sdk(hash_engine: Engine) -> None:
    from fastapi.testclient import TestClient

    from engine.records import QueryResult
    from engine.server.gateway import create_app

    _stopped_ingest(hash_engine, "hb", HANDBOOK)
    auth = {"Authorization": "Bearer t"}
    app = create_app(hash_engine, "t", allowed_hosts=["testserver"])
    with TestClient(app) as client:
        listed = client.get("/v1/datasets", headers=auth).json()["datasets"]
        assert listed[0]["backlog"] == 4
        answer = client.post("/v1/datasets/hb/query", json={"text": "damaged logger refund"}, headers=auth).json()
        assert answer["dense_coverage"] == 0.0 and QueryResult.from_dict(answer).dense_coverage == 0.0
        documents = client.get("/v1/datasets/hb/documents", headers=auth).json()["documents"]
        assert all(d["backlog"] == 1 for d in documents)
        embedded = client.post("/v1/datasets/hb/embed", headers=auth).json()
        assert embedded["embedded"] == 4 and embedded["backlog"] == 0
        again = client.post("/v1/datasets/hb/query", json={"text": "damaged logger refund"}, headers=auth).json()
        assert again["dense_coverage"] == 1.0
        missing = client.post("/v1/datasets/nope/embed", headers=auth)
        assert missing.status_code == 404 and missing.json()["code"] == "NOT_FOUND"


def test_batches_shrink_on_a_slow_cpu_so_progress_keeps_moving() -> None:
    from engine.embedded.backlog import paced_batch

    assert paced_batch(32, 256, 8.0) == 32      # 32 passages/s: a batch of 32 takes a second
    assert paced_batch(32, 256, 100.0) == 4     # 2.6 passages/s (a loaded machine): small batches, not tiny
    from engine.embedded.backlog import chunk_rows

    assert chunk_rows(16) == 128 and chunk_rows(2) == 32            # a local model: 8 batches a chunk
    assert chunk_rows(16, 4) == 128 and chunk_rows(16, 12) == 384   # a served one: two batches a request
    assert paced_batch(32, 256, 1000.0) == 4    # never below the floor
    assert paced_batch(32, 256, 16.0) == 24
    assert paced_batch(2, 256, 1000.0) == 2     # never above what the user configured


@pytest.mark.slow
@needs_shared("scifact", "corpus.jsonl")
def test_a_graph_that_takes_long_to_write_is_written_less_often(hash_engine: Engine, monkeypatch) -> None:
    """Stage two saves the graph on a 10 s clock, but never spends more than a fifth of its time writing it:
    a million passages' graph takes seconds to write, fsync and checksum."""
    from engine.embedded import backlog, dense

    assert backlog.save_interval(0.2) == backlog.DENSE_SAVE_SECONDS
    assert backlog.save_interval(5.0) == 20.0 == backlog.SAVE_SHARE * 5.0
    real = dense._verify_saved
    monkeypatch.setattr(dense, "_verify_saved", lambda *a: (time.sleep(0.3), real(*a))[1])  # a slow disk
    waits: list[float] = []
    chunks_save = backlog._Chunks.save

    def save(self) -> None:
        chunks_save(self)
        waits.append(self.save_wait)

    monkeypatch.setattr(backlog._Chunks, "save", save)
    hash_engine.ingest("slow", [from_text(f"passage {i} about otters and their rivers") for i in range(40)])
    assert waits and all(wait == backlog.DENSE_SAVE_SECONDS for wait in waits)  # 0.3 s: within the clock
    monkeypatch.setattr(backlog, "DENSE_SAVE_SECONDS", 0.5)
    hash_engine.ingest("slow", [from_text(f"more {i} about herons") for i in range(40)])
    assert waits[-1] >= backlog.SAVE_SHARE * 0.3 > 0.5   # the writing's share, not the clock, set the wait


def test_searchable_while_embedding_killed_then_resumed_by_two_racing_embeds(
        tmp_path: Path, kx_home: Path, real_embedder) -> None:
    corpus = _scifact_jsonl(tmp_path, 130)  # ~260 passages at the default chunk size
    writer = kx_process("datasets", "ingest", "sf", "--jsonl", str(corpus))
    reader = Engine(load_settings())
    try:
        def sparse_hits():
            try:
                return reader.query("sf", "microstructural development of white matter", mode="sparse", k=10)
            except KxError:
                return None  # the dataset's first commit has not landed yet

        # stage 1 makes passages keyword-searchable while stage 2 is still embedding
        early = _wait_for(sparse_hits, 120, "the first keyword hits")
        total = reader.dataset_summary("sf").passages
        hybrid = reader.query("sf", "microstructural development of white matter", mode="hybrid", k=10)
        assert len(early) > 0 and len(hybrid) > 0 and hybrid.dense_coverage < 1.0
        assert any("embedding continues" in note for note in hybrid.notes)

        # kill it once some vectors are committed and some are not
        def mid_embedding() -> bool:
            summary = reader.dataset_summary("sf")
            return summary.passages >= 200 and 0 < summary.backlog < summary.passages - 32
        _wait_for(mid_embedding, 300, "stage 2 under way")
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.communicate()
        reader.close()
    after_kill = Engine(load_settings()).dataset_summary("sf")
    assert after_kill.passages >= 200 and after_kill.passages >= total and 0 < after_kill.backlog

    # two resumers at once: the write lock makes one wait, so the backlog is embedded exactly once
    racers = [kx_process("datasets", "embed", "sf", "--json") for _ in range(2)]
    outputs = [proc.communicate(timeout=600) for proc in racers]
    assert [proc.returncode for proc in racers] == [0, 0], [err for _out, err in outputs]
    reports = [json.loads(out) for out, _err in outputs]
    assert sorted(r["embedded"] for r in reports) == [0, after_kill.backlog]
    assert all(r["backlog"] == 0 for r in reports)
    assert set(_vector_lengths(kx_home, "sf")) == {384 * 4}

    # the same top-10 as an uninterrupted ingest of the same documents, in every mode
    resumed = Engine(load_settings())
    fresh = Engine(load_settings({"home": str(tmp_path / "fresh")}), embedder=real_embedder)
    fresh.ingest("sf", list(from_jsonl(corpus, 10**7)))
    for mode in ("dense", "sparse", "hybrid"):
        ours = resumed.query("sf", "microstructural development of white matter", mode=mode, k=10)
        theirs = fresh.query("sf", "microstructural development of white matter", mode=mode, k=10)
        assert [h.passage_ref for h in ours] == [h.passage_ref for h in theirs], mode
        assert ours.dense_coverage == 1.0
    vectors = Dataset(resumed.settings, "sf").dense(384)
    assert len(vectors) == after_kill.passages
    np.testing.assert_equal(len(set(_vector_lengths(kx_home, "sf"))), 1)


def test_a_cuda_request_on_this_machine_falls_back_to_cpu_and_says_why(real_embedder, model_cache: Path,
                                                                         kx_home: Path) -> None:
    from engine.embedding.onnx_runtime import OnnxEmbedder

    inner = real_embedder.prepare()
    gpu_asked = OnnxEmbedder(inner.card, inner.graph, 2, "cuda")
    assert gpu_asked.device in ("cpu", "cuda")
    if gpu_asked.device == "cpu":  # no onnxruntime-gpu here (or no GPU): CPU, with the reason in kx info
        assert gpu_asked.device_reason.startswith("CPU: KX_EMBED_DEVICE=cuda")
    vectors = gpu_asked.encode(["paid leave", "refund for a damaged logger"])
    assert np.allclose(vectors, inner.encode(["paid leave", "refund for a damaged logger"]), atol=1e-4)
    info = run_cli("--set", "embed_device=cuda", "info", "--json")
    runtime = json.loads(info.stdout)["embed_model"]["runtime"]
    assert runtime["device"] in ("cpu", "cuda") and runtime["device_reason"]


@pytest.mark.slow
def test_kx_serve_finishes_backlogs_at_start(tmp_path: Path, kx_home: Path) -> None:
    # stage 1 only, with the real model's fingerprint, stopped before embedding
    from engine.embedding.cards import model_card_for
    from engine.embedding.embedders import load_embedder

    real = Engine(load_settings(), embedder=load_embedder(model_card_for("default"), load_settings()))
    real.ingest("hb", [from_text(t) for t in HANDBOOK], should_stop=lambda: True)
    real.close()
    assert Engine(load_settings()).dataset_summary("hb").backlog == 4
    server = kx_process("serve", "--port", "0", "--dev-allow-local", "--quiet")
    try:
        _wait_for(lambda: Engine(load_settings()).dataset_summary("hb").backlog == 0, 180,
                  "kx serve to embed the backlog")
    finally:
        server.send_signal(signal.SIGTERM)
        _out, err = server.communicate(timeout=60)
    assert "hb: embedding the 4 passages an earlier ingest left" in err and "hb: 4 passages embedded" in err


def test_the_backlog_per_document_reads_the_backlogs_index_not_every_passage(hash_engine: Engine) -> None:
    """A documents listing asks each page's backlog: grouped by document directly, SQLite walked every passage
    row (0.4 s a page at 200k passages, SCALING.md); through the partial index it reads the backlog alone."""
    from engine.embedded.catalogue.backlog_rows import BACKLOG_BY_DOCUMENT
    from engine.embedded.store import Catalogue

    _stopped_ingest(hash_engine, "hb", HANDBOOK[:2])
    hash_engine.ingest("hb", [from_text(t) for t in HANDBOOK[2:]])   # embeds the first two as well
    _stopped_ingest(hash_engine, "hb", ["Bikes go in the yard behind the Leeds warehouse."])
    catalogue = Catalogue(Dataset(hash_engine.settings, "hb").catalogue_path)
    try:
        refs = [d.ref for d in hash_engine.list_documents("hb")]
        waiting = catalogue.backlog_by_document(refs)
        assert list(waiting.values()) == [1] and waiting.keys() <= set(refs)
        assert catalogue.backlog_by_document(refs[:4]) == {}
        plan = " ".join(str(row) for row in catalogue._db.execute(f"EXPLAIN QUERY PLAN {BACKLOG_BY_DOCUMENT}"))
        assert "passages_unembedded" in plan
    finally:
        catalogue.close()
