"""Watched-folder auto-ingest: the real watchdog observer on temporary folders, the real engine.

Every wait is bounded and wakes on the watcher's own events (or, for a
separate process, on its output lines); no test sleeps a fixed time.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from engine import Engine, KxError, Status, load_settings
from engine.embedded.dataset import Dataset
from engine.text.inputs import from_file
from engine.watch.events import (
    BatchDone,
    FolderEmpty,
    Ingested,
    Queued,
    Refused,
    Renamed,
    Retired,
    Unchanged,
    WatchError,
)
from engine.watch.pending import PendingFiles
from engine.watch.watcher import FolderWatcher, inbox_folder, is_ignored

from .helpers import (
    EventLog,
    HashEmbedder,
    assert_dataset_consistent,
    catalogue_counts,
    kx_process,
    run_cli,
    small_engine,
)

SETTLE = 0.2


@pytest.fixture
def drop(tmp_path: Path) -> Path:
    """A folder to drop files into (beside KX_HOME, which lives in tmp_path and may not be watched)."""
    folder = tmp_path / "drop"
    folder.mkdir()
    return folder


@pytest.fixture
def watch() -> Iterator[Callable[..., tuple[FolderWatcher, EventLog]]]:
    """Start a FolderWatcher on a folder; every one started is stopped (and must stop) at teardown."""
    started: list[FolderWatcher] = []

    def start(engine: Engine, folder: Path, dataset: str = "inbox", **options) -> tuple[FolderWatcher, EventLog]:
        log = EventLog()
        options.setdefault("settle_seconds", SETTLE)
        watcher = FolderWatcher(engine, dataset, folder, log, **options)
        watcher.start()
        started.append(watcher)
        return watcher, log

    yield start
    for watcher in started:
        assert watcher.stop(timeout=30), "the watcher did not stop"


def _documents(engine: Engine, name: str) -> list:
    catalogue = Dataset(engine.settings, name).reading()
    try:
        return catalogue.documents()
    finally:
        catalogue.close()


def test_the_same_bytes_are_unchanged_and_an_edit_in_place_is_a_new_document(drop: Path, watch) -> None:
    engine = small_engine()
    _, log = watch(engine, drop)
    (drop / "a.md").write_text("The cafeteria opens at eight.")
    log.wait_for(lambda l: l.paths(Ingested) == ["a.md"], "a.md ingested")

    shutil.copyfile(drop / "a.md", drop / "copy of a.md")
    log.wait_for(lambda l: l.paths(Unchanged) == ["copy of a.md"], "the copy reported unchanged")
    assert len(_documents(engine, "inbox")) == 1

    with open(drop / "a.md", "a") as handle:
        handle.write(" It closes at four.")
    log.wait_for(lambda l: l.paths(Ingested) == ["a.md", "a.md"], "the edited a.md ingested again")
    assert [d.name for d in _documents(engine, "inbox")] == ["a", "a"]  # append-only: both versions stay
    assert len(log.of(WatchError)) == 0


def test_unreadable_files_are_refused_with_reasons_and_the_watch_carries_on(drop: Path, watch) -> None:
    engine = small_engine(max_document_bytes=2000)
    watcher, log = watch(engine, drop)
    (drop / "tool.bin").write_bytes(bytes(range(256)) * 4)
    (drop / "empty.md").write_text("")
    (drop / "latin.txt").write_bytes("na\xefve caf\xe9".encode("latin-1"))
    (drop / "huge.txt").write_text("many words " * 500)
    (drop / "good.md").write_text("Core hours are ten to three.")
    log.wait_for(lambda l: len(l.of(Refused)) == 4 and len(l.of(Ingested)) == 1, "four refused, one in")

    reasons = {Path(e.path).name: e.reason for e in log.of(Refused)}
    assert "binary" in reasons["tool.bin"]
    assert "empty or only whitespace" in reasons["empty.md"]
    assert "not valid UTF-8" in reasons["latin.txt"]
    assert "over the 2,000-byte limit" in reasons["huge.txt"]
    assert all(e.code == "INVALID_ARGUMENT" for e in log.of(Refused))

    (drop / "later.md").write_text("Still watching after the refusals.")
    log.wait_for(lambda l: "later.md" in l.paths(Ingested), "a later file ingested")
    assert watcher.running and watcher.error is None
    assert len(log.of(Refused)) == 4  # a refused file is not refused again and again


def test_files_already_there_are_ingested_at_start_and_unchanged_on_restart(drop: Path, watch) -> None:
    engine = small_engine()
    (drop / "sub" / "deeper").mkdir(parents=True)
    names = ["one.md", "sub/two.md", "sub/deeper/three.md"]
    for i, name in enumerate(names):
        (drop / name).write_text(f"Document number {i} was here before the watcher.")
    first, log = watch(engine, drop)
    log.wait_for(lambda l: len(l.of(Ingested)) == 3, "the backlog ingested")
    assert sorted(log.paths(Ingested)) == ["one.md", "three.md", "two.md"]
    first.stop()

    _, again = watch(engine, drop)
    again.wait_for(lambda l: len(l.of(Unchanged)) == 3, "the backlog seen again as unchanged")
    assert again.of(Ingested) == [] and len(_documents(engine, "inbox")) == 3


def test_a_folder_created_inside_the_watched_one_is_watched_too(drop: Path, watch) -> None:
    engine = small_engine()
    _, log = watch(engine, drop)
    nested = drop / "new" / "nested"
    nested.mkdir(parents=True)
    (nested / "inner.md").write_text("Written straight into a brand-new folder.")
    staged = drop.parent / f"{drop.name}-staged"
    staged.mkdir()
    (staged / "moved.md").write_text("A folder moved in whole.")
    os.rename(staged, drop / "moved-in")
    log.wait_for(lambda l: sorted(l.paths(Ingested)) == ["inner.md", "moved.md"], "both nested files ingested")


@pytest.mark.parametrize("relative, ignored", [
    (".hidden.md", True), (".~lock.report.odt#", True), ("~$report.docx", True), ("notes.md.swp", True),
    (".notes.md.swp", True), ("film.mkv.part", True), ("setup.crdownload", True), ("draft.md~", True),
    ("#draft.md#", True), (".git/config", True), ("sub/.cache/a.md", True), ("scratch.TMP", True),
    ("notes.md", False), ("sub/dir/report.txt", False), ("a~b.md", False), ("part.md", False),
    ("guide/~$plan.docx", True), ("guide/$plan.docx", False),
])
def test_temporary_and_hidden_names(relative: str, ignored: bool) -> None:
    assert is_ignored(relative) is ignored


def test_temporary_and_hidden_files_are_ignored_and_a_rename_brings_one_in(drop: Path, watch) -> None:
    engine = small_engine()
    (drop / ".git").mkdir()
    (drop / ".git" / "config").write_text("[core] old file in a dot-folder")
    watcher, log = watch(engine, drop)
    for name in (".hidden.md", ".~lock.report.odt#", "~$report.docx", "notes.md.swp", "film.txt.part",
                 "setup.crdownload", "draft.md~"):
        (drop / name).write_text(f"temporary text of {name}")
    (drop / ".git" / "HEAD").write_text("ref: refs/heads/main")
    (drop / "download.txt.part").write_text("A download that finished and was renamed.")
    os.rename(drop / "download.txt.part", drop / "download.txt")
    (drop / "real.md").write_text("The only real document.")
    log.wait_for(lambda l: sorted(l.paths(Ingested)) == ["download.txt", "real.md"], "the two real files")
    watcher.stop()
    assert sorted(log.paths(Queued)) == ["download.txt", "real.md"]
    assert log.of(Refused) == [] and log.of(Unchanged) == []


def test_documents_are_named_by_their_path_in_the_watched_folder(drop: Path, watch) -> None:
    engine = small_engine()
    files = {"index.md": "The home page of the documentation.",
             "guide/index.md": "The guide starts with installing the loggers.",
             "api/index.md": "The API reference lists every logger endpoint.",
             "guide/deep/layout.txt": "Layout rules for the dashboard panels."}
    for relative, text in files.items():
        (drop / relative).parent.mkdir(parents=True, exist_ok=True)
        (drop / relative).write_text(text)
    (drop / "guide" / "~$plan.docx").write_bytes(b"an Office owner file, never a document")
    _, log = watch(engine, drop)
    log.wait_for(lambda l: len(l.of(Ingested)) == 4, "the four files")
    assert sorted(e.name for e in log.of(Ingested)) == ["api/index", "guide/deep/layout", "guide/index", "index"]
    assert not any("~$" in e.path for e in log.events if hasattr(e, "path"))
    stored = {d.name: d.source_path for d in _documents(engine, "inbox")}
    assert stored == {name.removesuffix(".md").removesuffix(".txt"): str((drop / name).resolve())
                      for name in files}
    hit = engine.query("inbox", "guide installing loggers", mode="sparse").hits[0]
    assert (hit.document_name, hit.source_path) == ("guide/index", str((drop / "guide" / "index.md").resolve()))


def test_a_deleted_folder_is_a_clear_error_not_a_hang(tmp_path: Path, watch) -> None:
    engine = small_engine()
    folder = tmp_path / "inbox"
    folder.mkdir()
    (folder / "a.md").write_text("Here before the folder went away.")
    watcher, log = watch(engine, folder)
    log.wait_for(lambda l: len(l.of(BatchDone)) == 1, "the first batch")
    shutil.rmtree(folder)
    log.wait_for(lambda l: any(e.fatal for e in l.of(WatchError)), "a fatal error event", timeout=10)
    assert watcher.wait(timeout=10)
    error = log.of(WatchError)[-1]
    assert error.code == "NOT_FOUND" and "no longer exists" in error.message and "recreate it" in error.message
    assert watcher.error is not None and watcher.error.status is Status.NOT_FOUND
    assert not watcher.running


def test_folders_that_cannot_be_watched_are_refused_at_start(tmp_path: Path, kx_home: Path) -> None:
    engine = small_engine()
    a_file = tmp_path / "file.md"
    a_file.write_text("x")
    (kx_home / "datasets").mkdir(parents=True)
    cases = [
        (tmp_path / "missing", Status.NOT_FOUND, "does not exist"),
        (a_file, Status.FAILED_PRECONDITION, "is a file, not a folder"),
        (kx_home, Status.INVALID_ARGUMENT, "holds kx's datasets"),
        (kx_home / "datasets", Status.INVALID_ARGUMENT, "holds kx's datasets"),
    ]
    for folder, status, words in cases:
        watcher = FolderWatcher(engine, "inbox", folder)
        with pytest.raises(KxError) as caught:
            watcher.start()
        assert caught.value.status is status and words in caught.value.message, folder
        assert not watcher.running
    with pytest.raises(KxError) as caught:
        FolderWatcher(engine, "../escape", tmp_path)
    assert caught.value.status is Status.INVALID_ARGUMENT
    assert inbox_folder(engine.settings, "hb") == kx_home / "inbox" / "hb"


def test_watching_a_folder_that_is_not_there_changes_nothing_and_says_what_to_do(tmp_path: Path,
                                                                                kx_home: Path) -> None:
    """A folder gone at start (on a drive that is not mounted, say) is refused before anything is touched."""
    from .helpers import run_cli

    engine = small_engine()
    engine.ingest("hb", [from_file(_written(tmp_path / "keep.md", "The lifts are beside the stairs."), 1 << 20)])
    missing = tmp_path / "share" / "docs"
    result = run_cli("datasets", "watch", "hb", str(missing))
    assert result.code == 4 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"error: NOT_FOUND: the folder {missing} does not exist, and nothing in "
                                    "dataset 'hb' was changed; if it lives on a drive or a share, mount it")
    assert [d.name for d in engine.list_documents("hb")] == ["keep"] and not missing.exists()


def _written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_file_settles_only_after_its_size_and_mtime_hold_still() -> None:
    seen = {"a": (10, 1, 1)}
    pending = PendingFiles(signature=lambda path: seen.get(path))
    assert pending.add("a", now=0.0) and not pending.add("a", now=0.1)
    first = pending.poll(now=0.0, settle_seconds=1.0)
    assert first.queued == ["a"] and first.settled == []
    seen["a"] = (20, 2, 2)  # still being written
    assert pending.poll(now=0.9, settle_seconds=1.0).settled == []
    assert pending.poll(now=1.5, settle_seconds=1.0).settled == []  # 0.6 s quiet so far
    assert pending.poll(now=2.0, settle_seconds=1.0).settled == [("a", (20, 2, 2))]
    assert len(pending) == 0

    pending.handled("a", (20, 2, 2))
    pending.add("a", now=3.0)  # a late event for bytes already taken: dropped without a word
    assert pending.poll(now=3.0, settle_seconds=1.0).queued == [] and len(pending) == 0
    seen["a"] = (20, 2, 3)  # chmod: same bytes, but worth another look (it may be readable now)
    pending.add("a", now=4.0)
    pending.add("gone", now=4.0)  # deleted before the worker looked: dropped without a word
    assert pending.poll(now=4.0, settle_seconds=1.0).queued == ["a"] and len(pending) == 1


class Lines:
    """A process's stdout, read on a thread; `until` waits (bounded) for a line that matches."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(proc.stdout, self._queue), daemon=True).start()
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, args=(proc.stderr, None), daemon=True).start()

    def _pump(self, stream, into: queue.Queue | None) -> None:
        for line in stream:
            if into is None:
                self.stderr.append(line)
            else:
                into.put(line.rstrip("\n"))
        if into is not None:
            into.put(None)

    def until(self, predicate: Callable[[str], bool], what: str, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out waiting for {what}; stdout: {self.seen[-10:]} "
                                     f"stderr: {''.join(self.stderr)[-2000:]}")
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"the process ended before {what}; stdout: {self.seen[-10:]} "
                                     f"stderr: {''.join(self.stderr)[-2000:]}")
            self.seen.append(line)
            if predicate(line):
                return line

    def json_until(self, predicate: Callable[[dict], bool], what: str, timeout: float = 120.0) -> dict:
        return json.loads(self.until(lambda line: predicate(json.loads(line)), what, timeout))

    def events(self, kind: str) -> list[dict]:
        return [e for e in map(json.loads, self.seen) if e["event"] == kind]


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def test_watch_refuses_a_gateway_instead_of_ignoring_it(kx_home: Path, tmp_path: Path) -> None:
    from .helpers import run_cli

    result = run_cli("--gateway", "http://127.0.0.1:9", "datasets", "watch", "hb", str(tmp_path))
    assert result.code == 5
    assert result.stderr.startswith("error: FAILED_PRECONDITION: kx datasets watch runs the engine in this process")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "infinity"])
