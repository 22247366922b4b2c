"""What a folder watcher watches and waits for: the default inbox folder, whether a folder can be watched
(and still is), what it needs of a backend (`IngestBackend`), and the files that changed and have not settled
yet (`PendingFiles`).
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol, Sequence

from ..config import Settings
from ..errors import not_found, precondition
from ..names import validate_name
from ..records import DocumentSummary, EmbedReport, IngestEventFn, IngestReport
from ..text.inputs import DocumentInput
from ..text.kx_files import kx_files_refusal, reaches_kx_files
from .events import Signature

# -- what is watched ---------------------------------------------------------------

def inbox_folder(settings: Settings, name: str) -> Path:
    """The default folder watched for dataset `name`: $KX_HOME/inbox/NAME (not created here)."""
    return settings.home / "inbox" / validate_name(name)


def made_inbox(settings: Settings, name: str, then: str) -> Path:
    """`inbox_folder`, created if missing; FAILED_PRECONDITION saying what is in the way (a file in its place, a
    home kx cannot write to) and, after that, `then`: the caller's next step."""
    folder = inbox_folder(settings, name)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise precondition(f"the inbox {folder} cannot be made ({exc.strerror}); move what is in its way or fix "
                           f"its permissions, {then}") from None
    return folder


def watchable_folder(folder: Path, settings: Settings, dataset: str) -> Path:
    """`folder` resolved, for watching into `dataset`; raises KxError (with what to do) when it cannot be watched."""
    try:
        root = folder.resolve(strict=True)
    except FileNotFoundError:
        # a folder on a drive or share that is not mounted is missing too: "create it" alone would be bad advice
        raise not_found(f"the folder {folder} does not exist, and nothing in dataset '{dataset}' was changed; if "
                        "it lives on a drive or a share, mount it; otherwise create it, or pick another folder "
                        f"(without one, kx watches its inbox {inbox_folder(settings, dataset)})") from None
    except OSError as exc:
        raise precondition(f"the folder {folder} cannot be opened ({exc.strerror}); check the path") from None
    if not root.is_dir():
        raise precondition(f"{folder} is a file, not a folder; watch the folder it lies in, "
                           f"or add it once with: kx datasets ingest {dataset} --file {folder}")
    if not os.access(root, os.R_OK | os.X_OK):
        raise precondition(f"the folder {root} cannot be read (permission denied); fix its permissions")
    place = reaches_kx_files(root, settings.home, settings.datasets_dir)
    if place is not None:  # and kx's own files would feed back into the watch: every ingest changes them
        raise kx_files_refusal(root, place, settings.home,
                               f"watch a folder of your own, e.g. the inbox {inbox_folder(settings, dataset)}")
    return root


def check_still_watched(root: str, identity: tuple[int, int]) -> None:
    """The watched folder `root` is still there and still the one watched (its (device, inode) is `identity`);
    raises KxError if not."""
    restart = "then start watching it again"
    try:
        st = os.stat(root)
    except FileNotFoundError:
        raise not_found(f"the watched folder {root} no longer exists (deleted or moved away); "
                        f"recreate it, {restart}") from None
    except OSError as exc:
        raise precondition(f"the watched folder {root} cannot be read ({exc.strerror}); "
                           f"fix it, {restart}") from None
    if not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) != identity:
        # a new folder under the old name is not the one the observer follows
        raise precondition(f"the watched folder {root} was replaced by something else; {restart}")
    if not os.access(root, os.R_OK | os.X_OK):
        raise precondition(f"the watched folder {root} can no longer be read (permission denied); "
                           f"fix its permissions, {restart}")


class IngestBackend(Protocol):
    """What the watcher needs from a backend: its settings and one ingest call per batch."""

    settings: Settings

    def ingest(self, name: str, documents: Iterable[DocumentInput], vectors: Any = None,
               on_event: IngestEventFn | None = None) -> IngestReport: ...

    def embed(self, name: str, on_event: IngestEventFn | None = None) -> EmbedReport: ...

    def list_documents(self, name: str, offset: int = 0, limit: int = 100,
                       versions: str | None = None) -> list[DocumentSummary]: ...

    def retire(self, name: str, lineages: Sequence[str]) -> list[str]: ...

    def rename(self, name: str, moves: Sequence[tuple[str, str, str | None]]) -> list[str]: ...

    def copies(self, name: str) -> dict[str, tuple[str, str | None]]: ...


# -- files waiting to settle -------------------------------------------------------


def file_signature(path: str) -> Signature | None:
    """(size, mtime_ns, ctime_ns) of what `path` names (links followed); None when it is gone or a folder.

    FIFOs, devices and sockets get a signature too, so they settle and are
    refused with their reason instead of vanishing without a word; the
    reader never blocks on them (engine/text/safe_read.py).
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return None
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns


@dataclass
class _Entry:
    first_seen: float                   # when an event or a scan first named it
    signature: Signature | None = None  # None until the worker first looks at it
    stable_since: float = 0.0           # when `signature` was first observed


@dataclass
class Poll:
    """One look at the pending files: the ones newly queued and the ones now settled."""

    queued: list[str] = field(default_factory=list)
    settled: list[tuple[str, Signature]] = field(default_factory=list)


class PendingFiles:
    """Paths that changed and have not settled yet, keyed by path.

    `add` is safe from any thread (watchdog's, the scan's); everything else is
    the worker's. Files are stat-ed outside the lock so a slow disk never
    blocks the thread delivering file-system events.
    """

    def __init__(self, signature: Callable[[str], Signature | None] = file_signature) -> None:
        self._signature = signature
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self._handled: dict[str, Signature] = {}  # what each path looked like when it last went to the engine

    def add(self, path: str, now: float) -> bool:
        with self._lock:
            if path in self._entries:
                return False
            self._entries[path] = _Entry(first_seen=now)
            return True

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def handled(self, path: str, signature: Signature) -> None:
        with self._lock:
            self._handled[path] = signature

    def is_handled(self, path: str, signature: Signature) -> bool:
        with self._lock:
            return self._handled.get(path) == signature

    def poll(self, now: float, settle_seconds: float) -> Poll:
        with self._lock:
            snapshot = list(self._entries.items())
        result = Poll()
        arrived: dict[str, float] = {}
        gone: list[str] = []
        for path, entry in snapshot:
            current = self._signature(path)
            if current is None:  # deleted, renamed away, or a temp file that lived a moment
                gone.append(path)
                continue
            if entry.signature is None:
                entry.signature, entry.stable_since = current, now
                if self.is_handled(path, current):  # an event after we took it (a close, a touch-free attrib)
                    gone.append(path)
                else:
                    result.queued.append(path)
                continue
            if current != entry.signature:
                entry.signature, entry.stable_since = current, now
                continue
            if now - entry.stable_since >= settle_seconds:
                gone.append(path)
                if not self.is_handled(path, current):
                    result.settled.append((path, current))
                    arrived[path] = entry.first_seen
        with self._lock:
            for path in gone:
                self._entries.pop(path, None)
        result.settled.sort(key=lambda item: (arrived[item[0]], item[0]))  # first come, first in
        return result
