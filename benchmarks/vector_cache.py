"""Embed each distinct text once, across benchmark runs: a caching Embedder.

Embedding SciFact's 11,776 passages costs 7-15 minutes on a 2-core machine,
and the quality and latency benchmarks (and every sparse experiment that
rebuilds an index) need the same vectors again. `CachedEmbedder` stands in
for the real embedder: it looks each text up by its sha256 in a per-model
cache file (npy matrix + the hashes, under KX_BENCH_DIR/vectors/) and asks
the real model only for the texts it has not seen, so the engine's
fingerprint and query path stay the real model's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Sequence

import numpy as np
from paths import BENCH_DIR


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedEmbedder:
    """An Embedder whose vectors come from a cache file, filled by `inner` on a miss."""

    def __init__(self, inner, name: str, folder: Path | None = None, also: Sequence[str] = ()) -> None:
        self._inner = inner
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{name}-{inner.card.model_id}")
        self.folder = (folder or BENCH_DIR / "vectors")
        self.folder.mkdir(parents=True, exist_ok=True)
        self._npy, self._keys = self.folder / f"{safe}.npy", self.folder / f"{safe}.keys.json"
        self._row: dict[str, int] = {}
        self._matrix = np.zeros((0, inner.card.dimension), dtype=np.float32)
        if self._npy.exists() and self._keys.exists():
            keys = json.loads(self._keys.read_text())
            matrix = np.load(self._npy)
            if len(keys) == matrix.shape[0]:
                self._row = {k: i for i, k in enumerate(keys)}
                self._matrix = matrix
        for other in also:  # another dataset's cache of the same model: its texts need no model time here
            self._adopt(self.folder / re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{other}-{inner.card.model_id}"))
        self.misses = 0

    def _adopt(self, stem: Path) -> None:
        npy, keys_file = stem.with_name(stem.name + ".npy"), stem.with_name(stem.name + ".keys.json")
        if not (npy.exists() and keys_file.exists()):
            return
        keys, matrix = json.loads(keys_file.read_text()), np.load(npy)
        if len(keys) != matrix.shape[0]:
            return
        new = [i for i, k in enumerate(keys) if k not in self._row]
        start = self._matrix.shape[0]
        self._matrix = np.vstack([self._matrix, matrix[new].astype(np.float32)])
        self._row.update({keys[i]: start + j for j, i in enumerate(new)})

    @property
    def card(self):
        return self._inner.card

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress=None) -> np.ndarray:
        keys = [_digest(t) for t in texts]
        todo = sorted({k: i for i, k in reversed(list(enumerate(keys))) if k not in self._row}.values())
        if todo:
            fresh = self._inner.encode([texts[i] for i in todo], batch_size=batch_size)
            self.misses += len(todo)
            start = self._matrix.shape[0]
            self._matrix = np.vstack([self._matrix, fresh.astype(np.float32)])
            for offset, i in enumerate(todo):
                self._row[keys[i]] = start + offset
            self._save()
        if progress is not None:
            progress(len(texts))
        return self._matrix[[self._row[k] for k in keys]]

    def _save(self) -> None:
        ordered = sorted(self._row, key=self._row.__getitem__)
        tmp = self._npy.with_suffix(".tmp.npy")
        np.save(tmp, self._matrix)
        os.replace(tmp, self._npy)
        tmp_keys = self._keys.with_suffix(".tmp")
        tmp_keys.write_text(json.dumps(ordered))
        os.replace(tmp_keys, self._keys)
