"""What the disk says, in words a user can act on: a full disk and a damaged catalogue.

SQLite, whoosh and voyager each report a full disk or a damaged file their
own way (sqlite3.OperationalError "database or disk is full", OSError
ENOSPC, a RuntimeError from voyager's writer, sqlite3.DatabaseError
"database disk image is malformed"). `storage_errors` turns them into one
KxError at the engine's boundary: RESOURCE_EXHAUSTED naming the path that
filled up, or DATA_LOSS naming the damaged catalogue and what to do. Both
leave what was committed as it was: a catalogue transaction that failed is
rolled back whole, and the derived indexes catch up once there is room.
"""

from __future__ import annotations

import contextlib
import errno
import shutil
import sqlite3
from pathlib import Path
from typing import Iterator

from ..config import ENV
from ..errors import KxError, Status

_SQLITE_READONLY, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_NOTADB = 8, 11, 13, 26
_READ_ONLY_ERRNOS = {errno.EROFS}
_DENIED_ERRNOS = {errno.EACCES, errno.EPERM}
_FULL_ERRNOS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


def disk_full(path: Path | str) -> KxError:
    where = Path(path)
    free = ""
    with contextlib.suppress(OSError):
        probe = where if where.exists() else where.parent
        free = f" ({shutil.disk_usage(probe).free:,} bytes free)"
    return KxError(Status.RESOURCE_EXHAUSTED,
                   f"disk full: cannot write {where}{free}; no file was left half-written (the index file "
                   f"in place is the last whole one). Free some space (or point {ENV.home} at a larger disk) and run "
                   "the same command again: what is already in stays, and what was not is added then")


def damaged_catalogue(path: Path | str, detail: str) -> KxError:
    name = Path(path).parent.name  # $KX_HOME/datasets/NAME/catalog.sqlite
    return KxError(Status.DATA_LOSS,
                   f"the catalogue {path} of dataset '{name}' is damaged ({detail}); kx will not answer from it "
                   f"rather than answer wrongly. Run `kx datasets check {name}` to see what is damaged and "
                   f"`kx datasets check {name} --repair` to set the damaged rows aside and rebuild the indexes; "
                   "or restore that file from a backup, or salvage it with `sqlite3 catalog.sqlite \".recover\"` "
                   "into a new file, or ingest the original files into a new dataset")


def missing_tables(path: Path | str, tables: list[str]) -> KxError:
    """DATA_LOSS for a catalogue that is there (its other tables are) but lacks `tables`: dropped or damaged."""
    which = f"table {tables[0]} is" if len(tables) == 1 else f"tables {', '.join(tables)} are"
    return damaged_catalogue(path, f"its {which} missing while the rest of it is there: dropped or damaged")


_DERIVED = ("dense.json", "sparse.json", "dense.voy", "sparse")


def check_catalogue_kept(folder: Path) -> None:
    """DATA_LOSS when dataset `folder` has indexes but its catalogue was emptied or holds no kx tables.

    A writer would otherwise create a fresh catalogue over it and carry on as
    if the dataset were new. A catalogue alone and empty (a first ingest that
    never committed) is not damage: nothing else was ever written.
    """
    path = folder / "catalog.sqlite"
    try:
        size = path.stat().st_size
    except OSError:
        return
    if not any((folder / name).exists() for name in _DERIVED):
        return
    if size == 0:
        raise damaged_catalogue(path, "0 bytes, while the dataset's indexes are still there: it was emptied")
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            db.close()
    except sqlite3.Error as exc:
        translated = classify_sqlite(exc, path)
        if translated is not None and translated.status is Status.DATA_LOSS:
            raise translated from None
        return  # cannot even be opened (a read-only folder, ...): the writer says why, in its own words
    if "meta" not in tables and tables & {"blobs", "documents", "passages"}:  # not replaced: its meta dropped
        raise missing_tables(path, ["meta"])
    if "meta" not in tables:
        raise damaged_catalogue(path, f"{size:,} bytes but none of kx's tables, while the dataset's indexes are "
                                      "still there: it was replaced")


def classify_sqlite(exc: sqlite3.Error, path: Path | str) -> KxError | None:
    """The KxError for a SQLite failure on the catalogue at `path`; None when it is neither full nor damaged."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    text = str(exc).lower()
    if primary == _SQLITE_FULL or "database or disk is full" in text:
        return disk_full(path)
    if primary in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or "malformed" in text or "not a database" in text \
            or "could not decode to utf-8" in text:  # a stored text whose bytes are no longer UTF-8
        return damaged_catalogue(path, str(exc))
    if "no such table" in text:  # an emptied (0-byte) or foreign file where a kx catalogue was, or a table dropped
        table = str(exc).split("no such table:", 1)[-1].strip()
        if table and _has_kx_tables(Path(path)):
            return missing_tables(path, [table])
        size = ""
        with contextlib.suppress(OSError):
            size = f"{Path(path).stat().st_size:,} bytes, "
        return damaged_catalogue(path, f"{size}it holds none of kx's tables: emptied or replaced")
    if primary == _SQLITE_READONLY or "readonly database" in text or "read-only" in text:
        return unwritable(Path(path), "read-only")
    return None


def _has_kx_tables(path: Path) -> bool:
    """Whether the file at `path` holds kx's meta or documents table (so a missing one was dropped, not never there)."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return bool(db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name IN ('meta', 'documents')")
                        .fetchone())
        finally:
            db.close()
    except sqlite3.Error:
        return False


