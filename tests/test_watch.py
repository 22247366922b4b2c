"""The end-to-end half of tests/unit/test_watch.py (a model, processes or servers there):
Watched-folder auto-ingest: the real watchdog observer on temporary folders, the real engine.
"""

from __future__ import annotations

import hashlib
import json
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from engine import Engine, load_settings
from engine.embedded.dataset import Dataset
from engine.watch.events import BatchDone, Ingested, Queued

from .helpers import HashEmbedder, assert_dataset_consistent, catalogue_counts, kx_process, run_cli
from .unit.test_watch import (  # noqa: F401 - helpers and fixtures
    SETTLE,
    EventLog,
    Lines,
    _documents,
    _hash_engine,
    _renamed_file_keeps_its_lineage,
    drop,
    processes,
    watch,
)


def test_dropped_files_are_ingested_and_queryable_through_the_real_model(drop: Path, real_embedder, watch) -> None:
    engine = Engine(load_settings(), embedder=real_embedder)
    folder = drop
    _, log = watch(engine, folder, "handbook")
    (folder / "refunds.md").write_text("# Refunds\n\nYou get your money back within 30 days of purchase, "
                                       "with the RMA-7 form and a receipt.")
    (folder / "security.txt").write_text("The KX-4021 hardware token is required for VPN access from home.")
    (folder / "leave.rst").write_text("Leave\n=====\n\nAnnual leave is 25 days a year; up to five days "
                                      "carry over into the next year.")
    log.wait_for(lambda l: len(l.of(Ingested)) == 3, "three files ingested", timeout=60)

    assert sorted(log.paths(Ingested)) == ["leave.rst", "refunds.md", "security.txt"]
    assert sorted(log.paths(Queued)) == ["leave.rst", "refunds.md", "security.txt"]
    assert engine.query("handbook", "KX-4021", mode="sparse").hits[0].document_name == "security"
    hybrid = engine.query("handbook", "how many vacation days do I get each year?", mode="hybrid")
    assert hybrid.hits[0].document_name == "leave"
    assert {h.document_name for h in hybrid.hits} == {"leave", "refunds", "security"}
    assert engine.dataset_summary("handbook").documents == 3


@pytest.mark.slow  # writes a file slowly on purpose: seconds
def test_a_file_written_slowly_is_ingested_once_and_complete(drop: Path, watch) -> None:
    engine = Engine(load_settings({"chunk_size": 4000, "chunk_overlap": 0}), embedder=HashEmbedder())
    settle = 0.5
    watcher, log = watch(engine, drop, settle_seconds=settle)
    path = drop / "big.md"
    pieces = [f"Section {i}: " + " ".join(f"word{i}x{j}" for j in range(400)) + "\n" for i in range(60)]
    took: list[float] = []

    def writer() -> None:
        started = time.monotonic()
        with open(path, "w") as handle:
            for piece in pieces:
                handle.write(piece)
                handle.flush()
                time.sleep(0.025)  # the writer's own pace (well under the settle time), not a test wait
        took.append(time.monotonic() - started)

    thread = threading.Thread(target=writer)
    thread.start()
    final = "".join(pieces).encode()
    ref = hashlib.sha256(final).hexdigest()
    log.wait_for(lambda l: any(e.ref == ref for e in l.of(Ingested)), "the complete file ingested", timeout=60)
    thread.join()
    assert took[0] > 2 * settle  # the write really outlasted the settle time
    watcher.stop()

    assert log.paths(Ingested) == ["big.md"]
    docs = _documents(engine, "inbox")
    assert [d.ref for d in docs] == [ref]
    catalogue = Dataset(engine.settings, "inbox").reading()
    try:
        assert catalogue.document_bytes(ref) == final
        assert docs[0].text_length == len(final.decode())
    finally:
        catalogue.close()


@pytest.mark.slow  # 300 files through the watcher: seconds
def test_a_burst_of_300_files_goes_in_a_handful_of_batches(drop: Path, watch) -> None:
    engine = _hash_engine()
    _, log = watch(engine, drop)
    for i in range(300):
        (drop / f"note-{i:03d}.txt").write_text(f"Note {i} mentions the code word token{i} once.")
    log.wait_for(lambda l: len(l.of(Ingested)) == 300, "300 files ingested", timeout=60)

    batches = log.of(BatchDone)
    print("batch sizes:", [b.files for b in batches])
    assert 1 <= len(batches) <= 5, [b.files for b in batches]
    assert sum(b.files for b in batches) == 300 and max(b.files for b in batches) <= 256
    assert batches[-1].documents == 300
    assert len(set(log.paths(Ingested))) == 300
    assert engine.query("inbox", "token123", mode="sparse").hits[0].document_name == "note-123"


@pytest.mark.slow
def test_cli_watch_json_lines_then_sigterm_exits_zero(drop: Path, kx_home: Path, processes) -> None:
    folder = drop
    proc = kx_process("datasets", "watch", "hb", str(folder), "--json", "--settle", str(SETTLE))
    processes.append(proc)
    out = Lines(proc)
    start = out.json_until(lambda e: e["event"] == "watching", "the start line")
    assert start["folder"] == str(folder.resolve()) and start["dataset"] == "hb"

    (folder / "refunds.md").write_text("Refunds are paid within 30 days of purchase.")
    (folder / "security.txt").write_text("The KX-4021 token is required for VPN access.")
    (folder / "tool.bin").write_bytes(b"\x00\x01\x02" * 100)
    out.json_until(lambda e: e["event"] == "batch_done" and len(out.events("ingested")) == 2,
                   "two files ingested")
    assert sorted(Path(e["path"]).name for e in out.events("ingested")) == ["refunds.md", "security.txt"]
    refused = out.events("refused")
    assert [Path(e["path"]).name for e in refused] == ["tool.bin"] and "binary" in refused[0]["reason"]

    proc.send_signal(signal.SIGTERM)
    stopped = out.json_until(lambda e: e["event"] == "stopped", "the stop line", timeout=60)
    assert proc.wait(timeout=60) == 0
    assert stopped["reason"] == "signal" and stopped["added"] == 2 and stopped["refused"] == 1
    assert catalogue_counts(kx_home, "hb")[0] == 2
    assert_dataset_consistent(kx_home, "hb", unique_names=True)


