"""The one place that turns settings into the in-process Backend: the embedded engine or Milvus.

The CLI, the TUI, `kx serve` and the watcher all build their backend here,
so KX_BACKEND means the same everywhere. The Milvus side is imported only
when chosen (pymilvus is heavy; `kx list` on the embedded default must not
load it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .config import BackendKind, Settings

if TYPE_CHECKING:
    from .embedded.engine import Engine
    from .milvus.backend import MilvusBackend

_UNSET: Any = object()


def open_backend(settings: Settings, embedder: Any = _UNSET,
                 on_notice: Callable[[str], None] | None = None) -> Engine | MilvusBackend:
    """`Engine` for backend=embedded, `MilvusBackend` for backend=milvus; `embedder` as Engine takes it."""
    given = {} if embedder is _UNSET else {"embedder": embedder}
    if settings.backend == BackendKind.MILVUS:
        from .milvus.backend import MilvusBackend

        return MilvusBackend(settings, on_notice=on_notice, **given)
    from .embedded.engine import Engine

    return Engine(settings, on_notice=on_notice, **given)
