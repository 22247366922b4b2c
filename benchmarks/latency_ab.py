"""Query latency of two source trees side by side: the same SciFact queries, each tree on its own copy of one
dataset, in fresh processes taking turns (so machine load hits both alike).

    python benchmarks/latency_ab.py --before /tmp/kx-base --after . --home /tmp/ab [--rounds 4] [--queries 300]

`--before` and `--after` are source trees (e.g. `git archive REV | tar -x -C /tmp/kx-base`); `--home` must hold
`before/` and `after/`, each a KX_HOME with the SciFact dataset (copies of one dataset, so a newer tree's
catalogue migration cannot touch the older tree's). Each round runs one process per tree (the order
alternates); a process embeds the queries once, warms up on 20, then times every query in three modes, one mode
after the other: hybrid+MMR with the vector given (the search alone), the same with MMR off, and from the text
(the query's embedding included). Prints the median over rounds of each process's p50 (wall and thread CPU), and
after / before.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

MODES = ("search only", "search only, MMR off", "text to hits")


def child(home: str, queries: int) -> None:
    from engine import Engine, load_settings
    from engine.evaluation import read_queries

    data = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "scifact" / "queries.jsonl"
    texts = list(read_queries(data).values())[:queries]
    engine = Engine(load_settings({"home": home}, env={}))
    vectors = engine.embedder().encode(texts)
    for text, vector in zip(texts[:20], vectors):
        engine.query("scifact", text, vector=vector, k=10)
        engine.query("scifact", text, k=10)
    runs = {MODES[0]: lambda t, v: engine.query("scifact", t, vector=v, k=10),
            MODES[1]: lambda t, v: engine.query("scifact", t, vector=v, k=10, rerank=False),
            MODES[2]: lambda t, v: engine.query("scifact", t, k=10)}
    out = {}
    for mode, run in runs.items():
        wall, cpu = [], []
        for text, vector in zip(texts, vectors):
            start, start_cpu = time.perf_counter(), time.thread_time()
            run(text, vector)
            wall.append((time.perf_counter() - start) * 1000)
            cpu.append((time.thread_time() - start_cpu) * 1000)
        out[mode] = {"wall_p50": statistics.median(wall), "cpu_p50": statistics.median(cpu)}
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path)
    parser.add_argument("--after", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--home", type=Path)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.queries)
        return
    if args.before is None or args.home is None:
        parser.error("--before and --home are needed")
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    results: dict[str, list[dict]] = {label: [] for label in trees}
    for round_ in range(args.rounds):
        for label in (("before", "after") if round_ % 2 == 0 else ("after", "before")):
            env = {**os.environ, "PYTHONPATH": str(trees[label]), "OPENBLAS_NUM_THREADS": "1"}
            proc = subprocess.run([sys.executable, __file__, "--child", str(args.home / label),
                                   "--queries", str(args.queries)], env=env, cwd=trees[label],
                                  capture_output=True, text=True, check=True)
            results[label].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f"load average {os.getloadavg()[0]:.2f}; median over {args.rounds} rounds of each process's p50 (ms)")
    for mode in MODES:
        for measure in ("wall_p50", "cpu_p50"):
            before, after = (statistics.median(r[mode][measure] for r in results[label]) for label in trees)
            print(f"{mode:22} {measure:9} before {before:7.3f}  after {after:7.3f}  after/before {after / before:.3f}")


if __name__ == "__main__":
    main()
