"""What every screen may ask of the app: the backend, the local settings, and the query options they share.

A Protocol, so screens depend on this small face rather than on kx_tui/tui/app.py
(which imports the screens); KxApp is the one implementation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Protocol

from textual.binding import Binding

from engine.backend import Backend
from engine.config import Settings

from .warmup import ModelWarmup


class Workbench(Protocol):
    backend: Backend
    settings: Settings | None      # the in-process engine's settings; None over a gateway
    samples: Path | None           # the handbook offered on first run, if any
    watch_settle_seconds: float
    mode: str                      # the query options, shared by every screen that queries
    rerank: bool
    k: int
    max_k: int
    warmup: ModelWarmup

    def help_bindings(self) -> Iterable[Binding]: ...
