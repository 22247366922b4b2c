"""The main screen's start: the model warmed now, not at the first query, and the engine's advisories said once.

`ModelStart` is a part the main screen holds, not a widget. Its two workers
run on the screen: the warm-up (warmup.ModelWarmup, shared by every screen
that queries; over a gateway there is nothing to load) posts each of the
backend's progress lines as WarmupNoted and ModelWarmed when done, which the
screen hands back here; the advisories (a chat model, no model, a gateway's
broken model) come from the backend's info() as notifications.
"""

from __future__ import annotations

from typing import Callable

from engine.errors import KxError

from ..messages import ModelWarmed, WarmupNoted
from .first_run import FirstRun
from .keys import KeysScreen


class ModelStart:
    def __init__(self, screen: KeysScreen, first_run: FirstRun, on_change: Callable[[], None]) -> None:
        """`first_run`'s progress line says the warm-up's notes while it builds; `on_change` redraws the status
        line, which says the model's state."""
        self.screen = screen
        self.first_run = first_run
        self.on_change = on_change

    def start(self) -> None:
        self.screen.run_worker(self._warm_up, name="warm_up", group="warm-up", thread=True, exit_on_error=False)

    def advise(self) -> None:
        self.screen.run_worker(self._advise, name="show_advisories", group="advisories", thread=True,
                               exit_on_error=False)

    def _warm_up(self) -> None:
        """Load the model now, not at the first query (over a gateway there is nothing to load)."""
        self.screen.kx.warmup.run(self._noted_from_worker)  # e.g. a first use's ONNX export
        self.screen.post_message(ModelWarmed())

    def _noted_from_worker(self, line: str) -> None:
        self.screen.post_message(WarmupNoted(line))   # post_message is thread-safe

    def noted(self, message: WarmupNoted) -> None:
        if not self.first_run.noted(message.line):    # the first run's progress line says it, if one runs
            self.screen.notify(message.line, title="embedding model", timeout=10)

    def warmed(self) -> None:
        error = self.screen.kx.warmup.error
        if error is not None:
            self.screen.notify(error.message, title="embedding model", severity="error", timeout=15)
        self.first_run.model_ready()
        self.on_change()

    def _advise(self) -> None:
        """Say once, at start, what the engine warns about (a chat model, no model, a gateway's broken model)."""
        try:
            info = self.screen.kx.backend.info()
        except KxError:
            return   # e.g. a gateway that is down: the datasets' listing says so, once
        model = info.get("embed_model") or {}
        notify = self.screen.notify
        if isinstance(model, dict) and "error" in model and self.screen.kx.settings is None:
            # locally the warm-up reports it; a gateway's model is loaded over there
            self.screen.app.call_from_thread(notify, model["error"]["message"], title="embedding model",
                                             severity="error", timeout=15)
        for advisory in info.get("advisories", []):
            self.screen.app.call_from_thread(notify, advisory, title="advisory", severity="warning", timeout=15)
