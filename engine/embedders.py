"""Turning text into vectors.

`Embedder` is the seam: the engine asks for vectors, and does not care whether
they come from sentence-transformers or from a test's tiny deterministic
stand-in. The real one loads offline from a local folder and imports torch
only when it first encodes, so commands that never embed stay fast.
"""

from __future__ import annotations

import threading
from typing import Callable, Protocol, Sequence

import numpy as np

from .errors import precondition
from .models import ModelCard, how_to_set_model, quiet_offline_environment

ProgressFn = Callable[[int], None]  # called with the number of texts just encoded


class Embedder(Protocol):
    """Anything that maps texts to unit-length float32 vectors of a fixed dimension."""

    @property
    def card(self) -> ModelCard: ...

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress: ProgressFn | None = None) -> np.ndarray: ...


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded from a local folder, on the CPU."""

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
        out = np.empty((len(texts), self._card.dimension), dtype=np.float32)
        # Longest first over the whole call, so each batch pads to a similar
        # length; then encode in slices so a caller can show progress.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        step = max(batch_size * 8, 1)
        for start in range(0, len(order), step):
            picked = order[start:start + step]
            vectors = model.encode(
                [texts[i] for i in picked],
                batch_size=batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
            out[picked] = vectors
            if progress is not None:
                progress(len(picked))
        return out


def load_embedder(card: ModelCard | None) -> Embedder | None:
    """The real embedder for a model card, or None when no model is configured."""
    return None if card is None else SentenceTransformerEmbedder(card)


def no_embedder_error(what: str) -> Exception:
    return precondition(
        f"{what} needs an embedding model, and none is configured (KX_SERVE_EMBED_MODEL=none); "
        f"{how_to_set_model()}, or pass pre-computed vectors"
    )
