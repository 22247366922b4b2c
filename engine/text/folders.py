"""Folders as documents: which files in a folder count, and what each is called.

ONE rule set, used by the folder watcher (engine/watch/) and by a folder
given to `kx datasets ingest` alike: a file is named by its path relative to
the folder, '/'-separated, without its extension (`guide/index.md` ->
`guide/index`); dot-files, dot-folders and editors' temporary, lock and swap
files are skipped. A folder is walked recursively in name order (the same
order on every run); linked folders are not followed. A link (a file, or a
folder) that leads outside the folder is refused (PERMISSION_DENIED) and
says where it leads; one that stays inside is read. A path that is not
valid UTF-8 cannot be stored or printed as it is: its file is refused
(engine/text/inputs.py's from_file), and wherever its path or name is shown,
each byte that is not UTF-8 reads U+FFFD (`printable`).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path, PurePath
from typing import Callable, Iterator

from ..errors import KxError, Status, invalid
from .inputs import DocumentInput, from_file

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


def printable(text: str) -> str:
    """`text` with each character UTF-8 cannot hold shown as U+FFFD.

    Python hands a file name's bytes that are not UTF-8 over as lone surrogates
    (U+DC80-U+DCFF); SQLite, JSON output and a terminal all fail on those.
    """
    return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)


def document_name(relative: str | PurePath) -> str:
    """A folder's file's document name: its path in the folder, '/'-separated, without extension.

    `guide/index.md` -> `guide/index`, so two `index.md` in different folders
    stay two names a reader can tell apart. Always printable.
    """
    path = PurePath(relative)
    return printable((path.parent / (path.stem or path.name)).as_posix())


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
    for path in walk_files(root, on_error=unreadable, on_link=linked):
        name = document_name(os.path.relpath(path, root))
        real = leads_outside(path, real_root)
        if real is not None:  # refused unread, as the watcher refuses it
            docs.append(DocumentInput(name, source_path=printable(path), error=outside_refusal(path, real, root)))
            continue
        docs.append(replace(from_file(path, max_bytes), name=name))
    docs += errors
    if not docs:
        shown = printable(root)
        docs.append(DocumentInput(Path(shown).name, source_path=shown, error=invalid(
            f"the folder {shown} holds no files to read (hidden, temporary and lock files are skipped)")))
    return docs