def unwritable(path: Path, why: str) -> KxError:
    """KX_HOME (or a path in it) cannot be written: say which path, why, what to do, and that reads still work."""
    fix = (f"point {ENV.home} (or --home) at a folder you can write to; reading the datasets already there "
           "(kx datasets list, documents, query) still works")
    if why == "denied":
        return KxError(Status.PERMISSION_DENIED, f"cannot write {path} (permission denied); fix its permissions, "
                                                 f"or {fix}")
    if why == "read-only":
        return KxError(Status.FAILED_PRECONDITION, f"cannot write {path}: it is on a read-only file system; {fix}")
    if why == "not a folder":
        return KxError(Status.FAILED_PRECONDITION, f"{path} is a file where kx keeps a folder; move that file "
                                                   "away (an index folder is rebuilt from the catalogue), or "
                                                   f"point {ENV.home} at another folder")
    return KxError(Status.FAILED_PRECONDITION, f"cannot create {path}: its folder does not take new files "
                                               f"(a special file system such as /proc?); {fix}")


def reads_still_work(error: KxError) -> bool:
    """True for a failure to write (a read-only or forbidden home): answers from what is stored still hold."""
    return error.status is Status.PERMISSION_DENIED or (
        error.status is Status.FAILED_PRECONDITION and "read-only file system" in error.message)


def classify_os_error(exc: OSError, fallback: Path) -> KxError | None:
    """FAILED_PRECONDITION / PERMISSION_DENIED for a path kx cannot write; None for anything else."""
    path = Path(exc.filename) if exc.filename else fallback
    if exc.errno in _READ_ONLY_ERRNOS:
        return unwritable(path, "read-only")
    if exc.errno in _DENIED_ERRNOS:
        return unwritable(path, "denied")
    if exc.errno == errno.ENOTDIR or (isinstance(exc, FileExistsError) and not path.is_dir()):
        return unwritable(_first_file(path), "not a folder")
    if exc.errno == errno.EISDIR:
        target = next((Path(f) for f in (exc.filename2, exc.filename) if f and Path(f).is_dir()), path)
        return KxError(Status.FAILED_PRECONDITION, f"{target} is a folder where kx keeps a file; move that folder "
                                                   "away (an index file is rebuilt from the catalogue)")
    return None


def check_home_writable(home: Path, datasets: Path) -> None:
    """Create the datasets folder (if needed) or raise why KX_HOME `home` cannot hold datasets."""
    try:
        datasets.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        translated = classify_os_error(exc, datasets)
        if translated is None and isinstance(exc, FileNotFoundError):
            translated = unwritable(Path(exc.filename or datasets), "cannot create")
        raise (translated or unwritable(datasets, "cannot create")) from None
    if not datasets.is_dir():
        raise unwritable(_first_file(datasets), "not a folder")


def _first_file(path: Path) -> Path:
    """The part of `path` that is a file where a folder was expected (the path itself when none is)."""
    for part in reversed([path, *path.parents]):
        if part.exists() and not part.is_dir():
            return part
    return path


def _is_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return True
    # voyager's C++ writer reports a short write as a RuntimeError with the errno's text
    return isinstance(exc, RuntimeError) and "no space left on device" in str(exc).lower()


@contextlib.contextmanager
def storage_errors(folder: Path) -> Iterator[None]:
    """Translate a full disk or a damaged catalogue under dataset `folder` into a KxError."""
    try:
        yield
    except KxError:
        raise
    except UnicodeDecodeError as exc:  # SQLite handing back a stored text (or its schema's) that is not UTF-8
        raise damaged_catalogue(folder / "catalog.sqlite", f"a stored text is not valid UTF-8: {exc}") from None
    except sqlite3.Error as exc:
        translated = classify_sqlite(exc, folder / "catalog.sqlite")
        if translated is None:
            raise
        raise translated from None
    except (OSError, RuntimeError) as exc:
        if _is_full(exc):
            raise disk_full(getattr(exc, "filename", None) or folder) from None
        translated = classify_os_error(exc, folder) if isinstance(exc, OSError) else None
        if translated is None:
            raise
        raise translated from None
