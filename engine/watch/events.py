"""What a folder watcher reports: one small typed event per thing that happened, as one union (`WatchEvent`),
always from the watcher's worker thread and in order (engine/watch/watcher.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Callable, ClassVar, cast

from ..text.folders import printable

# (size, mtime_ns, ctime_ns): what "unchanged" means for a file on disk. ctime as well as
# size and mtime, so a chmod that makes a refused, unreadable file readable offers it again.
Signature = tuple[int, int, int]


# -- events ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Event:
    kind: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.kind, **asdict(self)}


@dataclass(frozen=True)
class Queued(_Event):
    """A new or changed file was seen; it goes in once it has settled."""

    kind: ClassVar[str] = "queued"
    path: str


@dataclass(frozen=True)
class BatchStarted(_Event):
    kind: ClassVar[str] = "batch_started"
    batch: int
    files: int


@dataclass(frozen=True)
class Ingested(_Event):
    """The file is a new document and is queryable now."""

    kind: ClassVar[str] = "ingested"
    path: str
    name: str
    ref: str
    passages: int
    batch: int


@dataclass(frozen=True)
class Unchanged(_Event):
    """The file's bytes were already in the dataset; nothing was added."""

    kind: ClassVar[str] = "unchanged"
    path: str
    name: str
    ref: str
    passages: int
    batch: int


@dataclass(frozen=True)
class Refused(_Event):
    """The file cannot be ingested (binary, not UTF-8, empty, unreadable, too large)."""

    kind: ClassVar[str] = "refused"
    path: str
    name: str
    code: str
    reason: str
    batch: int


@dataclass(frozen=True)
class Retired(_Event):
    """The file left the watched folder: its document no longer answers by default (still stored; putting
    the file back brings it back)."""

    kind: ClassVar[str] = "retired"
    path: str
    name: str


@dataclass(frozen=True)
class Renamed(_Event):
    """A file was renamed (or moved) inside the watched folder: its lineage, every earlier version
    included, goes on under the new name."""

    kind: ClassVar[str] = "renamed"
    path: str
    name: str
    old_name: str


@dataclass(frozen=True)
class FolderEmpty(_Event):
    """At start the watched folder (`path`) held no file while the dataset held `documents` current documents
    from it: they were kept, not retired. An unmounted drive, a sync client that has not filled the folder yet
    or a folder emptied by mistake all look like this, and retiring would empty the dataset without a word.
    The watch goes on; what this run sees deleted retires as usual, and the kept documents retire once a later
    start finds the folder holding files but not theirs."""

    kind: ClassVar[str] = "folder_empty"
    path: str
    documents: int


@dataclass(frozen=True)
class BatchDone(_Event):
    kind: ClassVar[str] = "batch_done"
    batch: int
    files: int
    added: int
    unchanged: int
    refused: int
    passages_added: int
    documents: int      # the dataset's totals after this batch
    passages: int
    seconds: float


@dataclass(frozen=True)
class WatchError(_Event):
    """Something went wrong; `fatal` means the watcher has stopped and says how to recover."""

    kind: ClassVar[str] = "error"
    code: str
    message: str
    fatal: bool
    path: str | None = None


WatchEvent = (Queued | BatchStarted | Ingested | Unchanged | Refused | Retired | Renamed | FolderEmpty | BatchDone
              | WatchError)
WatchEventFn = Callable[[WatchEvent], None]


def printable_event(event: WatchEvent) -> WatchEvent:
    """`event` with every path, name and message printable: a file name's bytes that are not UTF-8 read
    U+FFFD, so the event survives JSON, a terminal and the TUI (engine/text/folders.py's `printable`)."""
    changed = {f.name: printable(value) for f in fields(event)
               if isinstance(value := getattr(event, f.name), str) and printable(value) != value}
    return cast(WatchEvent, replace(cast(Any, event), **changed)) if changed else event
