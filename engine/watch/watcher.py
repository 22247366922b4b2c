"""Watched-folder auto-ingest: files dropped into a folder become documents of a dataset.

One folder feeds one dataset. watchdog says which paths changed; a single
worker thread decides when a file is finished (its size and mtime unchanged
for `settle_seconds`), gathers finished files into batches and hands each
batch to ONE `ingest` call, so a burst of files costs a few index updates,
not one per file. What happens is reported as small typed events to one
callback, always from the worker thread and in order, so a caller never
needs a lock to print or show them.

Nothing here is lost on a crash: a file is only "handled" once the engine has
committed it, and a restart's start-up scan offers every file again (bytes
already in the dataset come back "unchanged").

Its parts: engine/watch/intake.py (what watchdog's thread hands the worker),
engine/watch/dispatch.py (what the worker tells the dataset), pending.py (the
files waiting to settle, the folder checks), reconcile.py (a folder against its
dataset). Here: the lifecycle and the worker's loop.

UI-free: the CLI prints the events, the TUI shows them.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from ..errors import KxError, Status, invalid, precondition
from ..names import validate_name
from ..text.folders import is_ignored, leads_outside, outside_refusal, walk_files
from .dispatch import Abandoned, Dispatch
from .events import Ingested, Queued, Signature, Unchanged, WatchError, WatchEvent, WatchEventFn, printable_event
from .intake import Intake
from .pending import IngestBackend, check_still_watched, watchable_folder
from .pending import inbox_folder as inbox_folder  # the watcher's default folder: `kx watch` and the TUI ask here
from .pending import made_inbox as made_inbox  # the same, created for a watch to start
from .reconcile import reconcile

DEFAULT_SETTLE_SECONDS = 1.0  # an editor's save or a local copy is quiet well within a second
DEFAULT_TICK_SECONDS = 0.05
DEFAULT_BATCH_FILES = 256
DEFAULT_BATCH_BYTES = 64 * 2**20  # bounds memory: a batch's bytes are all held until it commits
DEFAULT_RESCAN_SECONDS = 60.0  # catches what inotify drops (queue overflow) or never sees (network mounts)


class FolderWatcher:
    """Binds one folder to one dataset: every finished file in it (recursively) becomes a document.

    `start()` checks the folder, starts watchdog's observer and the worker,
    which first scans what is already there. `stop()` stops taking events,
    finishes the batch in hand and joins. A fatal problem (the folder vanished,
    the dataset refuses the batch) is emitted as a fatal `WatchError`, kept in
    `error`, and stops the worker; `wait()` returns then.
    """

    def __init__(
        self,
        engine: IngestBackend,
        dataset: str,
        folder: Path | str,
        on_event: WatchEventFn | None = None,
        *,
        settle_seconds: float = DEFAULT_SETTLE_SECONDS,
        tick_seconds: float = DEFAULT_TICK_SECONDS,
        batch_files: int = DEFAULT_BATCH_FILES,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
        rescan_seconds: float | None = DEFAULT_RESCAN_SECONDS,
        observer_factory: Callable[[], Any] | None = None,
    ) -> None:
        # `not x >= 0` also refuses NaN, which compares false with everything (files would queue forever)
        if (not 0 <= settle_seconds < math.inf or not 0 < tick_seconds < math.inf
                or batch_files < 1 or batch_bytes < 1):
            raise invalid("settle must be a finite number >= 0 seconds, the tick finite and > 0, and batches "
                          "at least one file and byte")
        self.engine = engine
        self.dataset = validate_name(dataset)
        self.folder = Path(folder).expanduser()
        self.settle_seconds = settle_seconds
        self.tick_seconds = tick_seconds
        self.batch_files = batch_files
        self.batch_bytes = batch_bytes
        self.rescan_seconds = rescan_seconds
        self.error: KxError | None = None
        self.abandoned: int | None = None  # the batch given up on request_stop(abandon=True), if one was
        self._on_event = on_event or (lambda _event: None)
        self._observer_factory = observer_factory
        self._intake = Intake(settle_seconds)
        self._dispatch = Dispatch(engine, self.dataset, self._intake, self._emit, batch_files, batch_bytes)
        self._ready: deque[tuple[str, Signature]] = deque()
        self._finished = threading.Event()
        self._worker: threading.Thread | None = None
        self._root = ""
        self._identity: tuple[int, int] = (0, 0)
        self._reported_links: set[str] = set()
        # documents the start scan kept because the folder was empty (reconcile.py): this run never saw their
        # files go, so it never retires them; one whose file comes (back) is an ordinary document again
        self._spared: set[str] = set()

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> None:
        """Check the folder and start watching. Raises KxError when the folder cannot be watched."""
        if self._worker is not None:
            raise RuntimeError("a FolderWatcher starts once; make a new one to watch again")
        root = self.check_folder()
        self._root = self._intake.root = str(root)
        st = os.stat(self._root)
        self._identity = (st.st_dev, st.st_ino)
        # The observer starts before the scan, so a file landing during the scan is seen by one or the other.
        self._intake.start_observer(self._observer_factory)
        self._worker = threading.Thread(target=self._run, name=f"kx-watch-{self.dataset}", daemon=True)
        self._worker.start()

    def request_stop(self, abandon: bool = False) -> None:
        """Ask the worker to stop after the batch in hand; returns at once.

        With `abandon`, the batch in hand is given up at its next safe point
        (between two embedding steps or after a commit): what it already
        committed stays, its other files stay in the folder for the next run
        (`abandoned` then holds the batch's number). It takes a lock: call it
        from ordinary code, never from a signal handler (kx_tui/cli/stopping.py).
        """
        self._intake.request_stop(abandon)

    def stop(self, timeout: float | None = None) -> bool:
        """Stop taking events, finish the batch in hand, join. True when everything has stopped."""
        self.request_stop()
        self._intake.stop_observer()
        worker = self._worker
        if worker is None or worker is threading.current_thread():
            return worker is None
        worker.join(timeout)
        return not worker.is_alive()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the worker has stopped (on request or on a fatal error). True when it has."""
        return self._finished.wait(timeout)

    @property
    def running(self) -> bool:
        return self._worker is not None and not self._finished.is_set()

    @property
    def root(self) -> str:
        """The watched folder, resolved (set by start())."""
        return self._root

    @property
    def batches(self) -> int:
        """How many batches went to the dataset so far."""
        return self._dispatch.batches

    def __enter__(self) -> FolderWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def check_folder(self) -> Path:
        """The folder to watch, resolved; raises KxError (with what to do) when it cannot be watched."""
        return watchable_folder(self.folder, self.engine.settings, self.dataset)

    # -- the worker ---------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._scan(self._root)
            self._dispatch.resume_backlog()
            self._reconcile(at_start=True)  # files gone while nobody watched retire now (unless all are)
            last_scan = time.monotonic()
            while True:
                scans = self._intake.next_turn(bool(self._ready), self.tick_seconds)
                if scans is None:
                    break
                check_still_watched(self._root, self._identity)
                if self.rescan_seconds is not None and time.monotonic() - last_scan >= self.rescan_seconds:
                    scans.append(self._root)
                    last_scan = time.monotonic()
                self._dispatch.rename(self._intake.take_renames())
                for folder in scans:
                    self._scan(folder)
                if self._intake.reconcile_now():
                    self._reconcile()
                polled = self._intake.pending.poll(time.monotonic(), self.settle_seconds)
                for path in polled.queued:
                    self._emit(Queued(path))
                self._ready.extend(polled.settled)
                batch = self._dispatch.take_batch(self._ready)
                if batch:
                    self._dispatch.ingest(batch)
        except Abandoned:
            self.abandoned = self.batches
        except KxError as exc:
            self._fail(exc)
        except Exception as exc:  # a bug or a broken callback: stop loudly rather than spin
            self._fail(KxError(Status.INTERNAL, f"the folder watcher failed ({type(exc).__name__}: {exc}); "
                                                "files not yet ingested stay in the folder for the next run"))
        finally:
            self._finished.set()

    def _fail(self, error: KxError) -> None:
        self.error = error
        self.request_stop()
        try:
            self._emit(WatchError(error.status.name, error.message, fatal=True))
        except Exception:
            pass  # the callback itself is what broke

    def _emit(self, event: WatchEvent) -> None:
        if isinstance(event, (Ingested, Unchanged)):
            self._spared.discard(event.name)   # its file is here now: a later delete of it is seen, and retires
        self._on_event(printable_event(event))  # a file name that is not UTF-8 must not break the caller's output

    def _scan(self, folder: str) -> None:
        if folder != self._root:
            relative = os.path.relpath(folder, self._root)
            if relative.startswith(os.pardir) or is_ignored(relative):  # moved out, or a dot-folder
                return

        def unreadable(exc: OSError) -> None:
            if exc.filename is not None and os.path.abspath(exc.filename) == self._root:
                check_still_watched(self._root, self._identity)  # gone or replaced: say so precisely
                raise precondition(f"the watched folder {self._root} cannot be listed ({exc.strerror}); "
                                   "fix its permissions and start watching it again")
            if isinstance(exc, FileNotFoundError):
                return  # a folder that came and went (a tool's scratch space): nothing to report
            self._emit(WatchError(Status.FAILED_PRECONDITION.name,
                                  f"{exc.filename} cannot be listed ({exc.strerror}); its files are skipped "
                                  "until it can be read", fatal=False, path=exc.filename))

        # the shared rules (engine/text/folders.py): a backlog goes in name order, the same on every run
        for path in walk_files(self._root, folder, on_error=unreadable, on_link=self._report_outside_folder):
            self._intake.note(path)

    def _reconcile(self, at_start: bool = False) -> None:
        """The dataset's documents from this folder whose files are gone: retired, or renamed (reconcile.py);
        at start, an empty folder's are kept instead, and spared for the rest of the run."""
        self._intake.reconciling()
        if at_start:
            self._spared = reconcile(self.engine, self.dataset, self._root, self._emit, at_start=True)
        else:
            reconcile(self.engine, self.dataset, self._root, self._emit, spared=self._spared)

    def _report_outside_folder(self, path: str) -> None:
        """Say once that a linked folder leading out of the watched one is not followed."""
        real = leads_outside(path, self._root)
        if real is None or path in self._reported_links:
            return
        self._reported_links.add(path)
        error = outside_refusal(path, real)
        self._emit(WatchError(error.status.name, error.message, fatal=False, path=path))