def test_settle_refuses_numbers_that_are_not_finite(value: str, kx_home: Path, tmp_path: Path) -> None:
    """`--settle nan` passed click's range check (every comparison with NaN is false) and files queued forever."""
    from .helpers import run_cli

    result = run_cli("datasets", "watch", "hb", str(tmp_path), "--settle", value)
    assert result.code == 2 and "--settle" in result.stderr and "not a finite number" in result.stderr
    assert not (kx_home / "datasets" / "hb").exists()
    with pytest.raises(KxError) as caught:
        FolderWatcher(small_engine(), "hb", tmp_path, settle_seconds=float(value))
    assert caught.value.status is Status.INVALID_ARGUMENT and "finite" in caught.value.message


def _answering(engine: Engine, text: str) -> list[str]:
    return [h.text for h in engine.query("inbox", text, k=10, mode="sparse")]


def test_an_edited_file_answers_with_its_newest_text_and_all_versions_on_request(drop: Path, watch) -> None:
    engine = small_engine()
    _, log = watch(engine, drop)
    for i, hour in enumerate(("eight", "nine", "ten"), start=1):
        (drop / "hours.md").write_text(f"The cafeteria opens at {hour}.")
        log.wait_for(lambda l, i=i: len(l.of(Ingested)) == i, f"version {i} ingested")
    assert _answering(engine, "cafeteria opens") == ["The cafeteria opens at ten."]
    every = engine.query("inbox", "cafeteria opens", k=10, mode="sparse", versions="all")
    assert sorted((h.version, h.superseded_by is None) for h in every) == [(1, False), (2, False), (3, True)]


