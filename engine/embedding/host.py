"""ModelHost: the one object that owns a process's embedding model.

It describes the configured model from its files (the card: no torch), loads
it once on first use (one load even when a warm-up and a first request ask at
once), loads it on a thread while a cold query opens its indexes, and
prepares it (the ONNX export on first use). The embedded `Engine`, the Milvus
backend and `kx models prepare` each hold one, instead of one borrowing
another's model.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ..config import ENV, Settings
from ..errors import KxError
from ..records import IngestEventFn as EventFn
from ..records import Notice, NotifyFn
from ..setting_values import served_model
from .cards import ModelCard, chat_model_advisory, model_card_for

if TYPE_CHECKING:
    from .embedders import Embedder


UNSET: Any = object()  # "not given": an embedder of None means 'no model', so None cannot say it


class ModelHost:
    """The configured embedding model of one settings object: its card, its embedder, its preparation."""

    def __init__(self, settings: Settings, embedder: Embedder | None = UNSET,
                 on_notice: NotifyFn | None = None) -> None:
        self.settings = settings
        self.on_notice = on_notice  # one line for a person when the model is first prepared (an export)
        self._embedder = embedder
        self._card: Any = UNSET if embedder is UNSET else (embedder.card if embedder else None)  # ModelCard | None
        self._lock = threading.Lock()

    def card(self) -> ModelCard | None:
        """The configured model, described from its files (no torch). None for 'none'."""
        if self._card is UNSET:
            if served_model(self.settings.embed_model):  # asks the server (the probe): no torch either
                from .served import served_card

                self._card = served_card(self.settings)
            else:
                self._card = model_card_for(self.settings.embed_model)
        return self._card

    @property
    def loaded(self) -> bool:
        """Whether the embedder is in hand (given, or loaded): asking for it costs nothing then."""
        return self._embedder is not UNSET

    def loaded_embedder(self) -> Embedder | None:
        """The embedder if it is already in hand, else None: never loads."""
        return None if self._embedder is UNSET else self._embedder

    def embedder(self) -> Embedder | None:
        """The embedder, loaded on first call; None when the model is 'none'."""
        if self._embedder is UNSET:
            # one load even when a server's warm-up and its first request ask at once (two would share 2 cores)
            with self._lock:
                if self._embedder is UNSET:
                    from .embedders import load_embedder

                    self._embedder = load_embedder(self.card(), self.settings, self._notice)
        return self._embedder

    def load_in_background(self) -> threading.Thread | None:
        """Start loading the model on a thread (engine/query.py: while a cold query opens the indexes);
        None when it is loaded already or none is configured. A failed load is left for the next
        `embedder()` call to raise, on the caller's thread."""
        if self._embedder is not UNSET:
            return None
        try:
            if self.card() is None:
                return None
        except KxError:  # a model that cannot be described: the query says so where it always did
            return None

        def load() -> None:
            try:
                prepare = getattr(self.embedder(), "prepare", None)  # the runtime embedder loads lazily
                if prepare is not None:
                    prepare()
            except BaseException:  # the query's own embedder() or encode raises it again, on its thread
                pass

        thread = threading.Thread(target=load, name="kx-model-load")
        thread.start()
        return thread

    def prepare(self, notify: NotifyFn | None = None) -> dict[str, Any] | None:
        """Load the model now, exporting its ONNX graph if this is its first use; the runtime status.

        None when no model is configured. The TUI's warm-up and `kx models prepare` call this.
        """
        from .onnx_cache import runtime_status

        embedder = self.embedder()
        prepare = getattr(embedder, "prepare", None)
        if callable(prepare):
            prepare(notify)
        return runtime_status(embedder, self.settings, self.card())

    def warm_up(self, notify: NotifyFn | None = None) -> bool:
        """Prepare the model and pay its first call's one-off costs; False when no model is configured."""
        if self.card() is None:
            return False
        self.prepare(notify)  # exports the ONNX graph on first use, saying so through `notify`
        embedder = self.embedder()
        if embedder is None:
            return False
        embedder.encode(["warm up"])  # loads the weights and pays the first call's one-off costs
        return True

    def describe(self) -> tuple[dict[str, Any] | None, list[str]]:
        """`kx info`'s model entry (its card and runtime, or the error describing it) and its advisories."""
        from .onnx_cache import runtime_status

        try:
            card = self.card()
            if card is None:
                return None, [f"no embedding model ({ENV.embed_model}=none): text ingest and dense search "
                              "are off; pre-computed vectors and sparse search still work"]
            model = {**card.to_dict(), "runtime": runtime_status(self.loaded_embedder(), self.settings, card)}
        except KxError as exc:  # shown as the model's state, not repeated as an advisory
            return {"error": exc.to_dict()}, []
        return model, [chat_model_advisory(card)] if card.causal_lm else []

    def _notice(self, line: str) -> None:
        if self.on_notice is not None:
            self.on_notice(line)


def prepare_embedder(embedder: Embedder, emit: EventFn) -> None:
    """Load the model now if it loads lazily; a first use exports its ONNX graph, said through `emit`."""
    prepare = getattr(embedder, "prepare", None)  # the runtime embedders load lazily; a test's does not
    if callable(prepare):
        prepare(lambda line: emit(Notice("preparing", line)))
