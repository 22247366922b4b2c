"""The embedding model's warm-up, shared by every screen that queries.

The main screen starts `run()` in a worker as soon as the app opens; a query
that needs the model (dense or hybrid) waits on `wait()` instead of loading
the model a second time, and a sparse query never waits.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from engine.backend import Backend
from engine.errors import KxError


class ModelWarmup:
    def __init__(self, backend: Backend, local: bool) -> None:
        self.backend = backend
        self.local = local              # False over a gateway: it loads its own model
        self.loaded = False             # True once a model was loaded here
        self.seconds: float | None = None
        self.finished_at: float | None = None   # time.perf_counter() when done (benchmarks read it)
        self.error: KxError | None = None
        self._done = threading.Event()

    def run(self, notify: Callable[[str], None] | None = None) -> None:
        """Load the model (on a worker thread); errors are kept, and the queries that wait see them.

        `notify` hears the backend's progress lines (a first use exports the model's ONNX graph).
        """
        started = time.perf_counter()
        try:
            self.loaded = self.backend.warm_up(notify=notify)
        except KxError as exc:
            self.error = exc
        finally:
            self.finished_at = time.perf_counter()
            self.seconds = self.finished_at - started
            self._done.set()

    @property
    def ready(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def describe(self) -> str:
        """The status line's words for the model's state."""
        if not self.local:
            return "gateway"
        if not self.ready:
            return "loading model…"
        if self.error is not None:
            return "model failed to load"
        if not self.loaded:
            return "no model: sparse only"
        return f"model ready in {self.seconds:.1f} s"