def test_a_deleted_file_retires_and_comes_back_when_restored(drop: Path, watch) -> None:
    engine = small_engine()
    _, log = watch(engine, drop)
    (drop / "guide").mkdir()
    (drop / "guide" / "index.md").write_text("Badges are collected at the front desk.")
    (drop / "keep.md").write_text("The front desk is on the ground floor.")
    log.wait_for(lambda l: len(l.of(Ingested)) == 2, "both ingested")
    (drop / "guide" / "index.md").unlink()
    log.wait_for(lambda l: [e.name for e in l.of(Retired)] == ["guide/index"], "guide/index retired")
    assert _answering(engine, "front desk badges") == ["The front desk is on the ground floor."]
    assert [d.name for d in engine.list_documents("inbox")] == ["keep"]
    assert {d.name: d.retired for d in engine.list_documents("inbox", versions="all")} == {"guide/index": True,
                                                                                         "keep": False}
    (drop / "guide" / "index.md").write_text("Badges are collected at the front desk.")  # the same bytes again
    log.wait_for(lambda l: l.paths(Unchanged) == ["index.md"], "restored: unchanged bytes")
    assert len(_answering(engine, "front desk badges")) == 2


def test_a_file_missing_at_start_retires_and_survives_a_restart(drop: Path, watch) -> None:
    engine = small_engine()
    watcher, log = watch(engine, drop)
    (drop / "old.md").write_text("The archive room is in the basement.")
    (drop / "stays.md").write_text("The lifts are beside the stairs.")  # the folder is not empty at the restart
    log.wait_for(lambda l: len(l.of(Ingested)) == 2, "old.md and stays.md ingested")
    assert watcher.stop(timeout=30)
    (drop / "old.md").unlink()  # while nobody watches
    _, log = watch(engine, drop)
    log.wait_for(lambda l: [e.name for e in l.of(Retired)] == ["old"], "old retired at the start scan")
    assert log.of(FolderEmpty) == []
    engine.close()
    again = small_engine()  # a new process's view: retirement is in the catalogue
    assert again.query("inbox", "archive basement", k=5, mode="sparse").hits == []
    assert again.dataset_summary("inbox").retired == 1


