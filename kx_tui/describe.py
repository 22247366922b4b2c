"""One line of rich markup per folder-watcher event, for `kx datasets watch` and the TUI's panel alike."""

from __future__ import annotations

from rich.markup import escape

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


def describe_watch_event(event: WatchEvent, where: str) -> str | None:
    """The line for `event`, naming its file as `where`; None for events that need no line of their own.

    A batch starting says nothing (its files' lines follow), nor does a fatal
    error: whoever stops the watcher reports that once, its own way.
    """
    shown = escape(where)
    if isinstance(event, Queued):
        return f"[dim]queued   [/] {shown}"
    if isinstance(event, Ingested):
        return f"[green]added    [/] {shown} ({event.passages} passage{'' if event.passages == 1 else 's'})"
    if isinstance(event, Unchanged):
        return f"[dim]unchanged[/] {shown}"
    if isinstance(event, Refused):
        return f"[red]refused  [/] {shown}: {escape(event.reason)}"
    if isinstance(event, Retired):
        return f"[yellow]retired  [/] {shown}: no longer answers (put the file back to bring it back)"
    if isinstance(event, Renamed):
        return f"[cyan]renamed  [/] {shown}: was {escape(event.old_name)}; its earlier versions go with it"
    if isinstance(event, FolderEmpty):
        plural = "" if event.documents == 1 else "s"
        return (f"[yellow]kept     [/] {shown} is empty, but the dataset holds {event.documents:,} document{plural} "
                f"from it: kept, none retired (is the folder mounted, or not synced yet?); files deleted while "
                "watching retire as usual, and `kx datasets retire NAME --from FOLDER` retires them on purpose")
    if isinstance(event, BatchDone):
        plural = "" if event.passages_added == 1 else "s"
        return (f"[bold]batch {event.batch}[/]: {event.added} added ({event.passages_added:,} passage{plural}), "
                f"{event.unchanged} unchanged, {event.refused} refused in {event.seconds:.2f} s; "
                f"the dataset holds {event.documents:,} documents, {event.passages:,} passages")
    if isinstance(event, WatchError) and not event.fatal:
        return f"[yellow]warning  [/] {escape(event.message)}"
    return None
