"""kx's embedded engine: datasets, ingest and retrieval, importable without any UI.

Importing this package loads neither Textual, torch nor numpy: the names below
are resolved on first use (PEP 562), so `kx datasets list` and `kx info` stay
light, and the embedding model is loaded the first time something is embedded.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {
    "Backend": "backend",
    "KxClient": "server.client",
    "RetrievalMode": "records",
    "DocumentStatus": "records",
    "Settings": "config",
    "load_settings": "config",
    "Engine": "embedded.engine",
    "KxError": "errors",
    "Status": "errors",
    "__version__": "version",  # importlib.metadata costs ~10 ms: read when asked for
}

__all__ = ["Backend", "DocumentStatus", "Engine", "KxClient", "KxError", "RetrievalMode", "Settings", "Status",
           "load_settings", "__version__"]

if TYPE_CHECKING:
    from .backend import Backend
    from .config import Settings, load_settings
    from .embedded.engine import Engine
    from .errors import KxError, Status
    from .records import DocumentStatus, RetrievalMode
    from .server.client import KxClient
    from .version import __version__


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # once resolved, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