def test_an_empty_folder_at_start_keeps_its_documents_and_the_watch_goes_on(drop: Path, watch) -> None:
    """An unmounted drive or a sync client that has not filled the folder yet looks empty: the start scan keeps
    what came from it (and says so) instead of retiring all of it; a delete seen while watching still retires."""
    engine = small_engine()
    watcher, log = watch(engine, drop)
    (drop / "a.md").write_text("The archive room is in the basement.")
    (drop / "sub").mkdir()
    (drop / "sub" / "b.md").write_text("The lifts are beside the stairs.")
    log.wait_for(lambda l: len(l.of(Ingested)) == 2, "both ingested")
    assert watcher.stop(timeout=30)
    moved = drop.parent / "elsewhere"
    drop.rename(moved)   # the folder's files are gone while nobody watched; only an empty folder is left
    drop.mkdir()
    (drop / ".DS_Store").write_bytes(b"\0")   # ignored files do not make it less empty

    watcher, log = watch(engine, drop)
    log.wait_for(lambda l: l.of(FolderEmpty), "the start scan's word on the empty folder")
    [empty] = log.of(FolderEmpty)
    assert (empty.path, empty.documents) == (str(drop.resolve()), 2)
    assert empty.to_dict() == {"event": "folder_empty", "path": str(drop.resolve()), "documents": 2}
    assert log.of(Retired) == [] and log.of(WatchError) == []
    assert watcher.running
    assert sorted(d.name for d in engine.list_documents("inbox")) == ["a", "sub/b"]
    assert len(_answering(engine, "archive basement")) == 1

    (drop / "c.md").write_text("The canteen opens at noon.")   # still watching: a new file goes in
    log.wait_for(lambda l: l.paths(Ingested) == ["c.md"], "c.md ingested")
    (drop / "c.md").unlink()                                   # and a delete seen while watching retires it
    log.wait_for(lambda l: [e.name for e in l.of(Retired)] == ["c"], "c retired")
    # the kept documents were never seen to go: this run leaves them be
    assert sorted(d.name for d in engine.list_documents("inbox")) == ["a", "sub/b"]
    assert watcher.stop(timeout=30)

    (moved / "a.md").rename(drop / "a.md")   # the folder holds files again: its usual rule is back
    _, log = watch(engine, drop)
    log.wait_for(lambda l: [e.name for e in l.of(Retired)] == ["sub/b"] and l.paths(Unchanged) == ["a.md"],
                 "sub/b retired, a.md unchanged")
    assert log.of(FolderEmpty) == []
    assert [d.name for d in engine.list_documents("inbox")] == ["a"]