@pytest.mark.slow
def test_cli_watch_on_an_empty_folder_keeps_the_dataset_says_so_and_goes_on(drop: Path, kx_home: Path,
                                                                           processes) -> None:
    """A folder that is empty when the watch starts (a drive not mounted, a sync client not done) retires none
    of the dataset's documents from it: the watch says so, in words and in --json, and goes on watching."""
    (drop / "refunds.md").write_text("Refunds are paid within 30 days of purchase.")
    (drop / "security.txt").write_text("The KX-4021 token is required for VPN access.")
    assert run_cli("datasets", "ingest", "hb", str(drop)).code == 0
    for path in list(drop.iterdir()):
        path.unlink()

    words = kx_process("datasets", "watch", "hb", str(drop), "--settle", str(SETTLE))
    processes.append(words)
    line = Lines(words).until(lambda l: l.startswith("kept"), "the kept line")
    assert f"{drop.resolve()} is empty, but the dataset holds 2 documents from it: kept, none retired" in line
    words.send_signal(signal.SIGTERM)
    assert words.wait(timeout=60) == 0

    proc = kx_process("datasets", "watch", "hb", str(drop), "--json", "--settle", str(SETTLE))
    processes.append(proc)
    out = Lines(proc)
    kept = out.json_until(lambda e: e["event"] == "folder_empty", "the folder_empty event")
    assert kept == {"event": "folder_empty", "path": str(drop.resolve()), "documents": 2}
    (drop / "leave.md").write_text("Annual leave is 25 days a year.")   # still watching
    out.json_until(lambda e: e["event"] == "batch_done", "leave.md ingested")
    proc.send_signal(signal.SIGTERM)
    stopped = out.json_until(lambda e: e["event"] == "stopped", "the stop line", timeout=60)
    assert proc.wait(timeout=60) == 0 and stopped["reason"] == "signal"
    assert out.events("retired") == [] and out.events("error") == []
    listed = json.loads(run_cli("datasets", "documents", "hb", "--json").stdout)["documents"]
    assert sorted(d["name"] for d in listed) == ["leave", "refunds", "security"]
    assert run_cli("datasets", "query", "hb", "KX-4021", "--mode", "sparse", "--json").stdout.count("security") > 0


@pytest.mark.slow
def test_cli_sigkill_mid_batch_then_restart_loses_and_duplicates_nothing(kx_home: Path, processes) -> None:
    inbox = kx_home / "inbox" / "crash"
    inbox.mkdir(parents=True)
    total = 120
    for i in range(total):
        (inbox / f"r{i:03d}.txt").write_text(f"Record {i}: the warehouse in aisle {i} ships parcels at dawn.")
    env = {"KX_INGEST_COMMIT_PASSAGES": "4"}  # many small commits, so the kill lands between two of them
    first = kx_process("datasets", "watch", "crash", "--json", "--settle", str(SETTLE), env=env)
    processes.append(first)
    out = Lines(first)
    assert out.json_until(lambda e: e["event"] == "watching", "the start line")["folder"] == str(inbox)
    catalogue = kx_home / "datasets" / "crash" / "catalog.sqlite"
    deadline = time.monotonic() + 120
    committed = 0
    while time.monotonic() < deadline and first.poll() is None and committed < 8:
        if catalogue.exists():
            try:
                committed = catalogue_counts(kx_home, "crash")[0]
            except sqlite3.OperationalError:
                committed = 0
        time.sleep(0.02)  # polling another process's catalogue, bounded by the deadline
    assert first.poll() is None and committed >= 8, "the batch finished (or never started) before the kill"
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    survived = catalogue_counts(kx_home, "crash")[0]
    assert 8 <= survived < total

    second = kx_process("datasets", "watch", "crash", str(inbox), "--settle", str(SETTLE), env=env)
    processes.append(second)
    lines = Lines(second)
    lines.until(lambda line: line.startswith("watching "), "the start line")
    lines.until(lambda line: f"holds {total} documents" in line, "every record in", timeout=120)
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=60) == 0
    added = [line for line in lines.seen if line.startswith("added ")]
    unchanged = [line for line in lines.seen if line.startswith("unchanged ")]
    assert len(unchanged) == survived and len(added) == total - survived
    assert catalogue_counts(kx_home, "crash") == (total, total)
    assert_dataset_consistent(kx_home, "crash", unique_names=True)


@pytest.mark.slow  # milvus-lite under the watcher: seconds
def test_a_renamed_file_keeps_its_lineage_on_milvus_lite(drop: Path, watch, tmp_path: Path) -> None:
    from milvus_lite.server_manager import server_manager_instance

    from engine.milvus.backend import MilvusBackend

    path = str(tmp_path / "watch.db")
    backend = MilvusBackend(load_settings({"backend": "milvus", "milvus_uri": path, "chunk_size": 200,
                                           "chunk_overlap": 40}), embedder=HashEmbedder())
    try:
        _renamed_file_keeps_its_lineage(backend, drop, watch)
    finally:
        backend.close()
        server_manager_instance.release_server(path)
