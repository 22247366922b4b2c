"""`kx datasets watch NAME [DIR]`: ingest every file dropped into a folder, until stopped.

The watching itself is engine.watch.watcher.FolderWatcher (the TUI reuses it); this
module only turns its events into lines, and Ctrl-C / SIGTERM into a clean
stop that finishes the batch in hand first.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .context import CONTEXT_SETTINGS, FiniteFloatRange, local_engine
from .stopping import GIVE_UP_SECONDS, StopSignals, leave_now_if_helpers_remain

if TYPE_CHECKING:  # the watcher is imported when the command runs, not when `kx --help` is drawn
    from engine.watch.events import WatchEvent
    from engine.watch.watcher import FolderWatcher

_POLL_SECONDS = 0.1     # how often the main thread looks at the stop requests while it waits
_FINISH_SECONDS = 2.0   # after a stop request, how long the batch in hand may take to finish before it is given up
_GIVE_UP_SECONDS = GIVE_UP_SECONDS  # after a stop request, the process leaves whatever it is blocked in


@click.command("watch", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.argument("folder", required=False, metavar="[DIR]", type=click.Path(path_type=Path))
@click.option("--settle", type=FiniteFloatRange(0.0, 3600.0), default=None, metavar="SECONDS",
              help="How long a file's size and modification time must stay unchanged before it is ingested "
                   "(default 1.0; raise it for slow copies, e.g. over a network).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per event, one per line, for scripts.")
@click.pass_context
def watch(ctx: click.Context, name: str, folder: Path | None, settle: float | None, as_json: bool) -> None:
    """Watch folder DIR and ingest every file that lands in it into dataset NAME, until Ctrl-C.

    Without DIR, kx watches its inbox for NAME ($KX_HOME/inbox/NAME, created
    on demand). Files already there are ingested at start; a file still being
    written goes in once it has settled. Hidden and temporary files (dot-files,
    .swp, .part, .crdownload, ~$..., .~lock...) are ignored. Bytes already in
    the dataset are "unchanged"; a file edited in place becomes a new
    document. A file that cannot be read is refused with its reason and the
    watch carries on. Ctrl-C or SIGTERM stops after the batch in hand, or
    gives that batch up at a safe point if it takes more than a few seconds
    (what it committed stays; its other files go in on the next run).
    """
    from engine.embedding.embedders import no_embedder_error
    from engine.errors import KxError, Status
    from engine.names import validate_name
    from engine.watch.watcher import DEFAULT_SETTLE_SECONDS, FolderWatcher, made_inbox

    validate_name(name)
    # From here on Ctrl-C and SIGTERM are only counted; the waiting loop acts on them, and the
    # guard thread bounds the whole stop (kx_tui/cli/stopping.py).
    with StopSignals(give_up_after=_GIVE_UP_SECONDS, exit_code=0,
                     last_words="kx datasets watch: the batch in hand did not stop in time; leaving now "
                                "(committed documents are kept; its other files stay for the next run)") as stop:
        engine = local_engine(ctx)
        if engine.settings.gateway:
            raise KxError(Status.FAILED_PRECONDITION,
                          "kx datasets watch runs the engine in this process (it commits files as they settle); "
                          "run it where the datasets live, without --gateway")
        if engine.model_card() is None:  # fail now, not at the first file dropped in
            raise no_embedder_error("watching a folder")
        if folder is None:
            folder = made_inbox(engine.settings, name, "or name a folder to watch: kx datasets watch NAME DIR")
        settle = DEFAULT_SETTLE_SECONDS if settle is None else settle

        printer = _EventPrinter(as_json)
        watcher = FolderWatcher(engine, name, folder, printer, settle_seconds=settle)
        printer.root = str(watcher.check_folder())
        printer.started(name, printer.root, settle)  # before start(): the start-up scan's events follow it
        watcher.start()
        _wait_for_stop(watcher, printer, stop)
        watcher.stop()
        printer.stopped(watcher.batches, "error" if watcher.error else "signal", watcher.abandoned)
    if watcher.error is not None:
        raise watcher.error
    if stop.count:  # every commit is whole by now; nothing left is worth waiting for (kx_tui/cli/stopping.py)
        leave_now_if_helpers_remain(0)


def _wait_for_stop(watcher: FolderWatcher, printer: _EventPrinter, stop: StopSignals) -> None:
    """Wait, in short steps, until the watcher ends: on a fatal error, or after Ctrl-C / SIGTERM.

    The first signal asks for a stop after the batch in hand; if that batch
    is still going `_FINISH_SECONDS` later, or a second signal comes, it is
    abandoned at its next safe point (its committed documents stay, its other
    files stay in the folder). The signal handler itself only counts
    (kx_tui/cli/stopping.py): everything here runs as ordinary code.
    """
    seen = 0
    abandon_at: float | None = None
    abandoning = False
    while not watcher.wait(_POLL_SECONDS):
        if stop.count > seen:
            if seen == 0:
                printer.note(f"stopping after the batch in hand ({stop.name}; again to give that batch up now)")
                watcher.request_stop()
                abandon_at = time.monotonic() + _FINISH_SECONDS
            seen = stop.count
            if seen > 1 and not abandoning:
                abandon_at = time.monotonic()
        if abandon_at is not None and not abandoning and time.monotonic() >= abandon_at:
            abandoning = True
            printer.note("giving up the batch in hand: what it committed stays, its other files are "
                         "ingested on the next run")
            watcher.request_stop(abandon=True)


class _EventPrinter:
    """One line per watcher event on stdout: plain words for a person, JSON objects for scripts."""

    def __init__(self, as_json: bool) -> None:
        from ..render import Console

        self.as_json = as_json
        self.root = ""
        self.totals = {"added": 0, "unchanged": 0, "refused": 0, "passages_added": 0}
        self._out = Console()
        self._err = Console(stderr=True)
        self._lock = threading.Lock()  # the worker and the main thread may both print

    def __call__(self, event: WatchEvent) -> None:
        from engine.watch.events import BatchDone

        if isinstance(event, BatchDone):
            for key in self.totals:
                self.totals[key] += getattr(event, key)
        if self.as_json:
            self._json(event.to_dict())
        else:
            line = self._words(event)
            if line is not None:
                self._print(line)

    def started(self, dataset: str, folder: str, settle: float) -> None:
        if self.as_json:
            self._json({"event": "watching", "dataset": dataset, "folder": folder, "settle_seconds": settle,
                        "pid": os.getpid()})
        else:
            from rich.markup import escape

            self._print(f"watching [bold]{escape(folder)}[/] for dataset [bold]{escape(dataset)}[/] "
                        f"(settle {settle:g} s); Ctrl-C to stop")

    def stopped(self, batches: int, reason: str, abandoned: int | None = None) -> None:
        t = self.totals
        if self.as_json:
            self._json({"event": "stopped", "reason": reason, "batches": batches, "abandoned_batch": abandoned, **t})
        else:
            given_up = f"; batch {abandoned} given up, its files go in on the next run" if abandoned else ""
            self._print(f"stopped after {batches} batch{'' if batches == 1 else 'es'}: {t['added']} added "
                        f"({t['passages_added']:,} passages), {t['unchanged']} unchanged, {t['refused']} refused"
                        f"{given_up}")

    def note(self, message: str) -> None:
        from rich.markup import escape

        with self._lock:
            self._err.print(escape(message))

    def _json(self, data: dict[str, Any]) -> None:
        with self._lock:
            click.echo(json.dumps(data, ensure_ascii=False))  # click.echo flushes: a reader sees each line now

    def _print(self, line: str) -> None:
        with self._lock:
            self._out.print(line)

    def _words(self, event: WatchEvent) -> str | None:
        from ..describe import describe_watch_event
        from ..render import terminal_safe

        line = describe_watch_event(event, self._relative(getattr(event, "path", None) or ""))
        # one line per event: a newline in a file's name (refused, and named twice in its line) is shown, not obeyed
        return None if line is None else terminal_safe(line)

    def _relative(self, path: str) -> str:
        if self.root and path.startswith(self.root + os.sep):
            return path[len(self.root) + 1:]
        return path


