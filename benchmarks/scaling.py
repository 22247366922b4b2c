"""How ingest and query scale with corpus size, embedded engine vs milvus-lite (SCALING.md).

    python benchmarks/scaling.py [--sizes 10000 100000 300000] [--backends embedded milvus-lite] [--queries 50]
    python benchmarks/scaling.py --reopen-only --sizes 100000     # the reopen figures of a dataset built before

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

For the embedded engine, also: a query process's peak RSS and its cold open
(a fresh Python process: imports, opening the dataset, the first hybrid
answer), and the reopen after a small commit: another writer commits 100
passages while a long-lived engine holds the dataset open; the engine's next
query reopens what changed. Its time minus a warm query's, median of three
commits, is the reopen. `--reopen-only` measures these on the dataset an
earlier run left (no ingest), e.g. to compare two versions of the code.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
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


_COLD = """
import json, sys, time
started = time.perf_counter()
sys.path.insert(0, {repo!r})
import numpy as np
from engine import load_settings
from engine.open_backend import open_backend
backend = open_backend(load_settings({{"home": {home!r}, "embed_model": "none"}}, env={{}}), embedder=None)
rng = np.random.default_rng(1)
vector = rng.standard_normal(384).astype(np.float32)
backend.query("synthetic", "w1 w20 w300", vector=vector, k=10, mode="hybrid")
first = time.perf_counter() - started
for i in range(20):
    backend.query("synthetic", f"w{{i}} w{{i * 7}} w{{i * 31}}", vector=rng.standard_normal(384).astype(np.float32),
                  k=10, mode="hybrid")
# VmHWM, not getrusage's ru_maxrss: Linux carries the parent's high-water mark into a child across fork and exec,
# so ru_maxrss here reported the benchmark's own size (13.6 GB at 1 M, 2.7 GB at 300k), not this process's
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({{"first_answer_s": first, "peak_rss_mb": peak / 1024}}))
"""


def cold_open(home: Path) -> dict:
    """A fresh process: imports, open, first hybrid answer; then 20 more, and its peak RSS."""
    repo = str(Path(__file__).resolve().parent.parent)
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _COLD.format(repo=repo, home=str(home))], capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONPATH": repo})
    found = json.loads(out.stdout.strip().splitlines()[-1])
    return {"cold_first_answer_s": round(found["first_answer_s"], 2),
            "cold_process_s": round(time.perf_counter() - start, 2),
            "query_process_peak_rss_mb": round(found["peak_rss_mb"])}


def reopen_after_commit(home: Path, size: int, rounds: int = 3) -> dict:
    """A long-lived engine's first query after another writer commits 100 passages, less a warm query."""
    import numpy as np

    from engine import load_settings
    from engine.open_backend import open_backend
    from engine.text.inputs import from_text

    settings = load_settings({"home": str(home), "embed_model": "none"}, env={})
    reader = open_backend(settings, embedder=None)
    writer = open_backend(settings, embedder=None)
    query = np.random.default_rng(size + 7).standard_normal(DIM).astype(np.float32)
    # new passages every run: a second --reopen-only run offering the same documents would commit nothing
    run = time.time_ns()
    rng = np.random.default_rng(run)

    def ask() -> float:
        t = time.perf_counter()
        reader.query("synthetic", "w1 w20 w300", vector=query, k=10, mode="hybrid")
        return time.perf_counter() - t

    for _ in range(5):
        ask()
    warm = float(np.median([ask() for _ in range(10)]))
    reopen, commit = [], []
    for round_ in range(rounds):
        texts = _words(rng, 100)
        vectors = rng.standard_normal((100, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        docs = [from_text(f"{t} run{run}", f"extra-{run}-{round_}-{i}") for i, t in enumerate(texts)]
        t = time.perf_counter()
        writer.ingest("synthetic", docs, vectors=vectors)
        commit.append(time.perf_counter() - t)
        reopen.append(ask() - warm)
    reader.close()
    writer.close()
    return {"warm_hybrid_ms": round(warm * 1000, 1), "commit_100_s": round(float(np.median(commit)), 2),
            "reopen_after_100_s": round(float(np.median(reopen)), 3), "reopen_samples_s": [round(r, 3) for r in reopen]}


def measure(kind: str, size: int, queries: int) -> dict:
    import numpy as np

    from engine import load_settings
    from engine.open_backend import open_backend
    from engine.text.inputs import from_text

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
    if kind == "embedded":
        out.update(cold_open(folder / "home"))
        out.update(reopen_after_commit(folder / "home", size))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000, 300_000])
    parser.add_argument("--backends", nargs="+", default=["embedded", "milvus-lite"])
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--out", default=str(BENCH_DIR / "scaling.json"))
    parser.add_argument("--reopen-only", action="store_true",
                        help="cold open, RSS and reopen of the embedded datasets an earlier run left")
    args = parser.parse_args()
    results = []
    if args.reopen_only:
        for size in args.sizes:
            home = BENCH_DIR / "scaling" / f"embedded-{size}" / "home"
            row = {"backend": "embedded", "size": size, "load_average": os.getloadavg(), **cold_open(home),
                   **reopen_after_commit(home, size)}
            print(json.dumps(row), flush=True)
        return
    for size in args.sizes:
        for kind in args.backends:
            row = {"backend": kind, "load_average": os.getloadavg(), **measure(kind, size, args.queries)}
            results.append(row)
            print(json.dumps(row), flush=True)
            Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
