"""`kx datasets watch NAME [DIR]`: ingest every file dropped into a folder, until stopped.

The watching itself is engine.watch.FolderWatcher (the TUI reuses it); this
module only turns its events into lines, and Ctrl-C / SIGTERM into a clean
stop that finishes the batch in hand first.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any, Callable

import click

from .context import CONTEXT_SETTINGS, local_engine

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@click.command("watch", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.argument("folder", required=False, metavar="[DIR]", type=click.Path(path_type=Path))
@click.option("--settle", type=click.FloatRange(0.0, 3600.0), default=None, metavar="SECONDS",
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
    watch carries on. Ctrl-C or SIGTERM stops after the batch in hand.
    """
    from engine.dataset import validate_name
    from engine.embedders import no_embedder_error
    from engine.errors import KxError, Status
    from engine.watch import DEFAULT_SETTLE_SECONDS, FolderWatcher, inbox_folder

    validate_name(name)
    engine = local_engine(ctx)
    if engine.settings.gateway:
        raise KxError(Status.FAILED_PRECONDITION,
                      "kx datasets watch runs the engine in this process (it commits files as they settle); "
                      "run it where the datasets live, without --gateway")
    if engine.model_card() is None:  # fail now, not at the first file dropped in
        raise no_embedder_error("watching a folder")
    if folder is None:
        folder = inbox_folder(engine.settings, name)
        folder.mkdir(parents=True, exist_ok=True)
    settle = DEFAULT_SETTLE_SECONDS if settle is None else settle

    printer = _EventPrinter(as_json)
    watcher = FolderWatcher(engine, name, folder, printer, settle_seconds=settle)
    printer.root = str(watcher.check_folder())
    printer.started(name, printer.root, settle)  # before start(): the start-up scan's events follow it
    watcher.start()

    stopping = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        if stopping.is_set():
            raise KeyboardInterrupt  # asked twice: leave now; committed documents are safe anyway
        stopping.set()
        printer.note(f"stopping after the batch in hand ({signal.Signals(signum).name}; again to quit now)")
        watcher.request_stop()

    previous = _install(on_signal)
    try:
        watcher.wait()
    except KeyboardInterrupt:
        watcher.request_stop()
        raise  # asked twice: no join; the worker is a daemon and every commit so far is whole
    finally:
        _restore(previous)
    watcher.stop()
    printer.stopped(watcher.batches, "error" if watcher.error else "signal")
    if watcher.error is not None:
        raise watcher.error


class _EventPrinter:
    """One line per watcher event on stdout: plain words for a person, JSON objects for scripts."""

    def __init__(self, as_json: bool) -> None:
        from .render import Console

        self.as_json = as_json
        self.root = ""
        self.totals = {"added": 0, "unchanged": 0, "refused": 0, "passages_added": 0}
        self._out = Console()
        self._err = Console(stderr=True)
        self._lock = threading.Lock()  # the worker and a signal handler may both print

    def __call__(self, event: Any) -> None:
        from engine.watch import BatchDone

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

    def stopped(self, batches: int, reason: str) -> None:
        t = self.totals
        if self.as_json:
            self._json({"event": "stopped", "reason": reason, "batches": batches, **t})
        else:
            self._print(f"stopped after {batches} batch{'' if batches == 1 else 'es'}: {t['added']} added "
                        f"({t['passages_added']:,} passages), {t['unchanged']} unchanged, {t['refused']} refused")

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

    def _words(self, event: Any) -> str | None:
        from .describe import describe_watch_event

        return describe_watch_event(event, self._relative(getattr(event, "path", None) or ""))

    def _relative(self, path: str) -> str:
        if self.root and path.startswith(self.root + os.sep):
            return path[len(self.root) + 1:]
        return path


def _install(handler: Callable[[int, Any], None]) -> dict[int, Any]:
    """Route Ctrl-C and SIGTERM to `handler`; only the main thread may (elsewhere they stay as they are)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, handler) for sig in _STOP_SIGNALS}


def _restore(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)
