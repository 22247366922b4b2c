"""Folders as documents: which files in a folder count, and what each is called.

ONE rule set, used by the folder watcher (engine/watch/) and by a folder
given to `kx datasets ingest` alike:

- A file is named by its path relative to the folder, '/'-separated, without
  its extension (`guide/index.md` -> `guide/index`), unless another file in
  the same folder would then share its name (`report.md` beside
  `report.txt`): each such file keeps its extension (`report.md`,
  `report.txt`), so neither becomes a version of the other. The rule looks
  at the folder as it is now: when the second file arrives (or leaves), the
  first one's document is renamed to match (the watcher's reconcile, or
  `ingest --sync`; a plain ingest leaves the old name beside the new one, as
  after any rename), never superseded.
- Dot-files, dot-folders and editors' temporary, lock and swap files are
  skipped. A folder is walked recursively in name order (the same order on
  every run); linked folders are not followed.
- A link (a file, or a folder) that leads outside the folder is refused
  (PERMISSION_DENIED) and says where it leads; one that stays inside is read.
- A path that is not valid UTF-8 cannot be stored or printed as it is: its
  file is refused (engine/text/inputs.py's from_file), and wherever its path
  or name is shown, each byte that is not UTF-8 reads U+FFFD (`printable`).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import replace
from pathlib import Path, PurePath
from typing import Callable, Iterable, Iterator

from ..errors import KxError, Status, invalid
from .inputs import DocumentInput, from_file, printable

# Names that editors, browsers and office suites use for work in progress; the
# finished file arrives under its real name (usually by a rename a watcher sees).
TEMP_SUFFIXES = (".swp", ".swo", ".swx", ".part", ".partial", ".crdownload", ".download", ".tmp", ".temp")


def is_ignored(relative: str | PurePath) -> bool:
    """True for temporary and hidden files: dot-files, anything in a dot-folder, lock and swap files."""
    parts = PurePath(relative).parts
    if not parts or any(part.startswith(".") for part in parts):  # also LibreOffice's ".~lock.x#"
        return True
    name = parts[-1]
    return (name.startswith("~$")  # Office owner files
            or name.endswith("~")  # editor backups
            or (name.startswith("#") and name.endswith("#"))  # Emacs auto-saves
            or name.lower().endswith(TEMP_SUFFIXES))


def _stem(name: str) -> str:
    return PurePath(name).stem or name


def leaf_names(names: Iterable[str]) -> dict[str, str]:
    """File name -> the last part of its document name, for the files of ONE folder (their names, not paths).

    Without its extension, unless that would share a name with another file of the folder: then with it.
    """
    files = set(names)
    stems = Counter(_stem(name) for name in files)
    full = {name for name in files if stems[_stem(name)] > 1}  # report.md beside report.txt
    while True:
        # a lone stem may still equal a name kept whole above (a.md.txt beside a.md and a.txt): keep it whole too
        more = {name for name in files - full if _stem(name) in full}
        if not more:
            break
        full |= more
    return {name: name if name in full else _stem(name) for name in files}


def folder_files(folder: str) -> list[str]:
    """The names of the entries of `folder` that walk_files yields as files (what is not a folder, not
    ignored): a file's siblings, whose names decide whether it keeps its extension. [] when unreadable."""
    try:
        with os.scandir(folder) as entries:
            return [e.name for e in entries if not is_ignored(e.name) and not _is_dir(e)]
    except OSError:
        return []


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # links followed, as os.walk does
    except OSError:
        return False


def document_name(relative: str | PurePath, siblings: Iterable[str] = ()) -> str:
    """A folder's file's document name: its path in the folder, '/'-separated, without extension.

    `guide/index.md` -> `guide/index`, so two `index.md` in different folders
    stay two names a reader can tell apart. `siblings` are the names of the
    other files in its folder: one sharing its stem (`report.txt` beside
    `report.md`) makes it keep its extension (`report.md`). Always printable.
    """
    path = PurePath(relative)
    leaf = leaf_names({path.name, *siblings})[path.name]
    return printable((path.parent / leaf).as_posix())