def _renamed_file_keeps_its_lineage(engine, drop: Path, watch) -> None:
    _, log = watch(engine, drop)
    texts = ["Visitors sign in at reception.", "Visitors sign in at reception, before nine."]
    for i, text in enumerate(texts, start=1):   # two versions under the old name
        (drop / "draft.md").write_text(text)
        log.wait_for(lambda l, i=i: len(l.of(Ingested)) == i, f"draft version {i} ingested")
    (drop / "draft.md").rename(drop / "final.md")   # the lineage, history and all, goes on as `final`
    log.wait_for(lambda l: [(e.old_name, e.name) for e in l.of(Renamed)] == [("draft", "final")]
                 and l.paths(Unchanged) == ["final.md"], "draft renamed to final, its bytes unchanged")
    assert log.of(Retired) == []   # a rename is not a departure
    hits = engine.query("inbox", "visitors reception", k=10, mode="sparse")
    assert [(h.text, h.document_name, h.version) for h in hits] == [(texts[1], "final", 2)]
    assert hits[0].source_path == str(drop / "final.md")
    assert [(d.name, d.version) for d in engine.list_documents("inbox")] == [("final", 2)]
    every = engine.list_documents("inbox", versions="all")
    assert [(d.name, d.version, d.superseded_by is None) for d in every] == [("final", 1, False), ("final", 2, True)]
    assert len(engine.query("inbox", "visitors reception", k=10, mode="sparse", versions="all")) == 2
    assert len(engine.query("inbox", "visitors", k=10, mode="sparse", where=["name:final"])) == 1
    (drop / "final.md").write_text("Visitors sign in at reception, with ID.")   # a third version, new name
    log.wait_for(lambda l: [e.name for e in l.of(Ingested)] == ["draft", "draft", "final"], "final.md edited")
    assert [(h.text, h.version) for h in engine.query("inbox", "visitors reception", k=10, mode="sparse")] == \
        [("Visitors sign in at reception, with ID.", 3)]
    assert engine.dataset_summary("inbox").documents == 1
    (drop / "guide").mkdir()
    (drop / "guide" / "index.md").write_text("Parking permits come from the front desk.")
    log.wait_for(lambda l: len(l.of(Ingested)) == 4, "guide/index ingested")
    (drop / "guide").rename(drop / "manual")   # a folder renamed: every file in it keeps its lineage
    log.wait_for(lambda l: ("guide/index", "manual/index") in [(e.old_name, e.name) for e in l.of(Renamed)],
                 "guide/index renamed with its folder")
    log.wait_for(lambda l: "index.md" in l.paths(Unchanged), "manual/index.md seen unchanged")
    assert sorted(d.name for d in engine.list_documents("inbox")) == ["final", "manual/index"]
    assert log.of(Retired) == []


