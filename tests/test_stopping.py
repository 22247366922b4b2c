"""Stopping is always clean: Ctrl-C and SIGTERM are counted by the handler and acted on as ordinary code.

The fast slice of the SIGTERM campaign (benchmarks/sigterm.py runs 50
rounds): real `kx datasets watch` processes on 100-file folders, one SIGTERM
at each kind of moment, each required to exit 0 within 10 s with nothing
committed lost. Beside it: `kx datasets ingest` stopped mid-way keeps what it
committed (a first ingest used to remove the new dataset whole), `kx serve`
stopped while it opens, and the TUI leaving on SIGTERM.
"""

from __future__ import annotations

import os
import random
import re
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from engine import Engine, load_settings
from kx_tui.cli.stopping import Interrupted, StopSignals

from .helpers import HashEmbedder, kx_process
from .sigterm_commands import (
    EMBED_MOMENTS,
    SERVE_MOMENTS,
    make_backlog_template,
    run_embed_round,
    run_ingest_round,
    run_serve_round,
)
from .sigterm_rounds import MOMENTS, prepare_model, run_round


def test_the_handler_only_counts_and_the_previous_handler_comes_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with StopSignals() as stop:
        assert signal.getsignal(signal.SIGTERM) == stop._on_signal
        stop.checkpoint()  # nothing asked yet: no raise
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 5
        while not stop.count and time.monotonic() < deadline:
            time.sleep(0.01)  # the handler runs between two bytecodes of this thread
        assert (stop.count, stop.name) == (1, "SIGTERM")
        with pytest.raises(Interrupted, match="stopped by SIGTERM"):
            stop.checkpoint()
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_signal_while_the_main_thread_holds_a_lock_the_handler_would_need_is_harmless() -> None:
    """The deadlock that hung `kx datasets watch`: a handler taking a lock its own thread holds."""
    lock = threading.Lock()
    with StopSignals() as stop:
        with lock:  # anything the main thread may hold: a console's lock, an Event's condition
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                pass  # bytecodes for the handler to run between
        assert stop.count == 1


@pytest.fixture(scope="module")
def prepared_cache(model_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    prepare_model(model_cache, tmp_path_factory.mktemp("prepare"))
    return model_cache


def _serve_then_sigterm(wait_until_serving: bool) -> tuple[int, float]:
    import re
    import urllib.request

    proc = kx_process("serve", "--port", "0")
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        port = re.search(r":(\d+) ", banner)
        assert port, banner
        if wait_until_serving:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port.group(1)}/v1/health", timeout=2):
                        break
                except OSError:
                    assert time.monotonic() < deadline, "the gateway never answered"
                    time.sleep(0.1)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
        return proc.returncode, time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


async def test_the_tui_leaves_on_sigterm(kx_home: Path) -> None:
    from kx_tui.tui.app import KxApp

    app = KxApp(Engine(load_settings({}), embedder=HashEmbedder()), samples=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        handler = signal.getsignal(signal.SIGTERM)
        assert handler not in (signal.SIG_DFL, None), "the app did not take SIGTERM over"
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100):
            if not app.is_running:
                break
            await pilot.pause(0.05)
    assert not app.is_running
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # given back on the way out


