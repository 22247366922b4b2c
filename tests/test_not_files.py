"""Files that are not files: devices, FIFOs, sockets and links out of a watched folder.

A read never blocks and never takes more than the size limit + 1 bytes;
what is refused says what it is. Each kx command runs as its own process
with a timeout, so a regression shows as a failure, not a hung suite.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from engine.errors import KxError, Status
from engine.text.inputs import from_file, from_jsonl
from engine.text.safe_read import read_regular_file
from engine.watch.events import Ingested, Refused, Unchanged, WatchError
from engine.watch.watcher import FolderWatcher

from .helpers import EventLog, run_kx, small_engine

posix_only = pytest.mark.skipif(os.name != "posix", reason="devices, FIFOs and unix sockets are POSIX things")


def _refused(doc) -> KxError:
    assert doc.error is not None and not doc.data, doc
    return doc.error


@posix_only
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    started = time.monotonic()
    error = _refused(from_file(fifo, 1000))  # no writer: a plain open() would block here forever
    assert error.status is Status.INVALID_ARGUMENT and "FIFO (named pipe)" in error.message
    jsonl = list(from_jsonl(fifo, 1000))
    assert len(jsonl) == 1 and "FIFO" in _refused(jsonl[0]).message
    assert time.monotonic() - started < 5


@posix_only
def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        error = _refused(from_file(path, 1000))
    finally:
        server.close()
    assert error.status is Status.INVALID_ARGUMENT and "a socket, not a regular file" in error.message


def test_a_read_stops_at_the_limit_whatever_stat_says(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 5000)
    assert "over the 1,000-byte limit" in _refused(from_file(big, 1000)).message
    assert read_regular_file(big, 5000) == b"x" * 5000
    if Path("/proc/self/status").exists():  # procfs says size 0 and then has bytes: the read itself counts
        assert os.stat("/proc/self/status").st_size == 0
        with pytest.raises(KxError) as caught:
            read_regular_file("/proc/self/status", 10)
        assert "more than 10 bytes" in caught.value.message


@posix_only
def test_an_explicit_file_that_is_a_symlink_is_the_users_choice(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "real.md"
    target.parent.mkdir()
    target.write_text("The real file lives somewhere else.")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    doc = from_file(link, 1000)
    assert doc.error is None and doc.data == target.read_bytes()
    with pytest.raises(KxError) as caught:
        read_regular_file(link, 1000, follow_symlinks=False)
    assert "symbolic link" in caught.value.message


@posix_only
def test_the_watched_folder_does_not_follow_links_out_of_itself(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    (drop / "sub").mkdir(parents=True)
    secret = tmp_path / "private" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("the password is swordfish")
    (drop / "inside.md").write_text("Meetings start on the hour.")
    (drop / "leak.txt").symlink_to(secret)                  # a file link leading out
    (drop / "sub" / "alias.md").symlink_to(drop / "inside.md")  # a link that stays inside: followed
    (drop / "outdir").symlink_to(secret.parent, target_is_directory=True)  # a folder link leading out
    os.mkfifo(drop / "pipe.txt")
    engine = small_engine()
    log = EventLog()
    watcher = FolderWatcher(engine, "inbox", drop, log, settle_seconds=0.2)
    watcher.start()
    try:
        log.wait_for(lambda l: len(l.of(Refused)) == 2 and len(l.of(Ingested)) + len(l.of(Unchanged)) == 2
                     and l.of(WatchError), "two refused, two taken, the folder link reported")
        (drop / "later.txt").symlink_to(secret)  # arriving while watched: the event path, not the scan
        log.wait_for(lambda l: len(l.of(Refused)) == 3, "the later link refused too")
    finally:
        assert watcher.stop(timeout=30)
    refused = {Path(e.path).name: e for e in log.of(Refused)}
    assert set(refused) == {"leak.txt", "pipe.txt", "later.txt"}
    assert refused["leak.txt"].code == "PERMISSION_DENIED"
    assert f"a link to {secret}, outside the watched folder" in refused["leak.txt"].reason
    assert "FIFO" in refused["pipe.txt"].reason
    folder_link = log.of(WatchError)[0]
    assert not folder_link.fatal and folder_link.path.endswith("outdir") and "outside the watched folder" in \
        folder_link.message
    hits = engine.query("inbox", "password swordfish", mode="sparse").hits
    assert hits == [] or all("swordfish" not in h.text for h in hits)  # nothing from outside got in
    assert engine.dataset_summary("inbox").documents == 1  # inside.md, and its alias is the same bytes
    engine.close()


@pytest.mark.slow  # spawns kx
@posix_only
def test_dev_zero_given_as_a_file_is_refused_at_once_by_the_cli(kx_home: Path) -> None:
    started = time.monotonic()
    result = run_kx("datasets", "ingest", "handbook", "--file", "/dev/zero", env={"KX_HOME": str(kx_home)},
                    timeout=60)
    assert result.code == Status.INVALID_ARGUMENT.exit_code, result.stderr
    assert "/dev/zero is a character device, not a regular file" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 60
    assert not (kx_home / "datasets" / "handbook").exists()  # nothing went in, no empty dataset left


@pytest.mark.slow  # spawns kx
@posix_only
def test_a_fifo_through_the_cli_does_not_hang(kx_home: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    note = tmp_path / "note.md"
    note.write_text("Lunch is served at noon on the third floor.")
    result = run_kx("datasets", "ingest", "notes", "--file", str(fifo), "--file", str(note),
                    env={"KX_HOME": str(kx_home)}, timeout=120)
    assert "FIFO (named pipe), not a regular file" in result.stdout + result.stderr
    assert "note" in result.stdout and result.code == Status.INVALID_ARGUMENT.exit_code  # the other one went in
    assert "Traceback" not in result.stderr
