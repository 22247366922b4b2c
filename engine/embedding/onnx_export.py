"""Exporting a model to ONNX once, checking it, and opening it from the cache.

The graph comes from the model folder through torch.onnx's TorchScript
exporter (eager attention: an `sdpa` export runs ~27 % slower in ONNX
Runtime; opset 17; dynamic batch and sequence axes). Right after export it is
checked against sentence-transformers itself on fixed probe sentences: every
probe's cosine must reach MIN_COSINE (fp32) or the graph is not used, the
refusal is recorded and torch runs instead. The int8 variant is the fp32
graph through onnxruntime's dynamic quantisation (unsigned 8-bit, per channel).

Files are written beside their final name, fsynced and renamed; the manifest
goes last, so a crash leaves either a whole graph or none. On open, the graph
is compared with its manifest (the sha256, when its modification time moved)
and re-encodes two probes, which must give the vectors the manifest recorded;
a damaged graph fails one of these (or fails to load) and is exported again.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

from ..atomic import replace_with, write_json_atomic
from ..config import ENV, Settings
from ..errors import KxError, precondition
from ..records import NotifyFn
from .cards import INT8, ModelCard, base_card, quiet_offline_environment
from .onnx_cache import (
    FORMAT,
    GRAPH,
    INT8_SCHEME,
    MANIFEST,
    MIN_COSINE,
    MIN_COSINE_INT8,
    clear_failure,
    file_sha256,
    graph_unchanged,
    model_folder,
    read_manifest,
    record_failure,
    unwritable_reason,
)
from .onnx_runtime import OnnxEmbedder

# Short, long (past 256 tokens, so truncation is checked), non-English, code, numbers.
PROBES = (
    "What is the boiling point of water at sea level?",
    "Mitochondria are the organelles that produce most of the cell's supply of adenosine triphosphate.",
    "def merge(a, b):\n    return sorted(a + b)  # a tiny Python function",
    "Der schnelle braune Fuchs springt über den faulen Hund; l'été dernier à Montréal, 東京タワー.",
    "In 2019 the median household income rose 6.8 % to $68,703, the highest on record.",
    " ".join(["The committee reviewed the annual report on regional water quality, soil erosion and "
              "the effects of agricultural runoff on downstream fisheries."] * 12),
    "ok",
)
_OPEN_PROBES = 2  # re-encoded on every open: a few milliseconds that catch a damaged graph


class GraphUnavailable(Exception):
    """The ONNX path cannot be used for this model; the message says why (shown by `kx info`)."""


def open_onnx(settings: Settings, card: ModelCard, notify: NotifyFn | None = None) -> OnnxEmbedder:
    """The ONNX embedder for `card` from the cache, exporting (or re-exporting) it first if needed.

    Raises GraphUnavailable when the graph cannot be made, checked or written.
    """
    folder = model_folder(settings, card)
    embedder = _opened_if_intact(settings, card, folder)
    if embedder is not None:
        return embedder
    if read_manifest(folder, card) is not None and notify:
        notify(f"the cached ONNX graph of {card.name} is damaged; exporting it again")
    _export_under_lock(settings, card, folder, notify)
    embedder = _opened_if_intact(settings, card, folder)
    if embedder is None:
        raise GraphUnavailable(f"the freshly exported graph in {folder} does not reproduce its own probe vectors")
    return embedder


def _opened_if_intact(settings: Settings, card: ModelCard, folder: Path) -> OnnxEmbedder | None:
    import numpy as np

    manifest = read_manifest(folder, card)
    if manifest is None or not graph_unchanged(folder, manifest):
        return None
    try:
        embedder = OnnxEmbedder(card, folder / GRAPH, settings.embed_threads, settings.embed_device)
        got = embedder.encode(list(PROBES[:_OPEN_PROBES]))
        expected = np.asarray(manifest["probe_vectors"][:_OPEN_PROBES], dtype=np.float32)
    except Exception:  # onnxruntime refuses a torn or garbled file in many ways; a hand-edited manifest too
        return None
    if got.shape != expected.shape or not float(np.min(np.sum(got * expected, axis=1))) >= 0.99999:
        return None
    return embedder


def _export_under_lock(settings: Settings, card: ModelCard, folder: Path, notify: NotifyFn | None) -> None:
    import filelock

    if (reason := unwritable_reason(folder)) is not None:
        raise GraphUnavailable(reason)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # another kx process may be exporting the same model: wait for it, then use its graph
        with filelock.FileLock(str(folder / ".export.lock"), timeout=900):
            if _opened_if_intact(settings, card, folder) is None:
                _export_checked(settings, card, folder, notify)
    except OSError as exc:
        raise GraphUnavailable(f"the model cache {folder} could not be written ({exc.strerror or exc})") from None


def _export_checked(settings: Settings, card: ModelCard, folder: Path, notify: NotifyFn | None) -> None:
    started = time.perf_counter()
    clear_failure(folder)
    (folder / MANIFEST).unlink(missing_ok=True)  # from here until the new manifest, the graph is not whole
    tmp = folder / f".{GRAPH}.tmp-{os.getpid()}"
    try:
        if card.variant == INT8:
            source = open_onnx(settings, base_card(card), notify).graph
            if notify:
                notify(f"quantising {base_card(card).name} to int8 (once) into {folder}")
            _quantise(source, tmp, folder)
        else:
            if notify:
                notify(f"exporting {card.name} to ONNX for fast embedding (once, about 10 s) into {folder}")
            _export_fp32(card, tmp)
        probe_vectors, min_cosine = _checked_against_torch(settings, card, tmp)
        size, digest = tmp.stat().st_size, file_sha256(tmp)
        replace_with(tmp, folder / GRAPH)
    except GraphUnavailable as exc:
        record_failure(folder, card, str(exc))
        raise
    finally:
        tmp.unlink(missing_ok=True)
    write_json_atomic(folder / MANIFEST, {
        "format": FORMAT, "model_id": card.model_id, "variant": card.variant, "graph_bytes": size,
        "graph_sha256": digest, "graph_mtime_ns": (folder / GRAPH).stat().st_mtime_ns,
        "min_cosine": min_cosine, "probes": len(PROBES),
        **({"quantisation": INT8_SCHEME} if card.variant == INT8 else {}),
        "probe_vectors": [[round(x, 7) for x in v] for v in probe_vectors],
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "export_seconds": round(time.perf_counter() - started, 1),
    })
    if notify:
        notify(f"ONNX graph of {card.name} ready: min cosine {min_cosine:.7f} to torch on {len(PROBES)} probes "
               f"({time.perf_counter() - started:.1f} s)")


def _export_fp32(card: ModelCard, target: Path) -> None:
    quiet_offline_environment()
    try:
        import torch
        from transformers import AutoModel
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
        model = AutoModel.from_pretrained(str(card.path), attn_implementation="eager", local_files_only=True)
        model.eval()
        names = ["input_ids", "attention_mask"]
        import inspect

        if "token_type_ids" in inspect.signature(model.forward).parameters:
            names.append("token_type_ids")

        class LastHiddenState(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = model

            def forward(self, *inputs):
                return self.inner(**dict(zip(names, inputs))).last_hidden_state

        from .onnx_runtime import load_tokenizer

        encodings = load_tokenizer(card).encode_batch(list(PROBES[:2]))
        ids = torch.tensor([e.ids for e in encodings], dtype=torch.long)
        example = {"input_ids": ids, "attention_mask": torch.tensor([e.attention_mask for e in encodings]),
                   "token_type_ids": torch.zeros_like(ids)}
        axes = {name: {0: "batch", 1: "sequence"} for name in names}
        axes["last_hidden_state"] = {0: "batch", 1: "sequence"}
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(LastHiddenState(), tuple(example[n] for n in names), str(target),
                              input_names=names, output_names=["last_hidden_state"], dynamic_axes=axes,
                              opset_version=17, do_constant_folding=True, dynamo=False)
    except Exception as exc:  # any exporter failure means "use torch", said in one line
        raise GraphUnavailable(f"torch.onnx.export failed ({type(exc).__name__}: {str(exc)[:200]})") from None


def _quantise(source: Path, target: Path, folder: Path) -> None:
    pre = folder / f".preprocessed.onnx.tmp-{os.getpid()}"
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.quantization.shape_inference import quant_pre_process

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            quant_pre_process(str(source), str(pre), skip_symbolic_shape=True)
            # unsigned 8-bit weights (u8u8): without VNNI, x86-64 runs u8 x s8 products through
            # VPMADDUBSW, whose 16-bit pair sums saturate with signed 8-bit weights (cosine 0.946 to
            # torch on a one-word probe on an AVX2-only CPU). u8u8 products are widened first and
            # cannot saturate, so the same graph gives the same vectors on every x86-64 CPU; 7-bit
            # signed weights (reduce_range) also avoid it but cost 3 x the nDCG (BENCHMARKS.md).
            quantize_dynamic(str(pre), str(target), weight_type=QuantType.QUInt8, per_channel=True)
    except Exception as exc:
        raise GraphUnavailable(f"int8 quantisation failed ({type(exc).__name__}: {str(exc)[:200]})") from None
    finally:
        pre.unlink(missing_ok=True)


def _checked_against_torch(settings: Settings, card: ModelCard, graph: Path) -> tuple[list[list[float]], float]:
    """The vectors the open-time check expects, and the lowest probe cosine to sentence-transformers'.

    Raises GraphUnavailable below the floor.
    """
    import numpy as np

    from .torch_runtime import SentenceTransformerEmbedder

    try:
        reference = SentenceTransformerEmbedder(base_card(card)).encode(list(PROBES))
    except KxError as exc:
        raise GraphUnavailable(f"the torch reference could not be computed ({exc.message})") from None
    try:
        embedder = OnnxEmbedder(card, graph, settings.embed_threads, settings.embed_device)
        got = embedder.encode(list(PROBES))
        # int8 scales activations per batch, so the open-time check must see the very same batch
        on_open = embedder.encode(list(PROBES[:_OPEN_PROBES]))
    except Exception as exc:
        raise GraphUnavailable(f"onnxruntime could not run the exported graph ({type(exc).__name__}: "
                               f"{str(exc)[:200]})") from None
    cosines = np.sum(got * reference, axis=1)
    floor = MIN_COSINE_INT8 if card.variant == INT8 else MIN_COSINE
    low = float(cosines.min())
    if not low >= floor:  # also refuses NaN
        raise GraphUnavailable(f"its vectors differ from torch's (cosine {low:.6f} < {floor} on probe "
                               f"{int(cosines.argmin()) + 1})")
    return on_open.tolist(), low


def prepare_failure(card: ModelCard, reason: str) -> KxError:
    """The refusal for a model that can only run on ONNX Runtime (int8) when its graph cannot be had."""
    return precondition(f"{card.name} runs on ONNX Runtime only, and its graph is not available: {reason}; "
                        "run `kx models prepare --model default-int8 --retry` to try the export again "
                        f"(`kx info` says what was tried), or set {ENV.embed_model}=default for the fp32 model, "
                        "which needs no export")
