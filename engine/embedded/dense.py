"""The dense index: a voyager HNSW graph over passage vectors (cosine).

Derived from the catalogue: ids are passage seqs, and a small sidecar records
the highest seq the saved graph holds (its watermark), its passage count and
the graph file's size and CRC-32, and the id of the dataset it belongs to.
The graph file is replaced atomically, and only once the saved file has been
read back whole (a full disk can make voyager's writer stop short without a
word: the graph on disk would shrink while its sidecar vouched for it). If
the graph is missing, unreadable, truncated, another dataset's, or its
checksum or passage count disagrees with its sidecar or the catalogue, it
holds nothing as far as readers are concerned and is rebuilt from the
catalogue, since nothing in it is original.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..atomic import read_json, replace_with, write_json_atomic
from .checksums import file_crc32, matches

if TYPE_CHECKING:
    from .store import Catalogue

# Built on every core the process may use. Threads insert in whatever order
# they are scheduled, so two builds of one corpus may link different HNSW
# neighbours (and give different bytes); a query reads one saved graph, so
# the same index state, query and settings still give the same order. The
# pool's recall (>= 0.998 of exact, benchmarks/latency.py) keeps the answers
# the same in practice: benchmarks/graph_threads.py counts how often two
# builds' top 10 differ.
_BUILD_THREADS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
_M = 12
_EF_CONSTRUCTION = 200


class DenseIndex:
    def __init__(self, folder: Path, dimension: int, dataset_id: str = "") -> None:
        self.path = folder / "dense.voy"
        self.sidecar = folder / "dense.json"
        self.dimension = dimension
        self.dataset_id = dataset_id  # "" (an old catalogue, a highlighter): not checked
        self._index = None
        self._held = 0

    @property
    def watermark(self) -> int:
        meta = read_json(self.sidecar)
        if not isinstance(meta, dict) or not self.path.exists() or meta.get("dimension") != self.dimension:
            return 0
        if "file" in meta and not matches(self.path, meta["file"]):  # damaged: rebuild, never trust
            return 0
        if self.dataset_id and meta.get("dataset_id", self.dataset_id) != self.dataset_id:
            return 0  # another dataset's graph, copied in: its answers would be another corpus's
        return int(meta.get("watermark", 0))

    def consistent_with(self, catalogue: Catalogue) -> bool:
        """Whether the sidecar's passage count is what the catalogue holds up to its watermark (an edited or
        foreign sidecar is not)."""
        meta = read_json(self.sidecar)
        held = self.watermark
        if held == 0 or not isinstance(meta, dict):
            return True  # nothing is trusted: a catch-up rebuilds anyway
        return meta.get("count") == catalogue.passages_upto(held)

    def forget(self) -> None:
        """Drop the sidecar: the graph is rebuilt from the catalogue by the next catch-up."""
        self.sidecar.unlink(missing_ok=True)
        self._index, self._held = None, 0

    def _new(self):
        from voyager import Index, Space, StorageDataType

        return Index(Space.Cosine, num_dimensions=self.dimension, M=_M, ef_construction=_EF_CONSTRUCTION,
                     random_seed=1, storage_data_type=StorageDataType.Float32)

    def load(self):
        """The graph, loaded once; a fresh empty one when there is nothing valid on disk."""
        if self._index is None:
            from voyager import Index

            held, index = self.watermark, None
            if held > 0:
                try:
                    index = Index.load(str(self.path))
                except Exception:  # a damaged derived file: rebuild from the catalogue
                    index = None
                meta = read_json(self.sidecar)
                if index is not None and isinstance(meta, dict) and meta.get("count", len(index)) != len(index):
                    index = None  # not the graph the sidecar describes
            if index is None or index.num_dimensions != self.dimension:
                held, index = 0, self._new()
            self._index, self._held = index, held
        return self._index

    def __len__(self) -> int:
        return len(self.load())

    @property
    def held(self) -> int:
        """The highest passage seq the loaded graph holds (loads it)."""
        self.load()
        return self._held

    def catch_up(self, catalogue: Catalogue, upto: int) -> int:
        """Add the catalogue's passages above what the graph holds, save, and record `upto`.

        Re-adding an id voyager already holds overwrites it with the same
        vector, so replaying after a crash between save and sidecar is harmless.
        """
        index = self.load()
        added = 0
        for rows in catalogue.iter_passages_after(self._held, upto):
            ids = [seq for seq, _text, _vec in rows]
            vectors = np.stack([np.frombuffer(vec, dtype=np.float32) for _seq, _text, vec in rows])
            index.add_items(vectors, ids=ids, num_threads=_BUILD_THREADS)
            added += len(rows)
        if added or self._held != upto:
            tmp = self.path.with_name(".dense.voy.tmp")
            try:
                index.save(str(tmp))
                _verify_saved(tmp, len(index), self.dimension)
                replace_with(tmp, self.path)
            except BaseException:
                tmp.unlink(missing_ok=True)  # a full disk must not also keep half a graph's worth of space
                raise
            write_json_atomic(self.sidecar, {"watermark": upto, "dimension": self.dimension, "count": len(index),
                                             "file": list(file_crc32(self.path)), "dataset_id": self.dataset_id})
            self._held = upto
        return added

    def search(self, vector: np.ndarray, k: int, ef: int) -> list[tuple[int, float]]:
        """Up to k (seq, cosine similarity) pairs, nearest first."""
        seqs, sims = self.search_arrays(vector, k, ef)
        return list(zip(seqs.tolist(), sims.tolist()))

    def search_arrays(self, vector: np.ndarray, k: int, ef: int) -> tuple[np.ndarray, np.ndarray]:
        """Up to k nearest passages: their seqs (int64) and cosine similarities (float64), nearest first."""
        index = self.load()
        n = min(k, len(index))
        if n == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        ids, distances = index.query(np.asarray(vector, dtype=np.float32), k=n, query_ef=max(ef, n))
        # 1 - d in float32, as voyager's distances are: the similarity is that float32, widened exactly
        return ids.astype(np.int64), (1.0 - distances).astype(np.float64)


def _verify_saved(path: Path, count: int, dimension: int) -> None:
    """Read a just-saved graph back: all `count` vectors there, or the write failed (ENOSPC if no reason shows)."""
    from voyager import Index

    try:
        saved = Index.load(str(path))
        whole = len(saved) == count and saved.num_dimensions == dimension
    except Exception:  # voyager refuses a short file in several ways
        whole = False
    if not whole:
        raise OSError(errno.ENOSPC, "the saved dense graph is shorter than the graph (a full disk?)", str(path))
