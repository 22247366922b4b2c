"""The index sidecars of a milvus-lite folder: files milvus-lite derives from a collection's stored rows.

milvus-lite builds each segment's index in a background thread after a flush
and writes it straight to its final name (`<segment>.<field>.<kind>.idx`). A
process killed during that write (SIGKILL, a crash, the power) leaves the
file cut short, and every later load of the collection fails on it. The rows
themselves are safe (data files and the manifest are written atomically), and
milvus-lite builds an index it does not find, so dropping the sidecars
repairs the collection at the price of rebuilding its indexes.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def drop_index_sidecars(path: str, collection: str) -> int:
    """Delete every index sidecar of `collection` in the milvus-lite folder `path`; how many were deleted."""
    partitions = Path(path) / "collections" / collection / "partitions"
    dropped = 0
    for sidecar in sorted(partitions.glob("*/indexes/*.idx")):
        with contextlib.suppress(FileNotFoundError):
            os.remove(sidecar)
            dropped += 1
    return dropped
