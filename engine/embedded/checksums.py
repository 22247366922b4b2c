"""Checksums of the derived index files, so a damaged one is rebuilt instead of trusted.

voyager loads a graph with flipped bytes without a word, and whoosh reads a
damaged segment as whatever postings the bytes spell: a wrong answer, not
an error. So every index save records each file's size and CRC-32 in its
sidecar, and a reader checks them before it trusts the file (a mismatch
reads as "holds nothing": the next open rebuilds from the catalogue). The
result is remembered per file identity (device, inode, size, mtime), so a
long-lived process checks each saved file once.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

_CHUNK = 1 << 20
_known: dict[tuple[int, int, int, int], int] = {}  # (dev, ino, size, mtime_ns) -> crc32


def file_crc32(path: Path | str) -> tuple[int, int]:
    """(size, CRC-32) of the file at `path`. Raises OSError when it cannot be read."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    crc = _known.get(key)
    if crc is None:
        crc = 0
        with open(path, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                crc = zlib.crc32(chunk, crc)
        if len(_known) > 4096:
            _known.clear()
        _known[key] = crc
    return st.st_size, crc


def matches(path: Path | str, recorded: object) -> bool:
    """True when the file at `path` still has the [size, crc32] its sidecar `recorded`."""
    if not (isinstance(recorded, (list, tuple)) and len(recorded) == 2):
        return False
    try:
        return list(file_crc32(path)) == [int(recorded[0]), int(recorded[1])]
    except (OSError, TypeError, ValueError):
        return False
