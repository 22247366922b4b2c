"""The embedding model's warm-up, shared by every screen that queries.

The main screen starts `run()` in a worker as soon as the app opens; a query
that needs the model (dense or hybrid) waits on `wait()` instead of loading
the model a second time, and a sparse query never waits.
"""

from __future__ import annotations

import re
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


_ABOUT = re.compile(r"about (\d+(?:\.\d+)?) s")


class BuildProgress:
    """The first run's one progress line: what is happening now, how long it has taken, and what is left.

    The steps are the model's load (a first use exports its ONNX graph), reading
    the sample documents, embedding their passages and indexing them. An ETA is
    given only where there is something to base it on: the embedding rate
    measured so far, or the engine's own estimate for a one-off step ("about
    10 s"). Otherwise the line says how long the step has run, never a guess.
    `clock` is injectable for tests.
    """

    STEPS = ("loading the model", "reading the documents", "embedding passages", "indexing")

    def __init__(self, dataset: str, documents: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.dataset = dataset
        self.documents = documents
        self.clock = clock
        self.started = clock()
        self.step = 0
        self.step_started = self.started
        self.detail = ""                       # the engine's latest word on the step (e.g. the ONNX export)
        self.done = self.total = 0
        self._estimate: float | None = None    # the engine's "about N s" for this step, if it gave one
        self._first: tuple[float, int] | None = None   # (time, done) at the first embedding report

    def _enter(self, step: int) -> None:
        if step != self.step:
            self.step, self.step_started, self.detail, self._estimate = step, self.clock(), "", None

    def noted(self, line: str) -> None:
        """A line from the model's warm-up (e.g. "exporting … to ONNX … (once, about 10 s)")."""
        self.detail = line
        about = _ABOUT.search(line)
        if about:
            self._estimate, self.step_started = float(about.group(1)), self.clock()

    def model_ready(self) -> None:
        self._enter(1)

    def progressed(self, stage: str, done: int, total: int) -> None:
        """An ingest progress event: `stage` is "reading" (documents), "embedding" or "indexing ..."."""
        if stage == "reading":
            self._enter(1)
        elif stage == "embedding":
            self._enter(2)
            if self._first is None or done < self._first[1]:
                self._first = (self.clock(), done)
        else:
            self._enter(3)
            self.detail = stage.removeprefix("indexing").strip()
        self.done, self.total = done, total

    def eta(self) -> float | None:
        """Seconds left in this step, when there is a measured rate or the engine's own estimate; else None."""
        now = self.clock()
        if self.step == 2 and self._first is not None and self.total:
            since, first_done = self._first
            if self.done > first_done and now > since:
                rate = (self.done - first_done) / (now - since)
                return (self.total - self.done) / rate
        if self._estimate is not None:
            return max(0.0, self._estimate - (now - self.step_started))
        return None

    def line(self) -> str:
        now = self.clock()
        parts = [f"first run: building '{self.dataset}' from {self.documents} samples",
                 f"{self.step + 1}/{len(self.STEPS)} {self.STEPS[self.step]}"]
        if self.step in (1, 2) and self.total:
            parts[-1] += f" {self.done}/{self.total}"
        elif self.step == 3 and self.detail:
            parts[-1] += f" ({self.detail})"
        elif self.step == 0 and self.detail:
            parts[-1] += " (exporting it to ONNX, once)" if "ONNX" in self.detail else ""
        parts.append(f"{now - self.started:.0f} s")
        eta = self.eta()
        if eta is not None:
            parts.append(f"about {max(1, round(eta))} s left")
        return " · ".join(parts)