def test_a_renamed_file_keeps_its_lineage_and_history(drop: Path, watch) -> None:
    _renamed_file_keeps_its_lineage(small_engine(), drop, watch)


def test_a_rename_made_while_nobody_watched_keeps_the_lineage(drop: Path, watch) -> None:
    engine = small_engine()
    watcher, log = watch(engine, drop)
    for i, text in enumerate(("Lockers are on the first floor.", "Lockers are on the second floor."), start=1):
        (drop / "lockers.md").write_text(text)
        log.wait_for(lambda l, i=i: len(l.of(Ingested)) == i, f"version {i} ingested")
    (drop / "gone.md").write_text("The old canteen menu.")
    log.wait_for(lambda l: len(l.of(Ingested)) == 3, "gone.md ingested")
    assert watcher.stop(timeout=30)
    (drop / "lockers.md").rename(drop / "locker-rooms.md")   # renamed while stopped: the start scan finds it
    (drop / "gone.md").unlink()                               # and a real departure beside it
    _, log = watch(engine, drop)
    log.wait_for(lambda l: [(e.old_name, e.name) for e in l.of(Renamed)] == [("lockers", "locker-rooms")]
                 and [e.name for e in l.of(Retired)] == ["gone"], "renamed and retired at the start scan")
    log.wait_for(lambda l: l.paths(Unchanged) == ["locker-rooms.md"], "its bytes seen unchanged")
    assert [(d.name, d.version) for d in engine.list_documents("inbox", versions="all")
            if not d.retired] == [("locker-rooms", 1), ("locker-rooms", 2)]