def document_names(root: str, paths: Iterable[str], listings: dict[str, list[str]] | None = None) -> dict[str, str]:
    """path -> document name for files under `root`, each folder's files listed once (folder_files); a caller
    naming files one by one passes `listings` (folder -> its files) to list each folder once all the same."""
    by_folder: dict[str, list[str]] = {}
    for path in paths:
        by_folder.setdefault(os.path.dirname(path), []).append(path)
    names = {}
    for folder, inside in by_folder.items():
        if listings is None:
            listed = folder_files(folder)
        elif folder in listings:
            listed = listings[folder]
        else:
            listed = listings[folder] = folder_files(folder)
        leaves = leaf_names({*listed, *(os.path.basename(p) for p in inside)})
        for path in inside:
            relative = PurePath(os.path.relpath(folder, root)) / leaves[os.path.basename(path)]
            names[path] = printable(relative.as_posix())
    return names


def leads_outside(path: str, root: str) -> str | None:
    """Where `path` really lies when a symlink or junction on the way leads out of `root`; else None."""
    real = os.path.realpath(path)
    try:
        inside = os.path.commonpath([real, root]) == root
    except ValueError:  # another drive (Windows)
        inside = False
    return None if inside else real


def outside_refusal(path: str, real: str, root: str | None = None) -> KxError:
    """PERMISSION_DENIED for `path`, a link to `real` outside the folder: the watched one, or `root` given
    to an ingest."""
    if root is None:
        where, then = "the watched folder; a watched folder", "Copy the file in, or add it once with kx " \
                                                             "datasets ingest NAME --file PATH"
    else:
        where, then = f"the folder {printable(root)}; a folder given to ingest", \
            f"Copy it in, or ingest it on its own: kx datasets ingest NAME {printable(real)}"
    return KxError(Status.PERMISSION_DENIED, f"{printable(path)} is a link to {printable(real)}, outside {where} "
                                             f"does not follow links out of itself. {then}")


def walk_files(root: str, folder: str | None = None,
               on_error: Callable[[OSError], None] | None = None,
               on_link: Callable[[str], None] | None = None) -> Iterator[str]:
    """Every file under `folder` (default `root`) that is not ignored, in name order; dot-folders skipped
    wholesale. `on_error` hears folders that cannot be listed, `on_link` each linked folder (not followed)."""
    start = folder or root
    for here, folders, files in os.walk(start, onerror=on_error):
        folders[:] = sorted(f for f in folders if not f.startswith("."))
        if on_link is not None:
            for linked in [f for f in folders if os.path.islink(os.path.join(here, f))]:
                on_link(os.path.join(here, linked))  # os.walk does not descend links
        for name in sorted(files):
            path = os.path.join(here, name)
            if not is_ignored(os.path.relpath(path, root)):
                yield path


def folder_documents(folder: Path | str, max_bytes: int) -> list[DocumentInput]:
    """The documents of a folder given to an ingest, each named as the watcher names it.

    A file that cannot be read comes back refused with its reason, like any file; so does a link (to a file
    or a folder) that leads outside the folder, as a watched folder refuses it.
    """
    root = os.path.abspath(os.fspath(folder))
    real_root = os.path.realpath(root)  # a folder given through a link: its files lie where it leads
    errors: list[DocumentInput] = []

    def unreadable(exc: OSError) -> None:
        where = printable(str(exc.filename or root))
        errors.append(DocumentInput(document_name(os.path.relpath(where, root)) if where != root else
                                    printable(Path(root).name), source_path=where,
                                    error=invalid(f"{where} cannot be listed ({exc.strerror}); fix its "
                                                  "permissions")))

    def linked(path: str) -> None:
        real = leads_outside(path, real_root)
        if real is not None:  # a link inside the folder is walked where it really lies
            errors.append(DocumentInput(document_name(os.path.relpath(path, root)), source_path=printable(path),
                                        error=outside_refusal(path, real, root)))

    docs = []
    paths = list(walk_files(root, on_error=unreadable, on_link=linked))
    names = document_names(root, paths)
    for path in paths:
        real = leads_outside(path, real_root)
        if real is not None:  # refused unread, as the watcher refuses it
            docs.append(DocumentInput(names[path], source_path=printable(path),
                                      error=outside_refusal(path, real, root)))
            continue
        docs.append(replace(from_file(path, max_bytes), name=names[path]))
    docs += errors
    if not docs:
        shown = printable(root)
        docs.append(DocumentInput(Path(shown).name, source_path=shown, error=invalid(
            f"the folder {shown} holds no files to read (hidden, temporary and lock files are skipped)")))
    return docs
