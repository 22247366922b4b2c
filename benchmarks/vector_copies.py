"""The two copies of every vector (issue 40 item 5): the catalogue's blob and the voyager graph's, measured.

    nice -n 10 python benchmarks/vector_copies.py [--passages 20000] [--reads 200]

For N random unit 384-d vectors: the graph file's size with float32 storage
(what kx writes) and with E4M3 (one byte a dimension), the catalogue's
vector bytes (SQLite blobs as kx stores them), the time to build the graph
from the vectors (what a lost or damaged graph costs to rebuild from the
catalogue), and the time to read an MMR pool's vectors (30 of them) from
each copy: SQLite by seq, and voyager's `get_vectors`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

DIM = 384


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--passages", type=int, default=20_000)
    parser.add_argument("--reads", type=int, default=200)
    args = parser.parse_args()
    from voyager import Index, Space, StorageDataType

    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((args.passages, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = np.arange(1, args.passages + 1)
    out: dict = {"cpu": platform.processor() or platform.machine(), "load": os.getloadavg(),
                 "passages": args.passages}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = sqlite3.connect(folder / "catalog.sqlite")
        db.execute("CREATE TABLE passages (seq INTEGER PRIMARY KEY, vector BLOB NOT NULL)")
        db.executemany("INSERT INTO passages VALUES (?, ?)", ((int(i), v.tobytes()) for i, v in zip(ids, vectors)))
        db.commit()
        out["catalogue_vector_bytes"] = args.passages * DIM * 4
        graphs = {}
        for kind, storage in (("float32", StorageDataType.Float32), ("e4m3", StorageDataType.E4M3)):
            index = Index(Space.Cosine, num_dimensions=DIM, M=12, ef_construction=200, random_seed=1,
                          storage_data_type=storage)
            started = time.perf_counter()
            index.add_items(vectors, ids, num_threads=len(os.sched_getaffinity(0)))
            out[f"build_s_{kind}"] = round(time.perf_counter() - started, 2)
            index.save(str(folder / f"{kind}.voy"))
            out[f"graph_bytes_{kind}"] = (folder / f"{kind}.voy").stat().st_size
            graphs[kind] = index
        picks = [rng.choice(ids, 30, replace=False).tolist() for _ in range(args.reads)]
        timings: dict[str, list[float]] = {"sqlite": [], "voyager_float32": []}
        for pick in picks:
            started = time.perf_counter()
            marks = ",".join("?" * len(pick))
            rows = db.execute(f"SELECT seq, vector FROM passages WHERE seq IN ({marks})", pick).fetchall()
            _ = np.stack([np.frombuffer(v, dtype=np.float32) for _s, v in rows])
            timings["sqlite"].append(time.perf_counter() - started)
            started = time.perf_counter()
            _ = graphs["float32"].get_vectors(pick)
            timings["voyager_float32"].append(time.perf_counter() - started)
        out["read_30_ms_p50"] = {k: round(statistics.median(v) * 1000, 3) for k, v in timings.items()}
        e4m3 = np.asarray(graphs["e4m3"].get_vectors(ids[:1000].tolist()))
        out["e4m3_min_cosine_to_float32"] = round(float(np.min(np.sum(
            e4m3 / np.linalg.norm(e4m3, axis=1, keepdims=True) * vectors[:1000], axis=1))), 5)
        db.close()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