def test_a_rename_seen_as_a_delete_and_a_create_keeps_the_lineage(drop: Path, watch) -> None:
    """Some platforms (and moves across watches) report a rename as a delete and a create: the new name takes
    the bytes on first, then the reconcile finds the old name's bytes under it and moves the lineage."""
    engine = small_engine()
    watcher, log = watch(engine, drop)
    for i, text in enumerate(("Desks are booked a day ahead.", "Desks are booked two days ahead."), start=1):
        (drop / "desks.md").write_text(text)
        log.wait_for(lambda l, i=i: len(l.of(Ingested)) == i, f"version {i} ingested")
    assert watcher.stop(timeout=30)
    (drop / "desks.md").rename(drop / "booking.md")
    engine.ingest("inbox", [from_file(drop / "booking.md", 1 << 20)])   # the create, taken in first
    _, log = watch(engine, drop)
    log.wait_for(lambda l: [(e.old_name, e.name) for e in l.of(Renamed)] == [("desks", "booking")],
                 "desks renamed to booking")
    assert log.of(Retired) == []
    hits = engine.query("inbox", "desks booked", k=5, mode="sparse")
    assert [(h.document_name, h.version) for h in hits] == [("booking", 2)]


def test_a_file_name_that_is_not_utf8_is_refused_and_the_watch_carries_on(drop: Path, watch) -> None:
    engine = small_engine()
    (drop / os.fsdecode(b"caf\xe9.txt")).write_text("A latin name file about servals.")
    (drop / "good.txt").write_text("A good file about caracals.")
    watcher, log = watch(engine, drop)
    log.wait_for(lambda l: len(l.of(Refused)) == 1 and len(l.of(Ingested)) == 1, "one refused, one in")
    refused = log.of(Refused)[0]
    assert (refused.path, refused.name, refused.code) == (str(drop / "caf\ufffd.txt"), "caf\ufffd", "INVALID_ARGUMENT")
    assert "not valid UTF-8" in refused.reason
    (drop / "later.md").write_text("Still watching after the bad name.")
    log.wait_for(lambda l: "later.md" in l.paths(Ingested), "a later file ingested")
    assert watcher.running and watcher.error is None and log.of(WatchError) == []
    for event in log.events:   # every event prints and serialises as it is (the CLI's --json, the TUI)
        json.dumps(event.to_dict(), ensure_ascii=False).encode("utf-8")


