"""What a served model's vectors look like: a short sketch of its answers to fixed probe sentences.

A served model is known by a name and a URL, and either can start answering
with another model overnight. Its identity in a dataset's fingerprint is
therefore its name plus a sketch of its vectors for PROBES: each probe
vector is projected onto SKETCH_DIMS fixed +-1 directions (a random
projection keeps distances, so two sketches are as far apart as the vectors
were, within ~30 %) and each coordinate kept as one signed byte. Float noise
(another batch size, another CPU, GPU against CPU, torch against ONNX:
cosines >= 0.999, distances <= 0.045) moves a sketch by a few hundredths;
the same model quantised to int8 moves it by ~0.13 (cosine ~0.99), another
model by ~1.4. `same_sketch` accepts up to SKETCH_TOLERANCE: the first is
the same model, the others are refused.

Pure Python for the comparison (the fingerprint check of a light command
imports no numpy); numpy only to make a sketch.
"""

from __future__ import annotations

import base64
import hashlib
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

PROBES = (
    "The committee approved the budget for the new library after a long debate.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "How do I reset my password if I no longer have access to my email?",
)
SKETCH_DIMS = 16
_SCALE = 127.0
# Distance allowed between two sketches of one probe. Same model, float noise: cosine 0.999 is 0.045 (torch
# against ONNX Runtime measured <= 0.02). Its int8 variant: 0.13 measured; another model: ~1.4.
SKETCH_TOLERANCE = 0.08


def _directions(dimension: int) -> list[list[float]]:
    """SKETCH_DIMS fixed +-1/sqrt(SKETCH_DIMS) directions of `dimension` entries, from a hash: the same on
    every machine and numpy version (numpy's generators promise no stream across versions)."""
    bits = hashlib.shake_256(f"kx-probe-sketch/{dimension}".encode()).digest((dimension * SKETCH_DIMS + 7) // 8)
    unit = 1.0 / math.sqrt(SKETCH_DIMS)
    out = []
    for row in range(SKETCH_DIMS):
        out.append([unit if bits[(row * dimension + i) // 8] >> ((row * dimension + i) % 8) & 1 else -unit
                    for i in range(dimension)])
    return out


def sketch(vectors: np.ndarray) -> str:
    """The sketch of the unit-length probe vectors (one row per PROBES sentence), as URL-safe base64."""
    import numpy as np

    rows = np.asarray(vectors, dtype=np.float64)
    projected = rows @ np.asarray(_directions(rows.shape[1]), dtype=np.float64).T
    quantised = np.clip(np.rint(projected * _SCALE), -127, 127).astype(np.int8)
    return base64.urlsafe_b64encode(quantised.tobytes()).decode("ascii").rstrip("=")


def _decode(text: str) -> list[list[float]] | None:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError):
        return None
    if not raw or len(raw) % SKETCH_DIMS:
        return None
    values = [b - 256 if b > 127 else b for b in raw]
    return [[v / _SCALE for v in values[i:i + SKETCH_DIMS]] for i in range(0, len(values), SKETCH_DIMS)]


def sketch_distance(a: str, b: str) -> float:
    """The largest distance between the two sketches of one probe; inf when they cannot be compared."""
    rows_a, rows_b = _decode(a), _decode(b)
    if rows_a is None or rows_b is None or len(rows_a) != len(rows_b):
        return math.inf
    return max(math.dist(x, y) for x, y in zip(rows_a, rows_b))


def same_sketch(a: str, b: str) -> bool:
    """Whether two sketches came from one model (within float noise)."""
    return a == b or sketch_distance(a, b) <= SKETCH_TOLERANCE


SERVED_ID_PREFIX = "openai:"
_SKETCH_MARK = "#"


def served_model_id(name: str, sketch_text: str) -> str:
    """The fingerprint's embed_model for a served model: 'openai:NAME#SKETCH' (no URL: servers may move)."""
    return f"{SERVED_ID_PREFIX}{name}{_SKETCH_MARK}{sketch_text}"


def same_served_model(a: str, b: str) -> bool:
    """Whether two embed_model ids name one served model: the same name and sketches within float noise."""
    if not (a.startswith(SERVED_ID_PREFIX) and b.startswith(SERVED_ID_PREFIX)):
        return False
    name_a, _, sketch_a = a.rpartition(_SKETCH_MARK)
    name_b, _, sketch_b = b.rpartition(_SKETCH_MARK)
    return bool(name_a) and name_a == name_b and same_sketch(sketch_a, sketch_b)
