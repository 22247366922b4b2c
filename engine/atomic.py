"""Crash-safe file replacement: write beside, fsync, rename, fsync the folder."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def fsync(path: Path) -> None:
    """Flush a file's data, or a folder's entries (a rename in it), to the disk.

    One body for both: POSIX fsyncs a folder through a read-only descriptor as it does a file.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_with(tmp: Path, final: Path) -> None:
    """Make a fully written `tmp` become `final` atomically and durably."""
    fsync(tmp)
    os.replace(tmp, final)
    fsync(final.parent)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        replace_with(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    write_bytes_atomic(path, json.dumps(data, indent=1, sort_keys=True).encode("utf-8"))


def read_json(path: Path) -> Any:
    """The JSON in `path`, or None when it is missing or unreadable (a derived file: we rebuild)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
