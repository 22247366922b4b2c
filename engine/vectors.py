"""Checking vectors that callers bring (pre-computed document or query embeddings)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import invalid


def checked_vectors(value: Any, count: int, what: str) -> np.ndarray:
    """`count` finite, non-zero vectors of one length as unit-length float32 rows.

    A row already of unit length (within float32's rounding, as a model's own output is) is kept as given:
    scaled again it would differ in the last bits from the same model's vector made here, and a query or a
    document sent with its own embedding would not search exactly as the same text sent alone.
    Raises INVALID_ARGUMENT saying what is wrong with `what`.
    """
    try:
        with np.errstate(over="ignore"):  # 1e308 becomes inf here and is refused just below
            array = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError, OverflowError):
        raise invalid(f"{what}: expected lists of numbers, all of one length") from None
    if array.ndim != 2 or array.shape[0] != count or array.shape[1] == 0:
        raise invalid(f"{what}: expected {count} non-empty list(s) of numbers of one length; "
                      f"got shape {tuple(array.shape)}")
    if not np.all(np.isfinite(array)):
        raise invalid(f"{what}: NaN or infinite values; pass finite numbers")
    with np.errstate(over="ignore", under="ignore"):
        norms = np.linalg.norm(array, axis=1)
    odd = (norms == 0) | ~np.isfinite(norms)
    if np.any(odd):
        # squaring a tiny float32 (1e-38) underflows to 0 and a huge one (3e38) overflows: those rows in float64
        rows = array[odd].astype(np.float64)
        lengths = np.linalg.norm(rows, axis=1)
        if np.any(lengths == 0):
            raise invalid(f"{what}: a vector of all zeros has no direction; pass a non-zero vector")
        array = array.copy()
        array[odd] = (rows / lengths[:, None]).astype(np.float32)
        norms = np.where(odd, np.float32(1), norms)
    scaled = array / norms[:, None]
    unit = np.abs(norms.astype(np.float64) - 1.0) <= 1e-6
    if unit.any():
        scaled[unit] = array[unit]
    return scaled
