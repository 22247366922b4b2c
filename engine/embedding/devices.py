"""Where ONNX Runtime embeds: the execution providers for KX_EMBED_DEVICE, and why (a leaf: imports nothing)."""

from __future__ import annotations

from typing import Sequence

from ..config import ENV

CUDA_PROVIDER = "CUDAExecutionProvider"
CPU_PROVIDER = "CPUExecutionProvider"


def choose_providers(device: str, available: Sequence[str]) -> tuple[list, str]:
    """ONNX Runtime's execution providers for KX_EMBED_DEVICE=`device`, and the sentence `kx info` shows.

    `available` is onnxruntime.get_available_providers(): the CUDA provider is
    there only with the onnxruntime-gpu package. TF32 stays off on the GPU so
    its vectors match the CPU's to the graph's open-time check (cos >= 0.99999).
    """
    if device == "cpu":
        return [CPU_PROVIDER], f"CPU ({ENV.embed_device}=cpu)"
    if CUDA_PROVIDER in available:
        return [(CUDA_PROVIDER, {"use_tf32": "0"}), CPU_PROVIDER], f"CUDA GPU ({ENV.embed_device}={device})"
    return [CPU_PROVIDER], (f"CPU: {ENV.embed_device}={device} but this onnxruntime has no CUDA provider; for a GPU, "
                            "`pip install onnxruntime-gpu` (in place of onnxruntime) with an NVIDIA driver and CUDA 12")


def device_plan(device: str) -> dict[str, object]:
    """Where ONNX Runtime will embed, said without importing it (`kx info` stays light)."""
    from importlib import metadata

    try:
        metadata.distribution("onnxruntime-gpu")
        available: tuple[str, ...] = ("CUDAExecutionProvider", "CPUExecutionProvider")
    except metadata.PackageNotFoundError:
        available = ("CPUExecutionProvider",)
    providers, reason = choose_providers(device, available)
    planned = "cuda" if providers[0] != "CPUExecutionProvider" else "cpu"
    if planned == "cuda":
        reason += "; falls back to CPU if no GPU answers when the model loads"
    return {"device": planned, "device_reason": reason}
