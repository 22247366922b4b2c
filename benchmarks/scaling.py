"""How ingest and query scale with corpus size, embedded engine vs milvus-lite (SCALING.md).

    python benchmarks/scaling.py [--sizes 10000 100000 300000] [--backends embedded milvus-lite] [--queries 50]

Synthetic passages: 40 words drawn (Zipf-like) from a 20,000-word
vocabulary, each with a random unit 384-dimensional vector, ingested as
pre-computed vectors (one document = one passage; no model), into a fresh
dataset per size. Queries: a random unit vector and three vocabulary words,
timed end to end through `query()` (dense, sparse, hybrid with MMR; the
modes interleaved) after a 15 s pause (milvus-lite settles its segments after
a flush) and five warm-up queries. Disk is the store's folder after ingest. Random
vectors are the worst case for HNSW (no clusters), so recall is not
measured here; the SciFact figures (benchmarks/backends.py) are the ones
for quality.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from common import BENCH_DIR, percentile

DIM = 384
VOCAB = 20_000
WORDS = 40
MODES = ("dense", "sparse", "hybrid")
SETTLE_S = 15   # after ingest, before timing: milvus-lite builds and compacts segments for ~10 s after a flush


def _words(rng, n: int):
    import numpy as np

    ranks = np.minimum(rng.zipf(1.2, size=(n, WORDS)), VOCAB) - 1
    return [" ".join(f"w{r}" for r in row) for row in ranks]


def _size_of(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def measure(kind: str, size: int, queries: int) -> dict:
    import numpy as np

    from engine import load_settings
    from engine.backends import open_backend
    from engine.documents import from_text

    rng = np.random.default_rng(size)
    folder = BENCH_DIR / "scaling" / f"{kind}-{size}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    settings = {"home": str(folder / "home"), "embed_model": "none"}
    if kind == "milvus-lite":
        settings.update(backend="milvus", milvus_uri=str(folder / "store.db"))
    backend = open_backend(load_settings(settings, env={}), embedder=None)
    texts = _words(rng, size)
    vectors = rng.standard_normal((size, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    docs = [from_text(t, f"p{i}") for i, t in enumerate(texts)]
    started = time.perf_counter()
    backend.ingest("synthetic", docs, vectors=vectors)
    ingest_s = time.perf_counter() - started
    qv = rng.standard_normal((queries + 5, DIM)).astype(np.float32)
    qt = [" ".join(f"w{int(r)}" for r in rng.integers(0, 2000, 3)) for _ in range(queries + 5)]
    time.sleep(SETTLE_S)
    for i in range(5):
        backend.query("synthetic", qt[i], vector=qv[i], k=10, mode="hybrid")
    out = {"size": size, "ingest_s": round(ingest_s, 1), "ingest_per_s": round(size / ingest_s, 1)}
    times: dict[str, list[float]] = {m: [] for m in MODES}
    for i in range(5, queries + 5):   # the modes interleaved: each sees the same machine load
        for mode in MODES:
            t = time.perf_counter()
            backend.query("synthetic", qt[i], vector=None if mode == "sparse" else qv[i], k=10, mode=mode,
                          rerank=mode == "hybrid")
            times[mode].append((time.perf_counter() - t) * 1000)
    for mode in MODES:
        out[mode] = {"p50_ms": round(percentile(times[mode], 50), 1), "p95_ms": round(percentile(times[mode], 95), 1)}
    backend.close()
    out["disk_mb"] = round(_size_of(folder) / 2**20, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000, 300_000])
    parser.add_argument("--backends", nargs="+", default=["embedded", "milvus-lite"])
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--out", default=str(BENCH_DIR / "scaling.json"))
    args = parser.parse_args()
    results = []
    for size in args.sizes:
        for kind in args.backends:
            row = {"backend": kind, **measure(kind, size, args.queries)}
            results.append(row)
            print(json.dumps(row), flush=True)
            Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
