"""The Milvus backend: the Backend protocol over a Milvus cluster, `milvus-lite server`, or a milvus-lite .db.

Importing this package is light; pymilvus is imported only when a
`MilvusBackend` connects (engine/milvus/errors.py), so `kx list`, `kx info`
and `kx --help` on the embedded default never load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import MilvusBackend

__all__ = ["MilvusBackend"]


def __getattr__(name: str) -> Any:
    if name == "MilvusBackend":
        from .backend import MilvusBackend

        return MilvusBackend
    raise AttributeError(name)
