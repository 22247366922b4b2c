"""The end-to-end half of tests/unit/test_stopping.py (a model, processes or servers there):
Stopping is always clean: Ctrl-C and SIGTERM are counted by the handler and acted on as ordinary code.
"""

from __future__ import annotations

import random
import re
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from .helpers import kx_process
from .sigterm_commands import (
    EMBED_MOMENTS,
    SERVE_MOMENTS,
    run_embed_round,
    run_ingest_round,
    run_serve_round,
)
from .sigterm_rounds import MOMENTS, run_round
from .unit.test_stopping import _handler_installed, _serve_then_sigterm, backlog_template, prepared_cache  # noqa: F401 - helpers and fixtures


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
