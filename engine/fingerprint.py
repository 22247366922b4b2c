"""What makes an index incompatible, and the refusal.

A dataset is stamped with the fingerprint of the configuration that built its
passages and vectors. Querying or adding to it under a different one would mix
vectors from two spaces or passages cut two ways, and rank quietly wrong; so a
mismatch is refused with FAILED_PRECONDITION naming every field that differs.
Display-only knobs (RRF K, MMR lambda, BM25 k1/b) are deliberately not here.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

from .config import BackendKind, Settings
from .embedding.cards import ModelCard
from .embedding.probe import same_served_model
from .errors import KxError, Status, precondition
from .text.analysis import MILVUS_ANALYZER_VERSION, TOKENIZER_VERSION
from .text.chunking import CHUNKER_VERSION

PRECOMPUTED_MODEL = "precomputed"


@dataclass(frozen=True)
class Fingerprint:
    embed_model: str
    pooling: str
    dimension: int
    chunker_version: str
    chunk_size: int
    chunk_overlap: int
    tokenizer_version: str
    stopwords: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fingerprint:
        """The fingerprint a stored dict describes; ValueError saying what is wrong when it is not one.

        A stored fingerprint is only ever written whole by `to_dict`, so a field missing or of another type
        means the stored copy was damaged: comparing it would refuse (or, worse, admit) the wrong settings.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"a fingerprint is a JSON object, not {type(data).__name__}")
        wrong = [f"{f.name} missing" if f.name not in data else f"{f.name} is {data[f.name]!r}"
                 for f in fields(cls) if f.name not in data or not _typed(data[f.name], f.type)]
        if wrong:
            raise ValueError("; ".join(wrong))
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    @classmethod
    def from_json(cls, raw: str, where: str) -> Fingerprint:
        """The fingerprint stored as `raw` in `where` (a file, a collection); DATA_LOSS when it is damaged."""
        try:
            return cls.from_dict(json.loads(raw))
        except ValueError as exc:  # json.JSONDecodeError is a ValueError too
            raise KxError(Status.DATA_LOSS,
                          f"the fingerprint stored in {where} is damaged ({exc}); kx cannot tell which model and "
                          "chunk settings made this dataset, so it will not answer from it or add to it. Restore "
                          "it from a backup, or ingest the original files into a new dataset") from None

    def differences(self, other: Fingerprint) -> list[str]:
        """'field: mine -> theirs' for each field that differs."""
        out = []
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if f.name == "embed_model" and same_served_model(a, b):
                continue  # one served model: its probe sketches differ by float noise only (embedding/probe.py)
            if a != b:
                out.append(f"{f.name}: {_show(a)} -> {_show(b)}")
        return out


def _typed(value: Any, kind: Any) -> bool:
    """Whether a stored field's value has its declared type (`kind` is the annotation's text here)."""
    if kind in ("int", int):
        return isinstance(value, int) and not isinstance(value, bool)
    if kind in ("bool", bool):
        return isinstance(value, bool)
    return isinstance(value, str)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def current_fingerprint(settings: Settings, card: ModelCard | None, dimension: int | None = None) -> Fingerprint:
    """The fingerprint the current configuration would stamp.

    With no model configured, the vectors are the caller's own (pre-computed):
    the model is recorded as such and the dimension is the vectors'.
    """
    tokenizer, stopwords = TOKENIZER_VERSION, settings.stopwords
    # Milvus's own analyzer builds the sparse index (engine/milvus/schema.py)
    if settings.backend == BackendKind.MILVUS:
        tokenizer, stopwords = MILVUS_ANALYZER_VERSION, False
    if card is not None:
        model, pooling, dim = card.model_id, card.pooling, card.dimension
    else:
        model, pooling, dim = PRECOMPUTED_MODEL, "none", int(dimension or 0)
    return Fingerprint(
        embed_model=model,
        pooling=pooling,
        dimension=dim,
        chunker_version=CHUNKER_VERSION,
        chunk_size=settings.chunk_size,
        chunk_overlap=settings.chunk_overlap,
        tokenizer_version=tokenizer,
        stopwords=stopwords,
    )


def explicit(settings: Settings, name: str) -> bool:
    """Whether the user set `name` for this command (flag, --set, environment or config file)."""
    return settings.sources.get(name, "default") != "default"


def as_set_flags(values: Mapping[str, Any]) -> str:
    """`--set a=1 --set b=on` for the given settings (booleans as on/off)."""
    return " ".join(f"--set {name}={_show(value)}" for name, value in values.items())


_MODEL_FIELDS = ("embed_model", "pooling", "dimension")
_SETTING_FIELDS = ("chunk_size", "chunk_overlap", "stopwords")


def check_compatible(dataset: str, stored: Fingerprint, current: Fingerprint, *, ignore_model: bool = False,
                     settings: Settings | None = None, model_setting: str | None = None) -> None:
    """Refuse with FAILED_PRECONDITION when `current` cannot be mixed into `stored`.

    `ignore_model` serves callers that bring their own vectors: then only the
    dimension has to agree, alongside the chunk and tokenizer settings.
    `settings` (the command's) and `model_setting` (the embed_model setting
    that built the dataset, engine/dataset_settings.py) let the refusal say
    which setting the user set and the command that works.
    """
    diffs = stored.differences(current)
    if ignore_model:
        diffs = [d for d in diffs if not d.startswith(("embed_model:", "pooling:"))]
    if diffs:
        raise precondition(_refusal(dataset, stored, current, diffs, settings, model_setting))


def _refusal(dataset: str, stored: Fingerprint, current: Fingerprint, diffs: list[str], settings: Settings | None,
             model_setting: str | None) -> str:
    """The refusal's words: what differs, who set it, and the commands that work, ready to paste."""
    differ = {d.partition(":")[0] for d in diffs}
    own: dict[str, Any] = {n: getattr(stored, n) for n in _SETTING_FIELDS if n in differ}
    new: dict[str, Any] = {n: getattr(current, n) for n in _SETTING_FIELDS if n in differ}
    if differ & set(_MODEL_FIELDS):
        if model_setting:
            own["embed_model"] = model_setting
        new["embed_model"] = settings.embed_model if settings is not None else current.embed_model
    text = f"dataset '{dataset}' was built under other index settings ({'; '.join(diffs)})"
    if settings is not None:
        set_by = [f"{n} ({settings.sources[n]})" for n in new if explicit(settings, n)]
        if set_by:
            text += f"; this command set {', '.join(set_by)}"
    code = differ & {"chunker_version", "tokenizer_version"}
    if code:
        text += f". Its {' and '.join(sorted(code))} came from another kx, which only a rebuild changes"
    elif own and ("embed_model" in own or not differ & set(_MODEL_FIELDS)):
        text += (f". To use the dataset's own, drop those settings, or override them for one command: "
                 f"kx {as_set_flags(own)} datasets query {dataset} \"your question\" (the same --set works "
                 "before any kx command)")
    elif differ & set(_MODEL_FIELDS):
        text += (f". To use the dataset's own model, set embed_model to it ({stored.embed_model}: its folder or "
                 "Hugging Face id)")
    return text + (f". To build a copy under the new settings: kx datasets rebuild {dataset} --as NEW_NAME "
                   f"{as_set_flags(new)}").rstrip()
