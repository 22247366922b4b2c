"""A dataset remembers the index settings it was built with.

A command on an existing dataset runs under that dataset's recorded index
settings (its model, chunk size and overlap, stopwords) wherever the user did
not set a value for this command (a flag, `--set`, a `KX_*` environment
variable or the config file: any source but "default"). So after `kx datasets
rebuild fold --as fold8 --set embed_model=default-int8`, a plain `kx datasets
query fold8 ...` embeds its question with the int8 model, and after `--chunk-size
600` an ingest into it cuts at 600. A value set explicitly is never replaced:
when it differs from the dataset's, the fingerprint check refuses
(engine/fingerprint.py), naming the setting, where it came from, and the
command that works.

The model is recorded as the setting that named it (`embed_model_setting` in
the catalogue's meta, written when the dataset is created); a dataset from
before that is matched against the configured model, whose int8 variant (or
base) is the one other model it can be without a record.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .config import Settings
from .embedding.cards import ModelCard, base_card, split_variant
from .fingerprint import PRECOMPUTED_MODEL, Fingerprint, explicit

MODEL_SETTING_KEY = "embed_model_setting"   # catalogue meta: the embed_model setting that built the dataset
# The settings a dataset's fingerprint records that a command can take from it (the versions of the chunker and
# tokenizer are kx's own code: only a rebuild changes them).
ADOPTED = ("chunk_size", "chunk_overlap", "stopwords")


def model_setting_for(stored: Fingerprint, recorded: str | None, settings: Settings,
                      card: ModelCard | None) -> str | None:
    """The embed_model setting that names the model `stored` was built with; None when it cannot be told."""
    if stored.embed_model == PRECOMPUTED_MODEL:
        return None
    if recorded:
        return recorded
    if card is None:
        return None
    base, _variant = split_variant(settings.embed_model)
    fp32 = base_card(card).model_id
    if stored.embed_model == card.model_id:
        return settings.embed_model
    if stored.embed_model == fp32:
        return base
    if stored.embed_model.startswith(fp32 + "+int8"):
        return "default-int8" if base.lower() == "default" else f"{base}:int8"
    return None


def adopted(settings: Settings, stored: Fingerprint, model_setting: str | None, dataset: str) -> Settings:
    """`settings` with the dataset's own value for each index setting the user did not set explicitly."""
    changes: dict[str, Any] = {}
    for name in ADOPTED:
        value = getattr(stored, name)
        if not explicit(settings, name) and getattr(settings, name) != value:
            changes[name] = value
    if model_setting and not explicit(settings, "embed_model") and model_setting != settings.embed_model:
        changes["embed_model"] = model_setting
    if not changes:
        return settings
    sources = {**settings.sources, **{name: f"dataset {dataset}" for name in changes}}
    return dataclasses.replace(settings, **changes, sources=sources)

