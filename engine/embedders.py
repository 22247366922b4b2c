"""Turning text into vectors.

`Embedder` is the seam: the engine asks for vectors, and does not care whether
they come from ONNX Runtime, sentence-transformers or a test's tiny
deterministic stand-in. `load_embedder` gives a `RuntimeEmbedder`, which picks
the runtime on first use (engine/onnx_cache.py's plan): ONNX Runtime from a
graph exported once and checked against torch (engine/onnx_export.py), else
sentence-transformers. Nothing heavy is imported until something is embedded.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

import numpy as np

from .errors import precondition
from .models import ModelCard, how_to_set_model, quiet_offline_environment

if TYPE_CHECKING:
    from .config import Settings

ProgressFn = Callable[[int], None]  # called with the number of texts just encoded


NotifyFn = Callable[[str], None]  # one line for a person: "exporting ... (once)"


class Embedder(Protocol):
    """Anything that maps texts to unit-length float32 vectors of a fixed dimension."""

    @property
    def card(self) -> ModelCard: ...

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress: ProgressFn | None = None) -> np.ndarray: ...


def encode_longest_first(texts: Sequence[str], dimension: int, batch_size: int, progress: ProgressFn | None,
                         encode_slice: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """Encode longest first over the whole call, so each batch pads to a similar length.

    `encode_slice` gets up to eight batches' worth at a time, so a caller can
    show progress between slices.
    """
    out = np.empty((len(texts), dimension), dtype=np.float32)
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    step = max(batch_size * 8, 1)
    for start in range(0, len(order), step):
        picked = order[start:start + step]
        out[picked] = encode_slice([texts[i] for i in picked])
        if progress is not None:
            progress(len(picked))
    return out


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded from a local folder, on the CPU."""

    runtime = "torch"

    def __init__(self, card: ModelCard) -> None:
        self._card = card
        self._model = None
        self._lock = threading.Lock()

    @property
    def card(self) -> ModelCard:
        return self._card

    def _load(self):
        with self._lock:
            if self._model is None:
                self._model = self._load_model()
            return self._model

    def _load_model(self):
        quiet_offline_environment()
        try:
            import warnings

            from sentence_transformers import SentenceTransformer

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = SentenceTransformer(str(self._card.path), device="cpu", local_files_only=True)
            # transformers decides about its "Loading weights" bar when first
            # imported; whoever imported it first, keep it off from here on.
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()
        except Exception as exc:  # a model that cannot be loaded is a setting to fix, not a crash
            raise precondition(
                f"embedding model {self._card.name} at {self._card.path} could not be loaded "
                f"({type(exc).__name__}: {str(exc)[:200]}); {how_to_set_model()}, "
                "or KX_SERVE_EMBED_MODEL=none for pre-computed vectors and sparse search only"
            ) from None
        tokenizer = getattr(model, "tokenizer", None)
        if tokenizer is not None and getattr(tokenizer, "pad_token", "x") is None:
            # causal LMs often ship without a pad token; batching needs one
            tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
        dimension_of = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        actual = dimension_of()
        if actual is not None and actual != self._card.dimension:
            raise precondition(
                f"embedding model {self._card.name} produces {actual}-dimensional vectors but its files "
                f"declare {self._card.dimension}; check the model folder at {self._card.path}"
            )
        return model

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress: ProgressFn | None = None) -> np.ndarray:
        model = self._load()

        def encode_slice(chunk: list[str]) -> np.ndarray:
            return model.encode(chunk, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True,
                                show_progress_bar=False)

        return encode_longest_first(texts, self._card.dimension, batch_size, progress, encode_slice)


class RuntimeEmbedder:
    """The configured model on the runtime its plan names, chosen (and exported) on first use.

    fp32 falls back to torch whenever the ONNX graph cannot be had (the reason
    is kept for `kx info`); int8 exists only as an ONNX graph, so for it that
    is a FAILED_PRECONDITION.
    """

    def __init__(self, card: ModelCard, settings: "Settings", notify: NotifyFn | None = None) -> None:
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
            return {"runtime": getattr(self._inner, "runtime", "custom"), "reason": self._reason, "loaded": True}
        from .onnx_cache import plan_runtime

        plan = plan_runtime(self._settings, self._card)
        return {"runtime": plan.runtime, "reason": plan.reason, "loaded": False}

    def prepare(self, notify: NotifyFn | None = None) -> Embedder:
        """Choose the runtime and load the model now (exporting its graph if this is the first use)."""
        with self._lock:
            if self._inner is None:
                self._inner, self._reason = self._chosen(notify or self._notify)
            return self._inner

    def _chosen(self, notify: NotifyFn | None) -> tuple[Embedder, str]:
        from .models import INT8
        from .onnx_cache import plan_runtime

        plan = plan_runtime(self._settings, self._card)
        int8 = self._card.variant == INT8
        if plan.runtime == "onnx":
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


def load_embedder(card: ModelCard | None, settings: "Settings | None" = None,
                  notify: NotifyFn | None = None) -> RuntimeEmbedder | None:
    """The real embedder for a model card (nothing loaded yet), or None when no model is configured."""
    if card is None:
        return None
    if settings is None:
        from .config import load_settings

        settings = load_settings()
    return RuntimeEmbedder(card, settings, notify)


def no_embedder_error(what: str) -> Exception:
    return precondition(
        f"{what} needs an embedding model, and none is configured (KX_SERVE_EMBED_MODEL=none); "
        f"{how_to_set_model()}, or pass pre-computed vectors"
    )
