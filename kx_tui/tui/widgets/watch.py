"""The watch panel: it owns the folder watcher of the selected dataset's inbox and shows what it does.

The watcher (engine.watch.watcher.FolderWatcher) runs on its own threads; its events
reach the panel as one typed message each (kx_tui/tui/messages.py). A burst of
"queued" events coalesces in the message queue into a count. The watcher is
stopped when the panel is unmounted, so quitting never leaves it running.
`WatchBatchDone` and `WatchLineageChanged` (a file retired or renamed) bubble
on to the screen, which reloads the dataset counts.
"""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path
from typing import Any, Iterable, Sequence

from rich.markup import escape
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from engine.backend import Backend
from engine.config import Settings
from engine.errors import KxError, Status
from engine.in_process import InProcessBackend
from engine.records import DocumentSummary, EmbedReport, IngestEventFn, IngestReport
from engine.text.inputs import DocumentInput
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
    WatchEvent,
)
from engine.watch.watcher import FolderWatcher, made_inbox

from ...describe import describe_watch_event
from ..messages import (
    WatchBatchDone,
    WatchFailed,
    WatchFileDone,
    WatchFolderEmpty,
    WatchLineageChanged,
    WatchQueued,
)
from .activity import ActivityLog

_NEEDS_LOCAL = "watching a folder needs the in-process engine (not a gateway)"


def _shown_folder(folder: Path) -> str:
    """The watched folder as the header names it (the snapshot tests pin it: a test's home is a new folder)."""
    return str(folder)


class _LocalIngest:
    """A Backend with the local settings it was opened with: what the watcher needs (pending.IngestBackend)."""

    def __init__(self, backend: Backend, settings: Settings) -> None:
        # The app is given settings only with an in-process backend; that class is what retires and renames
        # (a gateway's KxClient does not), so say it here, once, instead of trusting it at each call.
        if not isinstance(backend, InProcessBackend):
            raise KxError(Status.FAILED_PRECONDITION, _NEEDS_LOCAL)
        self.backend = backend   # a Backend and an InProcessBackend
        self.settings = settings

    def ingest(self, name: str, documents: Iterable[DocumentInput], vectors: Any = None,
               on_event: IngestEventFn | None = None) -> IngestReport:
        return self.backend.ingest(name, documents, vectors, on_event)

    def embed(self, name: str, on_event: IngestEventFn | None = None) -> EmbedReport:
        return self.backend.embed(name, on_event=on_event)   # the watcher embeds a batch's backlog behind it

    def list_documents(self, name: str, offset: int = 0, limit: int = 100,
                       versions: str | None = None) -> list[DocumentSummary]:
        return self.backend.list_documents(name, offset=offset, limit=limit, versions=versions)

    def retire(self, name: str, lineages: Sequence[str]) -> list[str]:
        return self.backend.retire(name, lineages)   # files deleted from the folder retire their documents

    def rename(self, name: str, moves: Sequence[tuple[str, str, str | None]]) -> list[str]:
        return self.backend.rename(name, moves)   # a file renamed in the folder keeps its versions

    def copies(self, name: str) -> dict[str, tuple[str, str | None]]:
        return self.backend.copies(name)   # copies' names, which the listing shows under another file's


