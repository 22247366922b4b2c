"""Query latency on SciFact, stage by stage, the HNSW pool's recall, and a cold `kx datasets query`.

    python benchmarks/latency.py [--collection scifact] [--runtimes onnx torch]

1. Every test query, one at a time after a warm-up, in each mode with the
   default settings (k=10, pool 100, MMR on): p50 and p95 of query
   embedding, dense search, sparse search, fusion, MMR and the total; the
   target is that everything beyond embedding the query costs less than it.
   Each runtime (KX_EMBED_RUNTIME) answers every query in turn, so both see
   the same machine; targets: ONNX hybrid total p50 <= 8 ms, and its embed
   stage <= 0.45 x torch's.
2. The dense candidate pool (100) from voyager against exact cosine search
   over every stored vector, at several search breadths (ef).
3. One cold `kx datasets query` as a user runs it from a shell, and where its
   time goes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

from common import DATA, HOME, REPO, ensure_dataset, percentile

STAGES = ("embed", "dense", "sparse", "fusion", "mmr", "total")


def stage_latency(engines: dict, queries: list[str], collection: str) -> dict:
    for engine in engines.values():
        for text in queries[:20]:
            engine.query(collection, text)
    out: dict = {runtime: {} for runtime in engines}
    for label, mode, rerank in (("hybrid", "hybrid", True), ("hybrid (MMR off)", "hybrid", False),
                                ("dense", "dense", True), ("sparse", "sparse", True)):
        samples = {r: {s: [] for s in STAGES} for r in engines}
        beyond: dict[str, list[float]] = {r: [] for r in engines}
        for text in queries:
            for runtime, engine in engines.items():  # in turn: a noisy neighbour slows both alike
                timings = engine.query(collection, text, mode=mode, rerank=rerank).timings_ms
                for stage in STAGES:
                    if stage in timings:
                        samples[runtime][stage].append(timings[stage])
                beyond[runtime].append(timings["total"] - timings.get("embed", 0.0))
        for runtime in engines:
            row = {s: {"p50": round(percentile(v, 50), 2), "p95": round(percentile(v, 95), 2)}
                   for s, v in samples[runtime].items() if v}
            row["beyond_embedding"] = {"p50": round(percentile(beyond[runtime], 50), 2),
                                       "p95": round(percentile(beyond[runtime], 95), 2)}
            out[runtime][label] = row
    return out


def pool_recall(engine, queries: list[str], collection: str) -> dict:
    from engine.dataset import Dataset
    from engine.search import dense_ef

    dataset = Dataset(engine.settings, collection)
    catalogue = dataset.reading()
    top = catalogue.max_passage_seq()
    seqs = list(range(1, top + 1))
    matrix = catalogue.vectors_by_seq(seqs, 384)
    catalogue.close()
    index = dataset.dense(384).load()
    vectors = engine.embedder().encode(queries)
    pool = engine.settings.candidate_pool
    exact = np.argsort(-(vectors @ matrix.T), axis=1)[:, :pool] + 1  # seqs start at 1
    out = {"pool": pool, "passages": top, "default_ef": dense_ef(pool), "by_ef": {}}
    for ef in sorted({100, 150, 200, dense_ef(pool), 400, 800}):
        recalls, times = [], []
        for i, vector in enumerate(vectors):
            start = time.perf_counter()
            ids, _ = index.query(vector, k=pool, query_ef=max(ef, pool))
            times.append((time.perf_counter() - start) * 1000)
            recalls.append(len(set(int(x) for x in ids) & set(int(x) for x in exact[i])) / pool)
        out["by_ef"][ef] = {"recall": round(float(np.mean(recalls)), 4), "min_recall": round(min(recalls), 2),
                            "p50_ms": round(percentile(times, 50), 3)}
    start = time.perf_counter()
    for vector in vectors[:100]:
        np.argsort(-(matrix @ vector))[:pool]
    out["exact_numpy_ms"] = round((time.perf_counter() - start) * 10, 3)
    return out


def _wall(args: list[str], env: dict) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(args, env=env, capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        raise SystemExit(f"{args} failed: {proc.stderr}")
    return time.perf_counter() - start, proc.stdout


def cold_query(collection: str) -> dict:
    env = {**os.environ, "KX_HOME": str(HOME), "PYTHONPATH": str(REPO)}
    env.pop("KX_EMBED_RUNTIME", None)
    kx = [sys.executable, "-m", "kx_tui"]
    query = "Vitamin D deficiency is associated with an increased risk of multiple sclerosis."
    hybrid = kx + ["datasets", "query", collection, "--text", query, "--json"]
    runs = {"python -c pass": ([sys.executable, "-c", "pass"], env),
            "kx --help": (kx + ["--help"], env),
            "kx datasets list": (kx + ["datasets", "list"], env),
            "import sentence_transformers": ([sys.executable, "-c", "import sentence_transformers"], env),
            "kx datasets query --mode sparse": (hybrid + ["--mode", "sparse"], env),
            "kx datasets query (hybrid, onnx)": (hybrid, env),
            "kx datasets query (hybrid, torch)": (hybrid, {**env, "KX_EMBED_RUNTIME": "torch"})}
    times: dict[str, list[float]] = {label: [] for label in runs}
    stdouts: dict[str, str] = {}
    for _ in range(3):  # rounds, each running every command once
        for label, (args, run_env) in runs.items():
            seconds, stdouts[label] = _wall(args, run_env)
            times[label].append(seconds)
    out = {}
    for label, (args, _env) in runs.items():
        out[label] = {"median_s": round(sorted(times[label])[1], 3)}
        if "--json" in args:
            out[label]["engine_timings_ms"] = json.loads(stdouts[label])["timings_ms"]
    return out


def main() -> None:
    import argparse

    from engine import Engine, load_settings
    from engine.evaluation import read_queries

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collection", default="scifact")
    parser.add_argument("--runtimes", nargs="+", default=["onnx", "torch"], choices=["onnx", "torch"])
    args = parser.parse_args()
    collection = args.collection
    engine = ensure_dataset(collection)
    engines = {r: Engine(load_settings({"home": str(HOME), "embed_runtime": r})) for r in args.runtimes}
    queries = list(read_queries(DATA / collection / "queries.jsonl").values())
    result = {"collection": collection, "queries": len(queries), "load_average_at_start": os.getloadavg(),
              "stages_ms": stage_latency(engines, queries, collection),
              "hnsw": pool_recall(engine, queries, collection), "cold_cli": cold_query(collection),
              "load_average_at_end": os.getloadavg()}
    (REPO / "benchmarks" / "out").mkdir(parents=True, exist_ok=True)
    (REPO / "benchmarks" / "out" / "latency.json").write_text(json.dumps(result, indent=2))

    for runtime, by_mode in result["stages_ms"].items():
        print(f"{collection}, {len(queries)} queries, one at a time, runtime {runtime} (ms, p50 / p95)")
        print(f"{'mode':18}" + "".join(f"{s:>15}" for s in STAGES) + f"{'beyond embed':>15}")
        for label, stages in by_mode.items():
            cells = [f"{stages[s]['p50']:.2f} / {stages[s]['p95']:.2f}" if s in stages else "-" for s in STAGES]
            b = stages["beyond_embedding"]
            print(f"{label:18}" + "".join(f"{c:>15}" for c in cells) + f"{b['p50']:.2f} / {b['p95']:.2f}".rjust(15))
    h = result["hnsw"]
    print(f"\nHNSW pool of {h['pool']} vs exact cosine over {h['passages']} passages (default ef {h['default_ef']}):")
    for ef, row in h["by_ef"].items():
        print(f"  ef {ef:>4}: recall {row['recall']:.4f} (worst query {row['min_recall']:.2f}), "
              f"{row['p50_ms']:.3f} ms")
    print(f"  exact numpy search: {h['exact_numpy_ms']:.3f} ms a query")
    print("\nCold commands from a shell (median of 3):")
    for label, row in result["cold_cli"].items():
        extra = f"   engine: {row['engine_timings_ms']}" if "engine_timings_ms" in row else ""
        print(f"  {label:34}{row['median_s']:.2f} s{extra}")


if __name__ == "__main__":
    main()