def _names(engine: Engine) -> list[str]:
    return sorted(d.name for d in engine.list_documents("inbox"))


def _found(engine: Engine, text: str) -> list[str]:
    return [h.document_name for h in engine.query("inbox", text, k=5, mode="sparse").hits]


def _two_reports_watched(drop: Path, watch):
    """report.md and report.txt in the folder before the watch starts; (engine, log) once both are in."""
    engine = small_engine()
    (drop / "report.md").write_text("report text about giraffes")
    (drop / "report.txt").write_text("report text about hippos")
    _, log = watch(engine, drop)
    log.wait_for(lambda l: len(l.of(Ingested)) == 2, "both ingested")
    return engine, log


def test_two_files_with_one_stem_are_two_documents_when_both_are_there_at_start(drop: Path, watch) -> None:
    engine, log = _two_reports_watched(drop, watch)
    assert sorted(e.name for e in log.of(Ingested)) == ["report.md", "report.txt"]
    assert _found(engine, "giraffes") == ["report.md"] and _found(engine, "hippos") == ["report.txt"]


def test_a_file_arriving_beside_one_with_its_stem_never_supersedes_it(drop: Path, watch) -> None:
    engine = small_engine()
    _, log = watch(engine, drop)
    (drop / "report.md").write_text("report text about giraffes")
    log.wait_for(lambda l: [e.name for e in l.of(Ingested)] == ["report"], "report.md in, named report")
    (drop / "report.txt").write_text("report text about hippos")
    log.wait_for(lambda l: [e.name for e in l.of(Ingested)] == ["report", "report.txt"]
                 and [(e.old_name, e.name) for e in l.of(Renamed)] == [("report", "report.md")],
                 "report.txt in under its full name, report.md's lineage moved to report.md")
    assert _names(engine) == ["report.md", "report.txt"]
    assert _found(engine, "giraffes") == ["report.md"] and _found(engine, "hippos") == ["report.txt"]

    (drop / "report.txt").unlink()   # alone again: report.md's document takes the short name back
    log.wait_for(lambda l: [e.name for e in l.of(Retired)] == ["report.txt"]
                 and ("report.md", "report") in [(e.old_name, e.name) for e in l.of(Renamed)],
                 "report.txt retired, report.md back to report")
    assert _names(engine) == ["report"] and _found(engine, "giraffes") == ["report"]
    assert log.of(WatchError) == []


def test_renaming_one_of_two_files_with_one_stem_carries_the_right_lineage(drop: Path, watch) -> None:
    engine, log = _two_reports_watched(drop, watch)
    (drop / "report.txt").rename(drop / "hippos.txt")
    log.wait_for(lambda l: {(e.old_name, e.name) for e in l.of(Renamed)} == {("report.txt", "hippos"),
                                                                             ("report.md", "report")},
                 "report.txt renamed to hippos, report.md back to report")
    assert _names(engine) == ["hippos", "report"]
    assert _found(engine, "giraffes") == ["report"] and _found(engine, "hippos") == ["hippos"]
    assert log.of(Retired) == []


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
    engine = small_engine()
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