@pytest.fixture(scope="module")
def backlog_template(prepared_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home whose dataset holds 40 documents committed without vectors (an ingest stopped before stage 2)."""
    template = tmp_path_factory.mktemp("backlog-template")
    assert make_backlog_template(template, prepared_cache, files=40) > 0
    return template


def _handler_installed(pid: int) -> bool:
    """Whether process `pid` catches SIGTERM now (its SigCgt mask in /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) & (1 << (signal.SIGTERM - 1)))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_ingest_json_stopped_by_a_signal_still_prints_one_object_saying_what_is_stored(
        kx_home: Path, monkeypatch: pytest.MonkeyPatch, sig: int) -> None:
    """The real CLI in this process, over the hash-embedded engine; the signal arrives (to this process, through
    the real handler) once the second document is committed, so the ingest stops at its next event."""
    import json

    import engine.open_backend
    from engine.records import DocumentResult, DocumentStatus
    from engine.text.inputs import from_text

    from .helpers import run_cli

    backend = Engine(load_settings({"ingest_commit_passages": 1}), embedder=HashEmbedder())
    backend.ingest("notes", [from_text("The canteen serves soup on Fridays.", "soup")])   # one already there
    real_ingest = backend.ingest

    def ingest(name: str, docs: object, vectors: object = None, on_event: object = None) -> object:
        committed = 0

        def watched(event: object) -> None:
            nonlocal committed
            if isinstance(event, DocumentResult) and event.status == DocumentStatus.ADDED:
                committed += 1
                if committed == 2:
                    os.kill(os.getpid(), sig)
            on_event(event)  # type: ignore[operator]
        return real_ingest(name, docs, vectors, on_event=watched)  # type: ignore[arg-type]

    monkeypatch.setattr(backend, "ingest", ingest)
    monkeypatch.setattr(engine.open_backend, "open_backend", lambda settings, on_notice=None: backend)
    texts = ["The canteen serves soup on Fridays."] + [f"Aisle {i} ships parcels at dawn, bay {i}." for i in range(6)]
    shown = run_cli("datasets", "ingest", "notes", *(a for t in texts for a in ("--text", t)), "--json")
    assert shown.code == 130, shown.stderr   # as without --json: CANCELLED
    assert f"CANCELLED: stopped by {signal.Signals(sig).name}" in shown.stderr
    data = json.loads(shown.stdout)   # one object, nothing else on stdout
    assert data["stopped"] is True and data["code"] == "CANCELLED" and data["signal"] == signal.Signals(sig).name
    assert "committed and stay" in data["message"] and data["dataset"] == "notes"
    assert (data["added"], data["unchanged"], data["refused"]) == (2, 1, 0)
    assert data["not_reached"] == len(texts) - 3 and data["passages_added"] == 2
    stored = {d.name for d in backend.list_documents("notes", 0, 100)}
    assert {r["name"] for r in data["results"] if r["status"] == "added"} <= stored   # what it says is stored, is
    assert len(stored) == 3


@pytest.mark.slow
@pytest.mark.parametrize("moment", MOMENTS)
def test_sigterm_stops_a_real_watch_within_10_s_with_exit_0_and_nothing_lost(
        moment: str, tmp_path: Path, prepared_cache: Path) -> None:
    rng = random.Random(MOMENTS.index(moment))
    result = run_round(tmp_path, prepared_cache, moment, rng, files=100, restart=moment == "mid_batch",
                       seed=MOMENTS.index(moment))
    assert result.ok, result
    assert result.stop_seconds < 10
    # a start-up signal may land before the interpreter reaches kx's code: the default action, nothing opened
    assert result.exit_code == 0 or (result.pre_handler and result.committed == 0), result


@pytest.mark.slow
def test_three_quick_sigterms_after_a_batch_still_stop_cleanly(tmp_path: Path, prepared_cache: Path) -> None:
    result = run_round(tmp_path, prepared_cache, "after_batch_done", random.Random(3), files=100, signals=3, seed=9)
    assert result.ok, result
    assert result.reported == result.committed == 100


@pytest.mark.slow
def test_sigterm_mid_ingest_keeps_every_commit_of_a_new_dataset(kx_home: Path, tmp_path: Path,
                                                                 prepared_cache: Path) -> None:
    files = []
    for i in range(45):  # at most 50, so each document gets its "added" line
        path = tmp_path / f"r{i:03d}.txt"
        path.write_text(f"Record {i}: the warehouse in aisle {i} ships parcels at dawn.")
        files.append(str(path))
    proc = kx_process("datasets", "ingest", "fresh", *files, env={"KX_INGEST_COMMIT_PASSAGES": "3",
                                                                           "KX_EMBED_BATCH_SIZE": "3"})
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the first commit has been reported: the dataset exists with documents in it
            if line.startswith("added "):
                break
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=10)
        stopped_in = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    if proc.returncode == 0:
        pytest.skip("the ingest finished before the signal reached it; nothing to check")
    assert proc.returncode == 130 and stopped_in < 10
    assert "CANCELLED: stopped by SIGTERM" in err and "committed and stay" in err
    db = sqlite3.connect(f"file:{kx_home / 'datasets' / 'fresh' / 'catalog.sqlite'}?mode=ro", uri=True)
    try:
        kept = db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    finally:
        db.close()
    assert 3 <= kept < 45  # the dataset was kept with its commits, not removed as "never received a document"
    # the count it reports is the catalogue's (issue 38: a stop inside a committed group's keyword indexing
    # left that group unreported, 2-5 short in 8 of 8 trials)
    said = re.search(r"stopped by SIGTERM: (\d+) document\(s\) were committed", err)
    assert said is not None and int(said.group(1)) == kept, err


