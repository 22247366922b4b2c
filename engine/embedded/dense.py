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
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, TypeGuard

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
# Passages committed on top of a large graph are first searched exactly (a "tail" of at most _TAIL_LIMIT
# vectors read from the catalogue) and folded into the graph only when the tail is full: a small commit
# then writes the sidecar, not the whole graph, and a reader reopening after it keeps the graph it has
# loaded and reads only the new vectors (at 1 M passages the graph is 1.7 GB to checksum and load). A
# graph below _TAIL_FROM passages is rewritten on every catch-up (0.05 s per 10k passages), as before.
_TAIL_FROM = 20_000
_TAIL_LIMIT = 8_192


class DenseIndex:
    def __init__(self, folder: Path, dimension: int, dataset_id: str = "") -> None:
        self.path = folder / "dense.voy"
        self.sidecar = folder / "dense.json"
        self.dimension = dimension
        self.dataset_id = dataset_id  # "" (an old catalogue, a highlighter): not checked
        self._index = None
        self._held = 0         # the highest seq held, graph and tail
        self._graph_held = 0   # the highest seq in the graph
        self._graph_file: tuple | None = None  # the graph file's identity and checksum when it was loaded
        self.save_seconds = 0.0  # how long writing the graph file last took (save, check, checksum, sidecar)
        self._tail_seqs = np.zeros(0, dtype=np.int64)
        self._tail = np.zeros((0, dimension), dtype=np.float32)   # unit rows, one per tail seq

    @property
    def watermark(self) -> int:
        meta = read_json(self.sidecar)
        if not self._describes_ours(meta) or not self.path.exists():
            return 0
        if "file" in meta and not matches(self.path, meta["file"]):  # damaged: rebuild, never trust
            return 0
        return int(meta.get("watermark", 0))

    def _describes_ours(self, meta: object) -> TypeGuard[dict]:
        """Whether sidecar `meta` describes a graph of this index: its dimension and, where recorded, this
        dataset (another dataset's graph, copied in, would answer with another corpus's passages)."""
        return isinstance(meta, dict) and meta.get("dimension") == self.dimension \
            and not (self.dataset_id and meta.get("dataset_id", self.dataset_id) != self.dataset_id)

    def consistent_with(self, catalogue: Catalogue) -> bool:
        """Whether the sidecar's passage count is what the catalogue holds up to its watermark (an edited or
        foreign sidecar is not)."""
        meta = read_json(self.sidecar)
        held = self.watermark
        if held == 0 or not isinstance(meta, dict):
            return True  # nothing is trusted: a catch-up rebuilds anyway
        if "content" in meta and meta["content"] != catalogue.content_digest(held):
            return False  # another catalogue's graph: a fork's, with the same dataset id and passage count
        return meta.get("count") == catalogue.passages_upto(held)

    def forget(self) -> None:
        """Drop the sidecar: the graph is rebuilt from the catalogue by the next catch-up."""
        self.sidecar.unlink(missing_ok=True)
        self._index, self._held, self._graph_held, self._graph_file = None, 0, 0, None
        self._drop_tail()

    def _drop_tail(self) -> None:
        self._tail_seqs = np.zeros(0, dtype=np.int64)
        self._tail = np.zeros((0, self.dimension), dtype=np.float32)

    def adopt(self, previous: DenseIndex) -> None:
        """Take over the graph (and tail) `previous` loaded, where the files on disk still hold that graph:
        a reader reopened after a small commit then reads only the tail's new vectors (`load`)."""
        if previous._index is None or self._index is not None or previous.dimension != self.dimension \
                or previous.dataset_id != self.dataset_id:
            return
        meta = read_json(self.sidecar)
        if not isinstance(meta, dict) or self._graph_identity(meta) != previous._graph_file \
                or _graph_mark(meta) != previous._graph_held or self.watermark < previous._held:
            return
        self._index, self._graph_held, self._graph_file = previous._index, previous._graph_held, previous._graph_file
        self._held, self._tail_seqs, self._tail = previous._held, previous._tail_seqs, previous._tail

    def shares_graph(self, other: DenseIndex) -> bool:
        """Whether both hold the one loaded graph (`adopt` took it over): what was read beside it still holds."""
        return self._index is not None and self._index is other._index

    def _graph_identity(self, meta: dict) -> tuple | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns, tuple(meta.get("file") or ()))

    def _new(self):
        from voyager import Index, Space, StorageDataType

        return Index(Space.Cosine, num_dimensions=self.dimension, M=_M, ef_construction=_EF_CONSTRUCTION,
                     random_seed=1, storage_data_type=StorageDataType.Float32)

    def load(self, catalogue: Catalogue | None = None):
        """The graph, loaded once; a fresh empty one when there is nothing valid on disk. With `catalogue`,
        also the tail's vectors (the passages the sidecar holds above the graph); without it a tail is
        not held (`held` says so), and a catch-up adds it again."""
        if self._index is None:
            from voyager import Index

            held, index = self.watermark, None
            meta = read_json(self.sidecar)
            if held > 0 and isinstance(meta, dict):
                try:
                    index = Index.load(str(self.path))
                except Exception:  # a damaged derived file: rebuild from the catalogue
                    index = None
                if index is not None and meta.get("graph_count", meta.get("count", len(index))) != len(index):
                    index = None  # not the graph the sidecar describes
            if index is None or index.num_dimensions != self.dimension or not isinstance(meta, dict):
                held, index = 0, self._new()
            self._index, self._held, self._graph_held = index, min(held, _graph_mark(meta) if held else 0), \
                _graph_mark(meta) if held else 0
            self._graph_file = self._graph_identity(meta) if held and isinstance(meta, dict) else None
            self._drop_tail()
        if catalogue is not None:
            self._load_tail(catalogue)
        return self._index

    def _load_tail(self, catalogue: Catalogue) -> None:
        """Read the tail's vectors the sidecar vouches for beyond those held (all of them on a first load,
        only a commit's new ones after `adopt`); a tail that disagrees with the catalogue is not held."""
        meta = read_json(self.sidecar)
        upto = self.watermark
        if not isinstance(meta, dict) or upto <= self._held or self._held < self._graph_held:
            return
        seqs, vectors = _rows(catalogue, self._held, upto, self.dimension)
        expected = _number(meta, "count") - _number(meta, "graph_count", _number(meta, "count"))
        if vectors is None or len(self._tail_seqs) + len(seqs) != expected:
            return  # an edited sidecar, or passages not embedded: a catch-up rewrites it
        self._tail_seqs = np.concatenate([self._tail_seqs, seqs])
        self._tail = np.concatenate([self._tail, _unit(vectors)])
        self._held = upto

    def __len__(self) -> int:
        return len(self.load()) + len(self._tail_seqs)

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
        if self._index is None:  # not loaded: a commit that only extends the tail need not load the graph
            extended = self._extend_tail_unloaded(catalogue, upto)
            if extended is not None:
                return extended
        index = self.load(catalogue)
        if upto == self._held:
            return 0
        coming = catalogue.passages_upto(upto) - catalogue.passages_upto(self._held) if upto > self._held else -1
        if len(index) >= _TAIL_FROM and 0 <= coming and len(self._tail_seqs) + coming <= _TAIL_LIMIT:
            seqs, vectors = _rows(catalogue, self._held, upto, self.dimension)
            if vectors is not None:  # searched exactly until the tail is full: only the sidecar is written
                self._tail_seqs = np.concatenate([self._tail_seqs, seqs])
                self._tail = np.concatenate([self._tail, _unit(vectors)])
                self._write_sidecar(upto, catalogue.content_digest(upto))
                self._held = upto
                return len(seqs)
        if len(self._tail_seqs):  # folded in: the graph takes the tail, then the new passages
            index.add_items(self._tail, ids=self._tail_seqs.tolist(), num_threads=_BUILD_THREADS)
            self._drop_tail()
        added = 0
        for rows in catalogue.iter_passages_after(self._held, upto):
            ids = [seq for seq, _text, _vec in rows]
            vectors = np.stack([np.frombuffer(vec, dtype=np.float32) for _seq, _text, vec in rows])
            index.add_items(vectors, ids=ids, num_threads=_BUILD_THREADS)
            added += len(rows)
        if added or self._held != upto:
            saving = time.monotonic()
            tmp = self.path.with_name(".dense.voy.tmp")
            try:
                index.save(str(tmp))
                _verify_saved(tmp, len(index), self.dimension)
                replace_with(tmp, self.path)
            except RuntimeError as exc:
                full = _out_of_space(tmp)
                tmp.unlink(missing_ok=True)  # a full disk must not also keep half a graph's worth of space
                if full:  # voyager's short write says only "Failed to write N bytes to stream!"
                    raise OSError(errno.ENOSPC, "No space left on device", str(tmp)) from exc
                raise
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            self._graph_held, self._graph_file = upto, None
            self._write_sidecar(upto, catalogue.content_digest(upto))
            self._held = upto
            self.save_seconds = time.monotonic() - saving
        return added

    def _extend_tail_unloaded(self, catalogue: Catalogue, upto: int) -> int | None:
        """Add the passages up to `upto` to the tail by rewriting the sidecar alone, without loading the
        graph (a writer opens a fresh index per commit: at 300k passages the graph is 500 MB to load);
        None when this is not such a commit (no valid large graph, the tail would overflow, the recorded
        tail disagrees with the catalogue): the caller then loads and decides as usual.

        The graph file is not read: its recorded size and checksum are carried over, and readers check
        them as before (a damaged graph is rebuilt whatever the tail holds).
        """
        meta = read_json(self.sidecar)
        if not self._describes_ours(meta) or not isinstance(meta.get("file"), list) or not meta["file"]:
            return None
        held, count = _number(meta, "watermark"), _number(meta, "count")
        graph_held, graph_count = _graph_mark(meta), _number(meta, "graph_count", count)
        try:
            size = os.stat(self.path).st_size
        except OSError:
            return None
        if graph_count < _TAIL_FROM or not 0 < held < upto or graph_held > held or size != meta["file"][0]:
            return None
        tail = count - graph_count
        coming = catalogue.passages_upto(upto) - catalogue.passages_upto(held)
        if tail < 0 or tail + coming > _TAIL_LIMIT or catalogue.passages_upto(held) - \
                catalogue.passages_upto(graph_held) != tail:
            return None
        seqs, vectors = _rows(catalogue, held, upto, self.dimension)
        if vectors is None:
            return None
        write_json_atomic(self.sidecar, {**meta, "watermark": upto, "count": count + len(seqs),
                                         "graph_watermark": graph_held, "graph_count": graph_count,
                                         "content": catalogue.content_digest(upto)})
        return len(seqs)

    def _write_sidecar(self, upto: int, content: str) -> None:
        """Record what is held: up to `upto` in all (`count` passages), of which the graph holds up to
        `graph_watermark` (`graph_count`); the graph file's size and checksum; `content`, the catalogue's
        digest over the passages held (PassageReads.content_digest)."""
        graph = len(self.load())
        meta = {"watermark": upto, "dimension": self.dimension, "count": graph + len(self._tail_seqs),
                "file": list(file_crc32(self.path)), "dataset_id": self.dataset_id, "content": content}
        if len(self._tail_seqs):
            meta.update(graph_watermark=self._graph_held, graph_count=graph)
        write_json_atomic(self.sidecar, meta)
        self._graph_file = self._graph_identity(meta)

    def search(self, vector: np.ndarray, k: int, ef: int) -> list[tuple[int, float]]:
        """Up to k (seq, cosine similarity) pairs, nearest first."""
        seqs, sims = self.search_arrays(vector, k, ef)
        return list(zip(seqs.tolist(), sims.tolist()))

    def search_arrays(self, vector: np.ndarray, k: int, ef: int) -> tuple[np.ndarray, np.ndarray]:
        """Up to k nearest passages: their seqs (int64) and cosine similarities (float64), nearest first."""
        index = self.load()
        n = min(k, len(index))
        seqs, sims = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if n:
            ids, distances = index.query(np.asarray(vector, dtype=np.float32), k=n, query_ef=max(ef, n))
            # 1 - d in float32, as voyager's distances are: the similarity is that float32, widened exactly
            seqs, sims = ids.astype(np.int64), (np.float32(1.0) - distances).astype(np.float32)
        if len(self._tail_seqs):  # the tail, exactly: its best k, merged in by similarity (graph first on a tie)
            query = np.asarray(vector, dtype=np.float32)
            tail = self._tail @ (query / (np.float32(np.linalg.norm(query)) or np.float32(1.0)))
            best = best_first(tail, k)
            seqs = np.concatenate([seqs, self._tail_seqs[best]])
            sims = np.concatenate([sims, tail[best].astype(np.float32)])
            order = np.argsort(-sims, kind="stable")[:k]
            seqs, sims = seqs[order], sims[order]
        return seqs, sims.astype(np.float64)

    def similarities(self, vector: np.ndarray, seqs: np.ndarray, vectors: np.ndarray) -> np.ndarray:
        """The cosine similarity `search_arrays` gives each of `seqs` (passages it holds; `vectors` their
        stored vectors, row for row), float32: voyager's own distance for those in the graph (its query
        normalised and its arithmetic, which a numpy product misses by an ulp or two), the tail's product
        for the tail's."""
        index = self.load()
        query = np.asarray(vector, dtype=np.float32)
        out = np.empty(len(seqs), dtype=np.float32)
        in_graph = seqs <= self._graph_held
        for i in np.flatnonzero(in_graph).tolist():
            out[i] = np.float32(1.0) - np.float32(index.get_distance(query, vectors[i]))
        if not in_graph.all():
            tail = self._tail @ (query / (np.float32(np.linalg.norm(query)) or np.float32(1.0)))
            rest = np.flatnonzero(~in_graph)
            out[rest] = tail[np.searchsorted(self._tail_seqs, seqs[rest])]   # the tail's seqs are sorted
        return out


