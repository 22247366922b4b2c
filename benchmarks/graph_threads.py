"""The dense graph built on every core against one thread, and how often two builds' answers differ.

    python benchmarks/graph_threads.py [--rounds 3] [--queries 300] [--passages N]

1. Build time: SciFact's stored passage vectors (11,776 x 384; `--passages N`
   repeats them with a little noise up to N) inserted into a fresh voyager
   graph with kx's settings (M 12, ef_construction 200) in kx's 2,048-row
   batches, on one thread and on every core (engine/embedded/dense.py
   `_BUILD_THREADS`), alternating, `--rounds` times each: the median seconds
   and the ratio one thread / every core.
2. Answers: the SciFact dataset copied twice; in each copy kx drops the graph
   and rebuilds it from the catalogue (on every core) at the first query.
   Then every test query (text and the cached vector) against the original
   and both copies: how many queries' top 10 (as passage refs, in order)
   differ between the two rebuilt copies, and between each and the original,
   for hybrid with MMR and for dense alone.

Threads insert in the order they are scheduled, so two builds may link
different neighbours; the same graph always answers the same (README,
"Ties break on ascending passage ref").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from common import BENCH_DIR, DATA, ensure_dataset


def _vectors(engine, passages: int | None) -> np.ndarray:
    from engine.embedded.dataset import Dataset

    catalogue = Dataset(engine.settings, "scifact").reading()
    try:
        top = catalogue.max_passage_seq()
        matrix = catalogue.vectors_by_seq(list(range(1, top + 1)), 384)
    finally:
        catalogue.close()
    if passages and passages > len(matrix):
        rng = np.random.default_rng(0)
        extra = matrix[rng.integers(0, len(matrix), passages - len(matrix))]
        extra = extra + rng.normal(0, 0.05, extra.shape).astype(np.float32)
        matrix = np.concatenate([matrix, extra / np.linalg.norm(extra, axis=1, keepdims=True)])
    return matrix[:passages] if passages else matrix


def build_seconds(matrix: np.ndarray, threads: int) -> float:
    from engine.embedded import dense

    index = dense.DenseIndex(Path(tempfile.gettempdir()), matrix.shape[1])._new()
    start = time.perf_counter()
    # kx's catch-up batches (engine/embedded/catalogue/passages.py iter_passages_after)
    for at in range(0, len(matrix), 2048):
        rows = matrix[at:at + 2048]
        index.add_items(rows, ids=list(range(at + 1, at + 1 + len(rows))), num_threads=threads)
    return time.perf_counter() - start


def build_times(matrix: np.ndarray, rounds: int) -> dict:
    from engine.embedded.dense import _BUILD_THREADS

    times: dict[int, list[float]] = {1: [], _BUILD_THREADS: []}
    for _ in range(rounds):
        for threads in times:  # alternating: machine load hits both alike
            times[threads].append(build_seconds(matrix, threads))
    one, every = float(np.median(times[1])), float(np.median(times[_BUILD_THREADS]))
    return {"passages": len(matrix), "threads": _BUILD_THREADS, "rounds": rounds,
            "one_thread_s": round(one, 2), "every_core_s": round(every, 2), "speedup": round(one / every, 2),
            "samples_s": {str(k): [round(v, 2) for v in vs] for k, vs in times.items()}}


def answers_differ(engine, queries: list[str]) -> dict:
    from engine import Engine, load_settings

    source = engine.dataset_summary("scifact").path
    vectors = engine.embedder().encode(queries)
    homes = []
    with tempfile.TemporaryDirectory(prefix="kx-graphs-") as tmp:
        for copy in ("a", "b"):
            home = Path(tmp) / copy
            target = home / "datasets" / "scifact"
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("write.lock", "dense.voy", "dense.json"))
            homes.append(home)
        engines = {"original": engine}
        for copy, home in zip("ab", homes):
            copied = Engine(load_settings({"home": str(home)}, env={}))
            start = time.perf_counter()
            copied.query("scifact", "probe", mode="sparse")  # the first query rebuilds the graph, on every core
            engines[f"rebuilt {copy}"] = copied  # asked with the vectors: no model needed
            print(f"copy {copy}: graph rebuilt in {time.perf_counter() - start:.1f} s", flush=True)
        out = {}
        for mode in ("hybrid", "dense"):
            tops = {label: [[h.passage_ref for h in e.query("scifact", text, vector=vector, mode=mode, k=10).hits]
                            for text, vector in zip(queries, vectors)] for label, e in engines.items()}
            pairs = (("rebuilt a", "rebuilt b"), ("original", "rebuilt a"), ("original", "rebuilt b"))
            out[mode] = {f"{x} vs {y}": {"queries_differing": sum(p != q for p, q in zip(tops[x], tops[y])),
                                         "as_sets": sum(set(p) != set(q) for p, q in zip(tops[x], tops[y])),
                                         "of": len(queries)} for x, y in pairs}
        for e in engines.values():
            if e is not engine:
                e.close()
    return out


def main() -> None:
    from engine.evaluation import read_queries

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--passages", type=int, help="build over this many vectors (SciFact's, repeated)")
    parser.add_argument("--no-answers", action="store_true", help="build times only")
    args = parser.parse_args()
    engine = ensure_dataset("scifact")
    result = {"cpus": os.cpu_count(), "load_average": os.getloadavg(),
              "build": build_times(_vectors(engine, args.passages), args.rounds)}
    print(json.dumps(result["build"]), flush=True)
    if not args.no_answers:
        queries = list(read_queries(DATA / "scifact" / "queries.jsonl").values())[:args.queries]
        result["top10_differs"] = answers_differ(engine, queries)
        print(json.dumps(result["top10_differs"], indent=1))
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    (BENCH_DIR / "graph_threads.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