@pytest.mark.slow
def test_sigterm_between_the_banner_and_uvicorns_own_handlers_is_not_lost(kx_home: Path) -> None:
    """Before, a SIGTERM in this window either killed the process (-15) or met a no-op handler and was lost."""
    code, seconds = _serve_then_sigterm(wait_until_serving=False)
    assert code == 0 and seconds < 10


@pytest.mark.slow
def test_sigterm_once_serving_drains_and_exits_0(kx_home: Path) -> None:
    code, seconds = _serve_then_sigterm(wait_until_serving=True)
    assert code == 0 and seconds < 10


@pytest.mark.slow
@pytest.mark.parametrize("moment", SERVE_MOMENTS)
def test_sigterm_stops_kx_serve_within_10_s_whatever_it_is_doing(moment: str, tmp_path: Path, prepared_cache: Path,
                                                                   backlog_template: Path) -> None:
    """Resuming a backlog at start-up, answering an upload that embeds, or holding idle and slow connections:
    exit 0 within 10 s, no committed vector or answered document lost; the backlog is then finished whole."""
    result = run_serve_round(tmp_path, prepared_cache, backlog_template, moment,
                             random.Random(SERVE_MOMENTS.index(moment)), restart=moment == "backlog")
    assert result.ok, result
    assert result.stop_seconds < 10
    assert result.exit_code == 0 or result.pre_handler, result


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["stage1", "stage2"])
def test_sigterm_stops_an_ingest_in_either_stage_and_the_same_command_finishes_it(
        moment: str, tmp_path: Path, prepared_cache: Path) -> None:
    result = run_ingest_round(tmp_path, prepared_cache, moment, random.Random(5), files=60, restart=True, seed=5)
    assert result.ok, result
    if not result.finished_first:
        assert result.exit_code == 130 and result.stop_seconds < 10


@pytest.mark.slow
@pytest.mark.parametrize("moment", EMBED_MOMENTS)
def test_sigterm_stops_kx_datasets_embed_and_keeps_every_vector(moment: str, tmp_path: Path, prepared_cache: Path,
                                                                 backlog_template: Path) -> None:
    result = run_embed_round(tmp_path, prepared_cache, backlog_template, moment, random.Random(11), restart=True)
    assert result.ok, result
    if not result.finished_first and not result.pre_handler:
        assert result.exit_code == 130 and result.stop_seconds < 10


@pytest.mark.slow
def test_a_sigterm_while_kx_starts_is_counted_and_honoured_once_the_command_runs(kx_home: Path,
                                                                                 tmp_path: Path) -> None:
    """The handler is installed before click, numpy and the engine are imported (kx_tui/__init__.py): a stop
    during those imports used to end the process by SIGTERM's default action (-15)."""
    folder = tmp_path / "drop"
    folder.mkdir()
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    watch = kx_process("datasets", "watch", "w", str(folder), "--json", env=env)
    listing = kx_process("datasets", "list", env=env)
    try:
        # importing kx_tui takes well under this; the command's own imports take longer than the gap
        deadline = time.monotonic() + 30
        for proc in (watch, listing):
            while time.monotonic() < deadline and not _handler_installed(proc.pid):
                time.sleep(0.005)
            proc.send_signal(signal.SIGTERM)
        watch_out, watch_err = watch.communicate(timeout=20)
        list_out, list_err = listing.communicate(timeout=20)
    finally:
        for proc in (watch, listing):
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=30)
    assert watch.returncode == 0, watch_err
    assert '"event": "stopped"' in watch_out  # the watcher's own clean stop, not a silent exit
    # a command that does not handle stops leaves before it starts, exit 0, saying so (or, if it was already
    # past the hand-over, by SIGTERM's ordinary action)
    assert listing.returncode == 0 and "before the command started" in list_err or listing.returncode == -15
