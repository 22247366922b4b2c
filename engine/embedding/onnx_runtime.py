"""A sentence-transformers model run by ONNX Runtime: the same vectors without torch.

The pipeline reproduces sentence-transformers' own for Transformer -> Pooling
(-> Normalize) models: the model's tokenizer.json through the `tokenizers`
library, truncated at the model's max sequence length and padded per batch;
the graph run by onnxruntime; pooling over the attention mask and L2
normalisation in numpy. Importing this module imports no torch, transformers
or sentence-transformers, which is the point: a cold query pays ~0.3 s, not ~4.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np

from ..config import ENV
from .cards import ModelCard
from .devices import CPU_PROVIDER, CUDA_PROVIDER, choose_providers
from .runtime import ProgressFn, encode_longest_first

_DEFAULT_MAX_TOKENS = 512


def load_tokenizer(card: ModelCard):
    """The model's fast tokenizer, truncating and padding as sentence-transformers does.

    The bundled tokenizer.json carries truncation at 128 and fixed padding to
    128; sentence-transformers overrides both (truncation at max_seq_length,
    padding to the longest text of a batch), so we do too, or long passages
    would silently differ and a short query would pay for 128 tokens.
    """
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(card.path / "tokenizer.json"))
    padding = tokenizer.padding or {}
    pad_token = padding.get("pad_token") or _first_present(tokenizer, ("[PAD]", "<pad>", "<|pad|>")) or "[PAD]"
    pad_id = padding.get("pad_id") if padding.get("pad_token") else tokenizer.token_to_id(pad_token)
    tokenizer.no_truncation()
    tokenizer.enable_truncation(max_length=card.max_seq_length or _DEFAULT_MAX_TOKENS)
    tokenizer.enable_padding(pad_id=int(pad_id or 0), pad_token=pad_token)
    return tokenizer


def _first_present(tokenizer, candidates: Sequence[str]) -> str | None:
    return next((t for t in candidates if tokenizer.token_to_id(t) is not None), None)


def session_options(threads: int):
    """One intra-op pool of `threads` (0: one per core), sequential, full graph optimisation.

    The memory arena stays on: without it batch throughput drops by ~40 %.
    The pool does not spin between runs: on a busy 2-core machine a spinning
    pool took the CPU from whatever ran next (the BM25 search of the same
    query, torch, a neighbour) and one query's embedding took 17-20 ms p50
    against 9-11 ms without spinning, for the same batch throughput.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or (os.cpu_count() or 1)
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # warnings about unused initialisers are not the user's business
    return options


class OnnxEmbedder:
    """Vectors from an exported graph; see the module head for the pipeline."""

    runtime = "onnx"

    def __init__(self, card: ModelCard, graph: Path, threads: int = 0, device: str = "cpu") -> None:
        import onnxruntime as ort

        self._card = card
        self.graph = graph
        providers, self.device_reason = choose_providers(device, ort.get_available_providers())
        self._session = ort.InferenceSession(str(graph), session_options(threads), providers=providers)
        self.device = "cuda" if CUDA_PROVIDER in self._session.get_providers() else "cpu"
        if self.device == "cpu" and providers[0] != CPU_PROVIDER:  # the provider is installed, but no GPU answered
            self.device_reason = (f"CPU: {ENV.embed_device}={device} and onnxruntime's CUDA provider is installed, "
                                  "but it could not start (no GPU, or a CUDA/cuDNN mismatch); running on CPU")
        # only the inputs the graph lists: BERT takes token_type_ids, others do not
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = load_tokenizer(card)

    @property
    def card(self) -> ModelCard:
        return self._card

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress: ProgressFn | None = None) -> np.ndarray:
        def encode_slice(chunk: list[str]) -> np.ndarray:
            return np.concatenate([self._encode_batch(chunk[i:i + batch_size])
                                   for i in range(0, len(chunk), max(batch_size, 1))])

        return encode_longest_first(texts, self._card.dimension, batch_size, progress, encode_slice)

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        return _normalised(_pooled(hidden, mask, self._card.pooling))


def _pooled(hidden: np.ndarray, mask: np.ndarray, pooling: str) -> np.ndarray:
    if pooling == "cls":
        return hidden[:, 0]
    weights = mask[:, :, None].astype(np.float32)
    if pooling == "max":
        return np.where(weights > 0, hidden, -1e9).max(axis=1)
    # mean over the real tokens; the count clamped as sentence-transformers does
    return (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)


def _normalised(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.clip(norms, 1e-12, None)).astype(np.float32)