class WatchPanel(Vertical):
    """Hidden until a watch starts: a header line (folder, dataset, files waiting) over the activity log."""

    DEFAULT_CSS = """
    WatchPanel { height: auto; display: none; border-top: solid $primary-darken-2; }
    WatchPanel.-watching, WatchPanel.-stopped { display: block; }
    WatchPanel > #watch-header { height: auto; max-height: 2; padding: 0 1; color: $text-muted; }
    WatchPanel > ActivityLog { height: 7; border-top: none; }
    """

    def __init__(self, backend: Backend, settings: Settings | None, *, settle_seconds: float = 1.0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.backend = backend
        self.settings = settings
        self.settle_seconds = settle_seconds
        self.watcher: FolderWatcher | None = None
        self._waiting: set[str] = set()
        self._waiting_lock = threading.Lock()   # the observer's and the worker's threads both report

    def compose(self) -> ComposeResult:
        yield Static("", id="watch-header")
        yield ActivityLog()

    @property
    def watching(self) -> bool:
        return self.watcher is not None

    @property
    def dataset(self) -> str | None:
        return None if self.watcher is None else self.watcher.dataset

    def start(self, dataset: str) -> None:
        """Watch `dataset`'s inbox ($KX_HOME/inbox/NAME); a problem is a notification, not a crash."""
        self.stop()
        if self.settings is None:
            self.notify(_NEEDS_LOCAL, severity="warning")
            return
        try:
            folder = made_inbox(self.settings, dataset, "then press w again")
        except KxError as exc:   # a file where the folder goes, a home kx cannot write to: said, not raised
            self.notify(exc.message, severity="error", timeout=10)
            return
        try:
            watcher = FolderWatcher(_LocalIngest(self.backend, self.settings), dataset, folder, self._on_event,
                                    settle_seconds=self.settle_seconds)
            watcher.start()
        except KxError as exc:
            self.notify(exc.message, severity="error")
            return
        self.watcher = watcher
        self.set_class(True, "-watching")
        self.set_class(False, "-stopped")
        self._show_header(0)   # the header says what is watched; the log has only what happens

    def stop(self) -> None:
        watcher, self.watcher = self.watcher, None
        if watcher is None:
            return
        # stop() finishes the batch in hand (seconds of embedding) and joins: on a worker, never on the UI thread,
        # which would freeze meanwhile; the batch's own lines still arrive as it ends
        self.run_worker(partial(watcher.stop, timeout=5), name="stop_watch", group="watch-stop", thread=True,
                        exit_on_error=False)
        with self._waiting_lock:
            self._waiting.clear()
        self.set_class(False, "-watching")
        self.set_class(True, "-stopped")
        self.log_line(f"stopped watching {escape(str(watcher.folder))}")
        self.query_one("#watch-header", Static).update(f"not watching (w watches {escape(watcher.dataset)}'s "
                                                       "inbox again)")

    def on_unmount(self) -> None:
        if self.watcher is not None:  # the app is leaving: give the batch in hand up at its next safe point
            self.watcher.request_stop(abandon=True)
            self.watcher.stop(timeout=5)
            self.watcher = None

    def log_line(self, line: str) -> None:
        self.query_one(ActivityLog).add(line)

    # -- the watcher's threads ------------------------------------------------------

    def _on_event(self, event: WatchEvent) -> None:
        """Called on the watcher's threads: one message per event (post_message is thread-safe)."""
        if isinstance(event, Queued):
            with self._waiting_lock:
                self._waiting.add(event.path)
                waiting = len(self._waiting)
            self.post_message(WatchQueued(event.path, waiting))
        elif isinstance(event, (Ingested, Unchanged, Refused)):
            with self._waiting_lock:
                self._waiting.discard(event.path)
                waiting = len(self._waiting)
            self.post_message(WatchFileDone(event, waiting))
        elif isinstance(event, BatchDone):
            self.post_message(WatchBatchDone(event))
        elif isinstance(event, (Retired, Renamed)):
            self.post_message(WatchLineageChanged(event))
        elif isinstance(event, FolderEmpty):
            self.post_message(WatchFolderEmpty(event))
        elif isinstance(event, WatchError):
            self.post_message(WatchFailed(event))

    # -- on the UI thread -----------------------------------------------------------

    def _show_header(self, waiting: int) -> None:
        if self.watcher is None:
            return
        line = f"watching {escape(_shown_folder(self.watcher.folder))} → [b]{escape(self.watcher.dataset)}[/b]"
        if waiting:
            line += f" · {waiting} file{'' if waiting == 1 else 's'} settling"
        self.query_one("#watch-header", Static).update(line)

    def _where(self, path: str) -> str:
        folder = str(self.watcher.folder) if self.watcher is not None else ""
        return path[len(folder) + 1:] if folder and path.startswith(folder + "/") else Path(path).name

    def on_watch_queued(self, message: WatchQueued) -> None:
        self._show_header(message.waiting)

    def on_watch_file_done(self, message: WatchFileDone) -> None:
        line = describe_watch_event(message.event, self._where(message.event.path))
        if line:
            self.log_line(line)
        self._show_header(message.waiting)

    def on_watch_lineage_changed(self, message: WatchLineageChanged) -> None:
        line = describe_watch_event(message.event, self._where(message.event.path))
        if line:
            self.log_line(line)  # and it bubbles on: the screen reloads the dataset's counts

    def on_watch_folder_empty(self, message: WatchFolderEmpty) -> None:
        line = describe_watch_event(message.event, self._where(message.event.path))
        if line:
            self.log_line(line)
        # said aloud as well: a person who emptied the folder on purpose must learn that nothing was retired
        self.notify(f"the watched folder is empty; the dataset's {message.event.documents:,} document(s) from it "
                    "were kept, not retired", title="watch", severity="warning", timeout=10)

    def on_watch_batch_done(self, message: WatchBatchDone) -> None:
        line = describe_watch_event(message.event, "")
        if line:
            self.log_line(line)  # and it bubbles on: the screen reloads the dataset's counts

    def on_watch_failed(self, message: WatchFailed) -> None:
        event = message.event
        line = describe_watch_event(event, event.path or "")
        if line:
            self.log_line(line)
        if event.fatal:
            self.log_line(f"[red]error    [/] {escape(event.message)}")
            self.notify(event.message, title="watch stopped", severity="error", timeout=10)
            self.stop()
