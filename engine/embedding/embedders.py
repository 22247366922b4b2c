"""Turning text into vectors.

`Embedder` is the seam: the engine asks for vectors, and does not care whether
they come from ONNX Runtime, sentence-transformers or a test's tiny
deterministic stand-in. `load_embedder` gives a `RuntimeEmbedder`, which picks
the runtime on first use (engine/embedding/onnx_cache.py's plan): ONNX Runtime from a
graph exported once and checked against torch (engine/embedding/onnx_export.py), else
sentence-transformers (engine/embedding/torch_runtime.py). The protocol and the shared
batching live in engine/embedding/runtime.py. Nothing heavy is imported until
something is embedded.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..config import ENV, Runtime
from ..errors import precondition
from ..records import NotifyFn
from .cards import ModelCard, how_to_set_model
from .runtime import Embedder, ProgressFn
from .torch_runtime import SentenceTransformerEmbedder

if TYPE_CHECKING:
    from ..config import Settings



class RuntimeEmbedder:
    """The configured model on the runtime its plan names, chosen (and exported) on first use.

    fp32 falls back to torch whenever the ONNX graph cannot be had (the reason
    is kept for `kx info`); int8 exists only as an ONNX graph, so for it that
    is a FAILED_PRECONDITION.
    """

    def __init__(self, card: ModelCard, settings: Settings, notify: NotifyFn | None = None) -> None:
        self._card = card
        self._settings = settings
        self._notify = notify
        self._inner: Embedder | None = None
        self._reason = ""
        self._lock = threading.Lock()

    @property
    def card(self) -> ModelCard:
        return self._card

    def status(self) -> dict[str, object]:
        """{"runtime", "reason", "loaded"}: what runs (or will), and why."""
        if self._inner is not None:
            status: dict[str, object] = {"runtime": getattr(self._inner, "runtime", "custom"), "reason": self._reason,
                                         "loaded": True}
            if hasattr(self._inner, "device_reason"):  # ONNX Runtime: which device embeds, and why
                status.update(device=getattr(self._inner, "device", "cpu"), device_reason=self._inner.device_reason)
            return status
        from .onnx_cache import planned_status

        return planned_status(self._settings, self._card)

    def prepare(self, notify: NotifyFn | None = None) -> Embedder:
        """Choose the runtime and load the model now (exporting its graph if this is the first use)."""
        with self._lock:
            if self._inner is None:
                self._inner, self._reason = self._chosen(notify or self._notify)
            return self._inner

    def _chosen(self, notify: NotifyFn | None) -> tuple[Embedder, str]:
        from .cards import INT8
        from .onnx_cache import plan_runtime

        plan = plan_runtime(self._settings, self._card)
        int8 = self._card.variant == INT8
        if plan.runtime == Runtime.ONNX:
            from .onnx_export import GraphUnavailable, open_onnx

            try:
                embedder = open_onnx(self._settings, self._card, notify)
                return embedder, plan_runtime(self._settings, self._card).reason
            except GraphUnavailable as exc:
                reason = str(exc)
                if not int8 and notify:
                    notify(f"using torch for {self._card.name}: the ONNX graph is not available ({reason})")
        else:
            reason = plan.reason
            if plan.fallback and not int8 and notify:
                notify(f"using torch for {self._card.name}: {reason}")
        if int8:
            from .onnx_export import prepare_failure

            raise prepare_failure(self._card, reason)
        return SentenceTransformerEmbedder(self._card), reason

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress: ProgressFn | None = None) -> np.ndarray:
        return self.prepare().encode(texts, batch_size, progress)


def load_embedder(card: ModelCard | None, settings: Settings | None = None,
                  notify: NotifyFn | None = None) -> Embedder | None:
    """The real embedder for a model card (nothing loaded yet), or None when no model is configured."""
    if card is None:
        return None
    if settings is None:
        from ..config import load_settings

        settings = load_settings()
    if card.endpoint:  # a served model: its server embeds
        from .served import ServedEmbedder

        return ServedEmbedder(card, settings)
    return RuntimeEmbedder(card, settings, notify)


def no_embedder_error(what: str) -> Exception:
    return precondition(
        f"{what} needs an embedding model, and none is configured ({ENV.embed_model}=none); "
        f"{how_to_set_model()}, or pass pre-computed vectors"
    )