def _graph_mark(meta: object) -> int:
    """The highest seq the graph file holds (the sidecar's watermark when there is no tail)."""
    if not isinstance(meta, dict):
        return 0
    return max(_number(meta, "graph_watermark", _number(meta, "watermark")), 0)


def _number(meta: dict, key: str, default: int = 0) -> int:
    """An integer the sidecar records; -1 for anything else (an edited sidecar is not trusted)."""
    value = meta.get(key, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _rows(catalogue: Catalogue, after: int, upto: int, dimension: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The seqs and vectors of the passages in (after, upto]; None for the vectors if one lacks its vector."""
    seqs: list[int] = []
    blobs: list[bytes] = []
    for rows in catalogue.iter_passages_after(after, upto):
        for seq, _text, vec in rows:
            seqs.append(seq)
            blobs.append(vec)
    if any(len(blob) != 4 * dimension for blob in blobs):
        return np.array(seqs, dtype=np.int64), None
    vectors = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dimension)
    return np.array(seqs, dtype=np.int64), vectors


def best_first(values: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k largest values, largest first, earlier positions first among equals: what a
    stable sort of the whole array gives, without sorting it all."""
    if k >= len(values):
        return np.argsort(-values, kind="stable")
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    kth = np.partition(values, len(values) - k)[len(values) - k]   # the k-th largest value
    above = np.flatnonzero(values > kth)
    at = np.flatnonzero(values == kth)[:k - len(above)]
    chosen = np.concatenate([above, at])
    return chosen[np.argsort(-values[chosen], kind="stable")]


def _unit(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, as voyager's cosine space stores them."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1, norms)).astype(np.float32)


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


def _out_of_space(path: Path) -> bool:
    """Whether the file system holding `path` is (all but) full: what a failed write there means."""
    try:
        return shutil.disk_usage(path.parent).free < _FULL_BELOW
    except OSError:
        return False


_FULL_BELOW = 1 << 20  # free bytes under which a failed write is taken for a full disk
