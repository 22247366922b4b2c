"""The torch runtime: a sentence-transformers model loaded from a local folder.

The reference the ONNX export is checked against, and the fallback when no
graph validates. sentence-transformers (and so torch) is imported on first
encode, never at import.
"""

from __future__ import annotations

import threading
from typing import Sequence

import numpy as np

from ..config import ENV
from ..errors import precondition
from .cards import ModelCard, how_to_set_model, quiet_offline_environment
from .runtime import ProgressFn, encode_longest_first


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
                f"or {ENV.embed_model}=none for pre-computed vectors and sparse search only"
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
