"""What a keyword index's sidecar claims, read without loading the index.

`kx datasets list` shows how many passages wait for the keyword index; it must stay a command
that needs no model and imports neither numpy nor whoosh (tests/test_import_hygiene.py), so
the sidecar's claim is read here, apart from engine/embedded/sparse.py and its numpy scorer.
"""

from __future__ import annotations

from pathlib import Path

from ..atomic import read_json
from ..text.analysis import TOKENIZER_VERSION

SIDECAR = "sparse.json"
INDEX_FOLDER = "sparse"
# The index's layout and fields, recorded in the sidecar: an index written another way (whoosh's segments,
# before round 4; fields other than these) is rebuilt from the catalogue, never scored as if it were this.
# "name" holds each passage's document name and title (engine/text/analysis.py name_field_text).
FIELDS = "body+name/kx-postings-1"


def claimed_watermark(dataset_folder: Path, stopwords: bool, dataset_id: str = "") -> int:
    """The highest passage seq the sidecar claims is indexed, its files unchecked (no CRC read).

    0 when the sidecar is missing or describes another index (stopwords, tokenizer, dataset)."""
    meta = read_json(dataset_folder / SIDECAR)
    if not isinstance(meta, dict) or meta.get("stopwords") != stopwords:
        return 0
    if meta.get("tokenizer") != TOKENIZER_VERSION or not (dataset_folder / INDEX_FOLDER).exists():
        return 0
    if meta.get("fields") != FIELDS:
        return 0
    if dataset_id and meta.get("dataset_id", dataset_id) != dataset_id:
        return 0
    watermark = meta.get("watermark", 0)
    return watermark if isinstance(watermark, int) else 0
