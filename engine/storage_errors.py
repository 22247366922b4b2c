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

from .errors import KxError, Status

_SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_NOTADB = 11, 13, 26
_FULL_ERRNOS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


def disk_full(path: Path | str) -> KxError:
    where = Path(path)
    free = ""
    with contextlib.suppress(OSError):
        probe = where if where.exists() else where.parent
        free = f" ({shutil.disk_usage(probe).free:,} bytes free)"
    return KxError(Status.RESOURCE_EXHAUSTED,
                   f"disk full: cannot write {where}{free}; nothing half-written was kept. Free some space "
                   "(or point KX_HOME at a larger disk) and run the same command again: what is already in "
                   "stays, and what was not is added then")


def damaged_catalogue(path: Path | str, detail: str) -> KxError:
    return KxError(Status.DATA_LOSS,
                   f"the catalogue {path} is damaged ({detail}); kx will not answer from it rather than answer "
                   "wrongly. Restore that file from a backup, or salvage it with `sqlite3 catalog.sqlite "
                   "\".recover\"` into a new file, or ingest the original files into a new dataset")


def classify_sqlite(exc: sqlite3.Error, path: Path | str) -> KxError | None:
    """The KxError for a SQLite failure on the catalogue at `path`; None when it is neither full nor damaged."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    text = str(exc).lower()
    if primary == _SQLITE_FULL or "database or disk is full" in text:
        return disk_full(path)
    if primary in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or "malformed" in text or "not a database" in text:
        return damaged_catalogue(path, str(exc))
    return None


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
    except sqlite3.Error as exc:
        translated = classify_sqlite(exc, folder / "catalog.sqlite")
        if translated is None:
            raise
        raise translated from None
    except (OSError, RuntimeError) as exc:
        if not _is_full(exc):
            raise
        raise disk_full(getattr(exc, "filename", None) or folder) from None
