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


def check_compatible(dataset: str, stored: Fingerprint, current: Fingerprint, *, ignore_model: bool = False) -> None:
    """Refuse with FAILED_PRECONDITION when `current` cannot be mixed into `stored`.

    `ignore_model` serves callers that bring their own vectors: then only the
    dimension has to agree, alongside the chunk and tokenizer settings.
    """
    diffs = stored.differences(current)
    if ignore_model:
        diffs = [d for d in diffs if not d.startswith(("embed_model:", "pooling:"))]
    if diffs:
        raise precondition(
            f"dataset '{dataset}' was indexed under a different embed model or chunk config "
            f"({'; '.join(diffs)}); rebuild it from its stored originals under the new settings with: "
            f"kx datasets rebuild {dataset} --as NEW_NAME (with the --set / --chunk-size you want), "
            "or go back to the settings it was built with"
        )
