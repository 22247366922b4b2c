"""What watchdog's thread hands a folder watcher's worker: changed files, folders to scan, renames, a stop.

watchdog calls back on its own thread (`_Handler`); everything it says lands
here, under one condition the worker waits on: a changed file goes to the
`PendingFiles` that decide when it has settled, a new folder is queued for a
scan (files written into it before its watch existed are only found by
looking), a rename inside the folder is kept for the worker to carry the
lineage on, and a delete or a move asks for a reconcile once things settle.
The worker takes each of these on its own thread (engine/watch/watcher.py).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import PurePath
from typing import Any, Callable

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)

from ..errors import precondition
from ..text.folders import document_name, document_names, folder_files, is_ignored, printable, walk_files
from .pending import PendingFiles

# Directory modifications and opens/reads are noise here; a file's own events and
# folders arriving or vanishing are all the worker needs.
_WATCHED_EVENTS = (FileCreatedEvent, FileModifiedEvent, FileMovedEvent, FileClosedEvent, FileAttribEvent,
                   FileDeletedEvent, DirCreatedEvent, DirMovedEvent, DirDeletedEvent)


class Intake:
    """The watcher's inbox from watchdog's thread, and the observer that fills it.

    `root` is the watched folder, resolved (set before the observer starts).
    Every field the two threads share is guarded by `cond`, which is notified
    whenever there is something new for the worker.
    """

    def __init__(self, settle_seconds: float) -> None:
        self.settle_seconds = settle_seconds
        self.root = ""
        self.pending = PendingFiles()
        self.cond = threading.Condition()
        self.stop_requested = False
        self.abandon = False
        self.reconcile_due: float | None = None  # a file or folder went away: retire what left, once settled
        self._scan_requests: list[str] = []
        self._moves: list[tuple[str, str, bool]] = []  # (from, to, a folder?) renames inside the folder
        self._observer: Any = None

    # -- the observer --------------------------------------------------------------

    def start_observer(self, factory: Callable[[], Any] | None) -> None:
        """Start watchdog's observer on `root` (recursively). Raises KxError when the folder cannot be watched."""
        if factory is None:
            from watchdog.observers import Observer

            observer = Observer()
        else:
            observer = factory()
        try:
            observer.schedule(_Handler(self), self.root, recursive=True, event_filter=list(_WATCHED_EVENTS))
            observer.start()
        except OSError as exc:
            raise precondition(
                f"cannot watch {self.root} ({exc.strerror or exc}); on Linux, raise the inotify limits "
                "(sysctl fs.inotify.max_user_watches / max_user_instances) and try again"
            ) from None
        self._observer = observer

    def stop_observer(self) -> None:
        observer, self._observer = self._observer, None
        if observer is None:
            return
        try:
            observer.stop()
            observer.join(timeout=5)
        except Exception:  # a watch on a folder that vanished may fail to unschedule; nothing to keep
            pass

    # -- in, on watchdog's thread (files found by a scan come in through note() too) ----------

    def on_fs_event(self, event: Any) -> None:
        if self.stop_requested:
            return
        moved = event.event_type == "moved"
        path = os.fsdecode(event.dest_path if moved else event.src_path)
        if moved or event.event_type == "deleted":  # something left (or left its old name): check once settled
            with self.cond:
                self.reconcile_due = time.monotonic() + self.settle_seconds
        if moved:
            self._note_move(os.fsdecode(event.src_path), path, event.is_directory)
        if event.is_directory:
            if event.event_type in ("created", "moved"):
                # files written into a new folder before its watch existed are only found by looking
                with self.cond:
                    self._scan_requests.append(path)
                    self.cond.notify_all()
            elif os.fsdecode(event.src_path) == self.root:
                with self.cond:
                    self.cond.notify_all()  # the worker's folder check reports it
            return
        self.note(path)

    def note(self, path: str) -> None:
        """A file in the folder changed (or was found): it waits to settle, unless the rules ignore it."""
        relative = os.path.relpath(path, self.root)
        if relative.startswith(os.pardir) or is_ignored(relative):
            return
        if self.pending.add(path, time.monotonic()):
            with self.cond:
                self.cond.notify_all()

    def _note_move(self, source: str, path: str, folder: bool) -> None:
        """A rename inside the folder carries the lineage (into or out of it: an arrival or a departure)."""
        for end in (source, path):
            relative = os.path.relpath(end, self.root)
            if relative.startswith(os.pardir) or is_ignored(relative):
                return
        with self.cond:
            self._moves.append((source, path, folder))
            self.cond.notify_all()

    def request_stop(self, abandon: bool = False) -> None:
        with self.cond:
            self.stop_requested = True
            self.abandon = self.abandon or abandon
            self.cond.notify_all()

    # -- out, on the worker's thread -------------------------------------------------

    def next_turn(self, busy: bool, tick_seconds: float) -> list[str] | None:
        """Wait up to a tick for news unless `busy` (settled files in hand); then the folders asked to be
        scanned, or None once a stop is requested."""
        with self.cond:
            if not self.stop_requested and not busy and not self._scan_requests:
                self.cond.wait(tick_seconds)
            if self.stop_requested:
                return None
            scans, self._scan_requests = self._scan_requests, []
        return scans

    def ask_reconcile(self) -> None:
        """Reconcile at the worker's next turn (a document's name may have changed under the folder's rules)."""
        with self.cond:
            self.reconcile_due = time.monotonic()

    def reconcile_now(self) -> bool:
        """Whether a reconcile asked for by a delete or a move is due: things have settled since."""
        return self.reconcile_due is not None and time.monotonic() >= self.reconcile_due

    def reconciling(self) -> None:
        """A reconcile starts: what asked for one so far is covered by it."""
        with self.cond:
            self.reconcile_due = None

    def take_renames(self) -> dict[tuple[str, str], str]:
        """The renames noted since the last call, by document name: (old name, new name) -> the file now.

        A renamed folder stands for every file in it now; a rename that keeps the document's name (only
        the extension changed) is no rename."""
        with self.cond:
            moves, self._moves = self._moves, []
        pairs: dict[tuple[str, str], str] = {}
        for source, path, folder in moves:
            if printable(source) != source or printable(path) != path:
                continue  # a name that is not UTF-8 is refused, never a document: the reconcile retires the old one
            files = list(walk_files(self.root, path)) if folder else [path]
            names = document_names(self.root, files)
            for now in files:
                new = names[now]
                if folder:  # the files inside moved together: each keeps its last part, under the old folder
                    before = os.path.join(source, os.path.relpath(now, path))
                    old = (PurePath(os.path.relpath(before, self.root)).parent / PurePath(new).name).as_posix()
                else:  # named among the files its old folder held then: without itself there, with the source
                    siblings = set(folder_files(os.path.dirname(source))) - {os.path.basename(path)}
                    old = document_name(os.path.relpath(source, self.root), siblings)
                if old != new:
                    pairs.setdefault((old, new), now)
        return pairs


class _Handler(FileSystemEventHandler):
    """watchdog's callback face: every event goes to the intake, on watchdog's thread."""

    def __init__(self, intake: Intake) -> None:
        self._intake = intake

    def on_any_event(self, event: FileSystemEvent) -> None:
        self._intake.on_fs_event(event)
