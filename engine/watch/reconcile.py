"""A watched folder against its dataset, at start and after a delete or a move: the documents whose files are
gone are retired, and one whose current bytes now sit in a file under another name was renamed unseen (while
nobody watched, or reported as a delete and a create), so its lineage moves there instead. So does one whose
file is still there under a name the folder's rules now give it otherwise (`report` -> `report.md` once a
`report.txt` arrives beside it, and back when it leaves: engine/text/folders.py). Except at start in a folder
holding no file at all: that is as likely a drive not mounted as a folder emptied, so nothing retires then.
"""

from __future__ import annotations

import hashlib
import os
from typing import AbstractSet

from ..backend import every_document
from ..errors import KxError, Status
from ..text.folders import document_names, printable, walk_files
from ..text.inputs import RECORD_MEDIA_TYPE
from .events import FolderEmpty, Renamed, Retired, WatchEventFn
from .pending import IngestBackend


def reconcile(backend: IngestBackend, dataset: str, root: str, emit: WatchEventFn, *, at_start: bool = False,
              spared: AbstractSet[str] = frozenset()) -> set[str]:
    """Retire or rename (through `backend`) the documents of `dataset` from folder `root` whose files are gone;
    each is reported through `emit` (Retired, Renamed). A document named in `spared` may be renamed (its bytes
    turned up under another name) but is never retired.

    `at_start` (a watcher's first look): a folder holding no file then retires nothing. An unmounted drive
    or a sync client that has not filled the folder yet looks exactly like a folder whose files were all
    deleted, and only the first costs nothing to wait out; the documents are reported kept (FolderEmpty) and
    their names returned, for the watcher to pass as `spared` for the rest of its run. Returns an empty set
    otherwise. (A delete seen while watching is a fact, not a guess: those reconciles retire as ever.)
    """
    # a path that is not UTF-8 never becomes a document (refused), so no lineage can move to it
    present = {name: path for path, name in document_names(
        root, [path for path in walk_files(root) if printable(path) == path]).items()}
    inside = root.rstrip(os.sep) + os.sep
    gone: dict[str, tuple[str, str]] = {}   # name -> (source path, current ref)
    live: dict[str, str] = {}               # name -> current ref, every lineage shown
    listed: dict[str, str | None] = {}      # ref -> the source path it is listed with (None: a record's)
    try:
        for d in every_document(backend, dataset):
            live[d.name] = d.ref
            if d.media_type == RECORD_MEDIA_TYPE:
                continue  # a --jsonl record: its source is its JSONL file, never a file named as the record is
            listed[d.ref] = d.source_path
            if d.source_path and d.source_path.startswith(inside) and d.name not in present:
                gone[d.name] = (d.source_path, d.ref)
        # a copy (stored bytes a second file offered) is listed once, under the first file's name: its own
        # name is live too, and gone when its file is (a path the event did not keep: the listed file's)
        for name, (ref, path) in backend.copies(dataset).items():
            live.setdefault(name, ref)
            source = path or listed.get(ref)
            if ref in listed and source and source.startswith(inside) and name not in present:
                gone[name] = (source, ref)
    except KxError as exc:
        if exc.status is Status.NOT_FOUND:  # no dataset yet: nothing to retire
            return set()
        raise
    if not gone:
        return set()
    if at_start and not present:
        emit(FolderEmpty(root, len(gone)))
        return set(gone)
    moves = unseen_renames(gone, present, live, backend.settings.max_document_bytes)
    if moves:
        moved = set(backend.rename(dataset, moves))
        for old, new, path in moves:
            if old in moved:
                gone.pop(old, None)
                emit(Renamed(path, new, old))
    leaving = sorted(set(gone) - spared)
    if leaving:
        for name in backend.retire(dataset, leaving):
            emit(Retired(gone[name][0], name))
    return set()


def unseen_renames(gone: dict[str, tuple[str, str]], present: dict[str, str], live: dict[str, str],
                   max_bytes: int) -> list[tuple[str, str, str]]:
    """(old name, new name, path) for gone documents whose current bytes a present file holds: one the
    dataset has under its new name already, or (read and hashed here) one it does not know yet. First, a
    gone document whose file is still there under another name (the folder's naming rule changed its name)
    moves to that name, unless that name already has a lineage of its own (then the old one retires: a
    rename onto it would make the older bytes its current version)."""
    moves = []
    named = {path: name for name, path in present.items()}
    for lineage, (source, _ref) in gone.items():
        if source in named and named[source] not in live:  # a file with its stem came or went beside it
            moves.append((lineage, named.pop(source), source))
    carried = {lineage for lineage, _new, _path in moves}
    taken = {new for _old, new, _path in moves}
    wanted = {ref: name for name, (_path, ref) in gone.items() if name not in carried}
    for name, path in present.items():
        if name in taken:
            continue
        if not wanted:
            break
        ref = live.get(name)
        if ref is None:   # not in the dataset yet
            try:
                if os.path.getsize(path) > max_bytes:
                    continue
                with open(path, "rb") as handle:
                    ref = hashlib.sha256(handle.read()).hexdigest()
            except OSError:
                continue
        old = wanted.pop(ref, None)
        if old is not None:
            moves.append((old, name, path))
    return moves
