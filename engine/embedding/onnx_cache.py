"""Where exported ONNX graphs live, and which runtime a model will run on.

One folder per model id under `Settings.model_cache_dir` ($KX_HOME/models
unless KX_MODEL_CACHE says otherwise):

    <model id>/model.onnx      the graph
    <model id>/manifest.json   written last, so its presence means the graph is whole:
                               the graph's size, the probe vectors it gave, the versions
    <model id>/failed.json     why the last export was not used (then torch is)

`plan_runtime` decides onnx or torch from these files and the settings alone;
nothing here imports numpy, onnxruntime or torch, so `kx info` can say which
runtime is in use, and why, in a few milliseconds.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..atomic import read_json, write_json_atomic
from ..config import ENV, Runtime, Settings
from .cards import INT8, ModelCard
from .cards import INT8_SCHEME as _SCHEME

GRAPH = "model.onnx"
MANIFEST = "manifest.json"
FAILED = "failed.json"
FORMAT = 1
MIN_COSINE = 0.9999       # fp32 ONNX against torch, per probe sentence: "the same vectors"
MIN_COSINE_INT8 = 0.95    # int8 against torch: a different model, but not a broken one
# The int8 scheme (models.INT8_SCHEME) as the manifest records it; a graph made under another is re-made.
# Measured on AVX2-only: probe min cosine 0.959 to torch (s8 weights: 0.946; s8 7-bit: 0.961, but its
# Cranfield nDCG@10 cost 0.013 against 0.005 for u8u8, BENCHMARKS.md).
INT8_SCHEME = f"dynamic-{_SCHEME}-per-channel"
_ST_MODULES = ("Transformer", "Pooling", "Normalize")  # the pipelines the ONNX path reproduces
_POOLINGS = ("mean", "cls", "max")


@dataclass(frozen=True)
class RuntimePlan:
    """The runtime a model will run on, the sentence that says why, and its cached graph if ready."""

    runtime: Runtime
    reason: str
    folder: Path
    graph: Path | None      # a whole graph with its manifest; None: to be exported on first use
    fallback: bool = False  # torch although ONNX was asked for and could work: worth a line to the user


def model_folder(settings: Settings, card: ModelCard) -> Path:
    return settings.model_cache_dir / re.sub(r"[^A-Za-z0-9._@+-]", "_", card.model_id)


def read_manifest(folder: Path, card: ModelCard) -> dict[str, Any] | None:
    """The manifest of a whole graph for this model, or None (missing, torn, another model's)."""
    manifest = read_json(folder / MANIFEST)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("model_id") != card.model_id:
        return None
    try:
        size = (folder / GRAPH).stat().st_size
    except OSError:
        return None
    if card.variant == INT8 and manifest.get("quantisation") != INT8_SCHEME:
        return None  # an int8 graph from before the current scheme: quantised again on first use
    whole = size == manifest.get("graph_bytes") and isinstance(manifest.get("min_cosine"), float) \
        and isinstance(manifest.get("probes"), int) and isinstance(manifest.get("probe_vectors"), list)
    return manifest if whole else None


def file_sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def graph_unchanged(folder: Path, manifest: dict[str, Any]) -> bool:
    """Whether the graph is the one the manifest describes.

    Hashing 90 MB costs ~0.14 s, too much for every cold query, so the hash is
    checked only when the file's modification time is not the one recorded
    (anything that wrote to it since); a copy that keeps its times passes.
    """
    graph = folder / GRAPH
    try:
        if graph.stat().st_mtime_ns == manifest.get("graph_mtime_ns"):
            return True
        return file_sha256(graph) == manifest.get("graph_sha256")
    except OSError:
        return False


def read_failure(folder: Path, card: ModelCard) -> dict[str, Any] | None:
    """Why the last export was refused, if it was refused under the libraries installed now."""
    failure = read_json(folder / FAILED)
    if not isinstance(failure, dict) or failure.get("model_id") != card.model_id:
        return None
    return failure if failure.get("versions") == library_versions() else None


def record_failure(folder: Path, card: ModelCard, reason: str) -> None:
    """Remember a refused export so later commands go straight to torch (best effort)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_json_atomic(folder / FAILED, {"model_id": card.model_id, "reason": reason,
                                            "versions": library_versions()})
    except OSError:
        pass  # a read-only cache: the next command finds out again, and says the same


def clear_failure(folder: Path) -> None:
    try:
        (folder / FAILED).unlink()
    except FileNotFoundError:
        pass


def library_versions() -> dict[str, str]:
    """The versions an export depends on, read from package metadata (no imports)."""
    from importlib import metadata

    out = {}
    for name in ("torch", "onnxruntime", "onnx"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def unsupported_reason(card: ModelCard) -> str | None:
    """Why this model cannot take the ONNX path, or None when it can."""
    if card.causal_lm:
        return f"{card.name} is a chat (causal-LM) model, which kx runs through sentence-transformers"
    if not (card.path / "tokenizer.json").is_file():
        return f"{card.name} has no tokenizer.json for the tokenizers library"
    if card.pooling not in _POOLINGS:
        return f"{card.name} pools by {card.pooling!r}, which the ONNX path does not reproduce"
    modules = read_json(card.path / "modules.json")
    for module in modules if isinstance(modules, list) else []:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        if kind not in _ST_MODULES:
            return f"{card.name} has a {kind} module, which the ONNX path does not reproduce"
    for name in ("onnxruntime", "tokenizers"):
        if importlib.util.find_spec(name) is None:
            return f"{name} is not installed (pip install {name})"
    return None


def unwritable_reason(folder: Path) -> str | None:
    """Why no graph can be written at `folder`, or None when one can (probed with a real file)."""
    existing = folder
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        return f"the model cache {folder} lies under {existing}, which is not a folder"
    probe = existing / f".kx-write-probe-{os.getpid()}"
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        probe.unlink()
    except OSError as exc:
        return (f"the model cache {existing} is not writable ({exc.strerror}); set {ENV.model_cache} to a writable "
                "folder")
    return None


def plan_runtime(settings: Settings, card: ModelCard) -> RuntimePlan:
    """Which runtime `card` runs on under `settings`, and why; reads files only."""
    folder = model_folder(settings, card)
    int8 = card.variant == INT8
    if settings.embed_runtime == Runtime.TORCH and not int8:
        return RuntimePlan(Runtime.TORCH, f"{ENV.embed_runtime}=torch", folder, None)
    if (reason := unsupported_reason(card)) is not None:
        return RuntimePlan(Runtime.TORCH, reason, folder, None)
    manifest = read_manifest(folder, card)
    how = "int8 runs on ONNX Runtime only; " if int8 and settings.embed_runtime == "torch" else ""
    if manifest is not None:
        check = f"min cosine {manifest['min_cosine']:.7f} to torch on {manifest['probes']} probe sentences"
        if int8:
            check += f"; int8 scheme {INT8_SCHEME}, safe on CPUs with or without VNNI"
        return RuntimePlan(Runtime.ONNX, f"{how}graph at {folder / GRAPH} ({check})", folder, folder / GRAPH)
    failure = read_failure(folder, card)
    if failure is not None:
        return RuntimePlan(Runtime.TORCH, f"the ONNX export was not used: {failure['reason']} "
                                    "(`kx models prepare --retry` tries again)", folder, None, fallback=True)
    if (reason := unwritable_reason(folder)) is not None:
        return RuntimePlan(Runtime.TORCH, f"no ONNX graph yet and {reason}", folder, None, fallback=True)
    return RuntimePlan(Runtime.ONNX, f"{how}the graph is exported to {folder} on first use "
                               "(or now, with `kx models prepare`)", folder, None)


def runtime_status(embedder: Any, settings: Settings, card: ModelCard | None) -> dict[str, Any] | None:
    """What `kx info` shows about the runtime: a loaded embedder's own word, else the plan's."""
    if card is None:
        return None
    if card.endpoint and embedder is None:
        from .served import served_status

        return served_status(card)
    status = getattr(embedder, "status", None)
    if callable(status):
        return status()
    if embedder is not None:
        return {"runtime": getattr(embedder, "runtime", "custom"), "reason": "an embedder given by the caller",
                "loaded": True}
    return planned_status(settings, card)


def planned_status(settings: Settings, card: ModelCard) -> dict[str, Any]:
    """The runtime (and, for ONNX, the device) a model not yet loaded will run on, and why; reads files only."""
    from .devices import device_plan

    plan = plan_runtime(settings, card)
    # prepared: nothing is left to do before the first use (the graph is exported, or torch needs none)
    planned: dict[str, Any] = {"runtime": plan.runtime, "reason": plan.reason, "loaded": False,
                               "prepared": plan.graph is not None or plan.runtime == Runtime.TORCH}
    if plan.runtime == Runtime.ONNX:
        planned.update(device_plan(settings.embed_device))
    return planned
