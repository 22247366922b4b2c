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

UI-free: the CLI prints the events, the TUI shows them.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

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

from ..errors import KxError, Status, invalid, not_found, precondition
from ..names import validate_name
from ..records import DocumentStatus
from ..text.folders import document_name, is_ignored, walk_files
from ..text.inputs import DocumentInput, from_file
from .events import (
    BatchDone,
    BatchStarted,
    Ingested,
    Queued,
    Refused,
    Renamed,
    Retired,
    Signature,
    Unchanged,
    WatchError,
    WatchEvent,
    WatchEventFn,
)
from .pending import IngestBackend, PendingFiles, file_signature, inbox_folder, leads_outside, outside_refusal

DEFAULT_SETTLE_SECONDS = 1.0  # an editor's save or a local copy is quiet well within a second
DEFAULT_TICK_SECONDS = 0.05
DEFAULT_BATCH_FILES = 256
DEFAULT_BATCH_BYTES = 64 * 2**20  # bounds memory: a batch's bytes are all held until it commits
DEFAULT_RESCAN_SECONDS = 60.0  # catches what inotify drops (queue overflow) or never sees (network mounts)




# -- the watcher -------------------------------------------------------------------


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
        if settle_seconds < 0 or tick_seconds <= 0 or batch_files < 1 or batch_bytes < 1:
            raise invalid("settle must be >= 0 seconds, the tick > 0, and batches at least one file and byte")
        self.engine = engine
        self.dataset = validate_name(dataset)
        self.folder = Path(folder).expanduser()
        self.settle_seconds = settle_seconds
        self.tick_seconds = tick_seconds
        self.batch_files = batch_files
        self.batch_bytes = batch_bytes
        self.rescan_seconds = rescan_seconds
        self.error: KxError | None = None
        self.batches = 0
        self._on_event = on_event or (lambda _event: None)
        self._observer_factory = observer_factory
        self._pending = PendingFiles()
        self._ready: deque[tuple[str, Signature]] = deque()
        self._cond = threading.Condition()
        self._stop_requested = False
        self._abandon = False
        self.abandoned: int | None = None  # the batch given up on request_stop(abandon=True), if one was
        self._scan_requests: list[str] = []
        self._finished = threading.Event()
        self._observer: Any = None
        self._worker: threading.Thread | None = None
        self._root = ""
        self._identity: tuple[int, int] = (0, 0)
        self._reported_links: set[str] = set()
        self._reconcile_due: float | None = None  # a file or folder went away: retire what left, once settled
        self._moves: list[tuple[str, str, bool]] = []  # (from, to, a folder?) renames inside the folder

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> None:
        """Check the folder and start watching. Raises KxError when the folder cannot be watched."""
        if self._worker is not None:
            raise RuntimeError("a FolderWatcher starts once; make a new one to watch again")
        root = self.check_folder()
        self._root = str(root)
        st = os.stat(self._root)
        self._identity = (st.st_dev, st.st_ino)
        # The observer starts before the scan, so a file landing during the scan is seen by one or the other.
        self._observer = self._start_observer()
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
        with self._cond:
            self._stop_requested = True
            self._abandon = self._abandon or abandon
            self._cond.notify_all()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop taking events, finish the batch in hand, join. True when everything has stopped."""
        self.request_stop()
        self._stop_observer()
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

    def __enter__(self) -> FolderWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the folder ---------------------------------------------------------------

    def check_folder(self) -> Path:
        """The folder to watch, resolved; raises KxError (with what to do) when it cannot be watched."""
        folder = self.folder
        try:
            root = folder.resolve(strict=True)
        except FileNotFoundError:
            raise not_found(f"the folder {folder} does not exist; create it, or pick another folder "
                            f"(without one, kx watches its inbox {inbox_folder(self.engine.settings, self.dataset)})"
                            ) from None
        except OSError as exc:
            raise precondition(f"the folder {folder} cannot be opened ({exc.strerror}); check the path") from None
        if not root.is_dir():
            raise precondition(f"{folder} is a file, not a folder; watch the folder it lies in, "
                               f"or add it once with: kx datasets ingest {self.dataset} --file {folder}")
        if not os.access(root, os.R_OK | os.X_OK):
            raise precondition(f"the folder {root} cannot be read (permission denied); fix its permissions")
        datasets = self.engine.settings.datasets_dir.resolve()
        if root == datasets or root in datasets.parents or datasets in root.parents:
            # kx's own files would feed back into the watch: every ingest would change what is watched
            raise invalid(f"the folder {root} holds kx's datasets ({datasets}) or lies inside them; watch a "
                          f"folder of your own, e.g. the inbox {inbox_folder(self.engine.settings, self.dataset)}")
        return root

    def _check_folder(self) -> None:
        """The watched folder is still there and still the one we watch; raises KxError if not."""
        restart = "then start watching it again"
        try:
            st = os.stat(self._root)
        except FileNotFoundError:
            raise not_found(f"the watched folder {self._root} no longer exists (deleted or moved away); "
                            f"recreate it, {restart}") from None
        except OSError as exc:
            raise precondition(f"the watched folder {self._root} cannot be read ({exc.strerror}); "
                               f"fix it, {restart}") from None
        if not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) != self._identity:
            # a new folder under the old name is not the one the observer follows
            raise precondition(f"the watched folder {self._root} was replaced by something else; {restart}")
        if not os.access(self._root, os.R_OK | os.X_OK):
            raise precondition(f"the watched folder {self._root} can no longer be read (permission denied); "
                               f"fix its permissions, {restart}")

    def _start_observer(self) -> Any:
        if self._observer_factory is None:
            from watchdog.observers import Observer

            observer = Observer()
        else:
            observer = self._observer_factory()
        try:
            observer.schedule(_Handler(self), self._root, recursive=True, event_filter=list(_WATCHED_EVENTS))
            observer.start()
        except OSError as exc:
            raise precondition(
                f"cannot watch {self._root} ({exc.strerror or exc}); on Linux, raise the inotify limits "
                "(sysctl fs.inotify.max_user_watches / max_user_instances) and try again"
            ) from None
        return observer

    def _stop_observer(self) -> None:
        observer, self._observer = self._observer, None
        if observer is None:
            return
        try:
            observer.stop()
            observer.join(timeout=5)
        except Exception:  # a watch on a folder that vanished may fail to unschedule; nothing to keep
            pass

    # -- events in (watchdog's thread) --------------------------------------------

    def _on_fs_event(self, event: Any) -> None:
        if self._stop_requested:
            return
        moved = event.event_type == "moved"
        path = os.fsdecode(event.dest_path if moved else event.src_path)
        if moved or event.event_type == "deleted":  # something left (or left its old name): check once settled
            with self._cond:
                self._reconcile_due = time.monotonic() + self.settle_seconds
        if moved:
            self._note_move(os.fsdecode(event.src_path), path, event.is_directory)
        if event.is_directory:
            if event.event_type in ("created", "moved"):
                # files written into a new folder before its watch existed are only found by looking
                with self._cond:
                    self._scan_requests.append(path)
                    self._cond.notify_all()
            elif os.fsdecode(event.src_path) == self._root:
                with self._cond:
                    self._cond.notify_all()  # the worker's folder check reports it
            return
        self._note(path)

    def _note_move(self, source: str, path: str, folder: bool) -> None:
        """A rename inside the folder carries the lineage (into or out of it: an arrival or a departure)."""
        for end in (source, path):
            relative = os.path.relpath(end, self._root)
            if relative.startswith(os.pardir) or is_ignored(relative):
                return
        with self._cond:
            self._moves.append((source, path, folder))
            self._cond.notify_all()

    def _apply_moves(self) -> None:
        """Tell the dataset about renames, before the renamed files' (unchanged) bytes come round."""
        with self._cond:
            moves, self._moves = self._moves, []
        if not moves:
            return
        pairs: dict[tuple[str, str], str] = {}
        for source, path, folder in moves:
            for now in (walk_files(self._root, path) if folder else [path]):
                before = os.path.join(source, os.path.relpath(now, path)) if folder else source
                old = document_name(os.path.relpath(before, self._root))
                new = document_name(os.path.relpath(now, self._root))
                if old != new:
                    pairs.setdefault((old, new), now)
        if not pairs:
            return
        try:
            moved = set(self.engine.rename(self.dataset, [(old, new, now) for (old, new), now in pairs.items()]))
        except KxError as exc:
            if exc.status is Status.NOT_FOUND:  # no dataset yet: nothing to carry
                return
            raise
        for (old, new), now in pairs.items():
            if old in moved:
                moved.discard(old)
                self._emit(Renamed(now, new, old))

    def _note(self, path: str) -> None:
        relative = os.path.relpath(path, self._root)
        if relative.startswith(os.pardir) or is_ignored(relative):
            return
        if self._pending.add(path, time.monotonic()):
            with self._cond:
                self._cond.notify_all()

    # -- the worker ---------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._scan(self._root)
            self._resume_backlog()
            self._reconcile()  # files gone while nobody watched retire now
            last_scan = time.monotonic()
            while True:
                with self._cond:
                    if not self._stop_requested and not self._ready and not self._scan_requests:
                        self._cond.wait(self.tick_seconds)
                    if self._stop_requested:
                        break
                    scans, self._scan_requests = self._scan_requests, []
                self._check_folder()
                if self.rescan_seconds is not None and time.monotonic() - last_scan >= self.rescan_seconds:
                    scans.append(self._root)
                    last_scan = time.monotonic()
                self._apply_moves()
                for folder in scans:
                    self._scan(folder)
                if self._reconcile_due is not None and time.monotonic() >= self._reconcile_due:
                    self._reconcile()
                polled = self._pending.poll(time.monotonic(), self.settle_seconds)
                for path in polled.queued:
                    self._emit(Queued(path))
                self._ready.extend(polled.settled)
                batch = self._take_batch()
                if batch:
                    self._ingest(batch)
        except _Abandoned:
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
        self._on_event(event)

    def _scan(self, folder: str) -> None:
        if folder != self._root:
            relative = os.path.relpath(folder, self._root)
            if relative.startswith(os.pardir) or is_ignored(relative):  # moved out, or a dot-folder
                return

        def unreadable(exc: OSError) -> None:
            if exc.filename is not None and os.path.abspath(exc.filename) == self._root:
                self._check_folder()  # gone or replaced: say so precisely
                raise precondition(f"the watched folder {self._root} cannot be listed ({exc.strerror}); "
                                   "fix its permissions and start watching it again")
            if isinstance(exc, FileNotFoundError):
                return  # a folder that came and went (a tool's scratch space): nothing to report
            self._emit(WatchError(Status.FAILED_PRECONDITION.name,
                                  f"{exc.filename} cannot be listed ({exc.strerror}); its files are skipped "
                                  "until it can be read", fatal=False, path=exc.filename))

        # the shared rules (engine/text/folders.py): a backlog goes in name order, the same on every run
        for path in walk_files(self._root, folder, on_error=unreadable, on_link=self._report_outside_folder):
            self._note(path)

    def _reconcile(self) -> None:
        """Retire the documents of this folder whose files are gone (deleted, or moved out or away); one whose
        current bytes are now a file under another name in the folder was renamed unseen (while nobody
        watched, or reported as a delete and a create): its lineage moves there instead."""
        with self._cond:
            self._reconcile_due = None
        present = {document_name(os.path.relpath(path, self._root)): path for path in walk_files(self._root)}
        inside = self._root.rstrip(os.sep) + os.sep
        gone: dict[str, tuple[str, str]] = {}   # name -> (source path, current ref)
        live: dict[str, str] = {}               # name -> current ref, every lineage shown
        offset = 0
        try:
            while True:
                page = self.engine.list_documents(self.dataset, offset, 1000)
                live.update({d.name: d.ref for d in page})
                gone.update({d.name: (d.source_path, d.ref) for d in page if d.source_path
                             and d.source_path.startswith(inside) and d.name not in present})
                if len(page) < 1000:
                    break
                offset += len(page)
        except KxError as exc:
            if exc.status is Status.NOT_FOUND:  # no dataset yet: nothing to retire
                return
            raise
        if not gone:
            return
        moves = self._unseen_renames(gone, present, live)
        if moves:
            moved = set(self.engine.rename(self.dataset, moves))
            for old, new, path in moves:
                if old in moved:
                    gone.pop(old, None)
                    self._emit(Renamed(path, new, old))
        if gone:
            for name in self.engine.retire(self.dataset, sorted(gone)):
                self._emit(Retired(gone[name][0], name))

    def _unseen_renames(self, gone: dict[str, tuple[str, str]], present: dict[str, str],
                        live: dict[str, str]) -> list[tuple[str, str, str]]:
        """(old name, new name, path) for gone documents whose current bytes a present file holds: one the
        dataset has under its new name already, or (read and hashed here) one it does not know yet."""
        import hashlib

        wanted = {ref: name for name, (_path, ref) in gone.items()}
        moves = []
        for name, path in present.items():
            if not wanted:
                break
            ref = live.get(name)
            if ref is None:   # not in the dataset yet
                try:
                    if os.path.getsize(path) > self.engine.settings.max_document_bytes:
                        continue
                    with open(path, "rb") as handle:
                        ref = hashlib.sha256(handle.read()).hexdigest()
                except OSError:
                    continue
            old = wanted.pop(ref, None)
            if old is not None:
                moves.append((old, name, path))
        return moves

    def _report_outside_folder(self, path: str) -> None:
        """Say once that a linked folder leading out of the watched one is not followed."""
        real = leads_outside(path, self._root)
        if real is None or path in self._reported_links:
            return
        self._reported_links.add(path)
        error = outside_refusal(path, real)
        self._emit(WatchError(error.status.name, error.message, fatal=False, path=path))

    def _take_batch(self) -> list[tuple[str, Signature, DocumentInput]]:
        batch: list[tuple[str, Signature, DocumentInput]] = []
        size = 0
        limit = self.engine.settings.max_document_bytes
        while self._ready and len(batch) < self.batch_files:
            path, signature = self._ready[0]
            cost = signature[0] if signature[0] <= limit else 0  # too large: refused unread
            if batch and size + cost > self.batch_bytes:
                break
            self._ready.popleft()
            doc = self._read(path, signature, limit)
            if doc is not None:
                batch.append((path, signature, doc))
                size += cost
        return batch

    def _read(self, path: str, signature: Signature, limit: int) -> DocumentInput | None:
        """The file's document, or None when it vanished or changed since it settled (it settles again)."""
        if file_signature(path) != signature:
            self._note(path)
            return None
        real = leads_outside(path, self._root)
        if real is not None:  # refused unread: the event says where the link leads
            name = Path(path).stem or Path(path).name
            return DocumentInput(name, source_path=path, error=outside_refusal(path, real))
        doc = from_file(path, limit)
        if doc.error is not None and doc.error.status is Status.NOT_FOUND:
            return None
        doc = replace(doc, name=document_name(os.path.relpath(path, self._root)))
        if file_signature(path) != signature:  # written to while we read it: not the bytes that settled
            self._note(path)
            return None
        return doc

    def _resume_backlog(self) -> None:
        """Finish the embedding an earlier ingest of this dataset left (a stop, a crash) before new files."""
        try:
            self.engine.embed(self.dataset, on_event=self._abandon_point)
        except KxError as exc:
            if exc.status is not Status.NOT_FOUND:  # no dataset yet: nothing waits
                raise

    def _abandon_point(self, _event: object) -> None:
        """The ingest's progress callback: a safe point to give the batch up at, when asked to."""
        if self._abandon:
            raise _Abandoned

    def _ingest(self, batch: Sequence[tuple[str, Signature, DocumentInput]]) -> None:
        self.batches += 1
        number = self.batches
        self._emit(BatchStarted(number, len(batch)))
        started = time.monotonic()
        report = self.engine.ingest(self.dataset, [doc for _, _, doc in batch], on_event=self._abandon_point)
        if len(report.results) != len(batch):
            raise KxError(Status.INTERNAL, f"ingest answered {len(report.results)} results for {len(batch)} files")
        for (path, signature, _doc), result in zip(batch, report.results):
            self._pending.handled(path, signature)
            if result.status == DocumentStatus.ADDED:
                self._emit(Ingested(path, result.name, result.ref or "", result.passages, number))
            elif result.status == DocumentStatus.UNCHANGED:
                self._emit(Unchanged(path, result.name, result.ref or "", result.passages, number))
            else:
                self._emit(Refused(path, result.name, result.code or Status.INVALID_ARGUMENT.name,
                                   result.reason or "refused", number))
        self._emit(BatchDone(
            batch=number,
            files=len(batch),
            added=report.count(DocumentStatus.ADDED),
            unchanged=report.count(DocumentStatus.UNCHANGED),
            refused=len(batch) - report.count(DocumentStatus.ADDED) - report.count(DocumentStatus.UNCHANGED),
            passages_added=sum(r.passages for r in report.results if r.status == DocumentStatus.ADDED),
            documents=report.documents,
            passages=report.passages,
            seconds=round(time.monotonic() - started, 3),
        ))


class _Abandoned(Exception):
    """Raised through the engine's ingest, between two of its steps, to give up the batch in hand."""


# Directory modifications and opens/reads are noise here; a file's own events and
# folders arriving or vanishing are all the worker needs.
_WATCHED_EVENTS = (FileCreatedEvent, FileModifiedEvent, FileMovedEvent, FileClosedEvent, FileAttribEvent,
                   FileDeletedEvent, DirCreatedEvent, DirMovedEvent, DirDeletedEvent)


class _Handler(FileSystemEventHandler):
    """watchdog's callback face: every event goes to the watcher, on watchdog's thread."""

    def __init__(self, watcher: FolderWatcher) -> None:
        self._watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        self._watcher._on_fs_event(event)
