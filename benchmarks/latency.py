"""Query latency on SciFact, stage by stage, next to its peers, the HNSW pool's recall, and a cold query.

    python benchmarks/latency.py [--no-peers] [--no-cold] [--search-only [--no-lance]]

1. Every SciFact test query, one at a time after a warm-up, in each mode with
   the default settings (k=10, pool 100, MMR on): p50 and p95 of query
   embedding, dense search, sparse search, fusion, MMR and the total; the
   target is that everything beyond embedding the query costs less than it.
2. The dense candidate pool (100) from voyager against exact cosine search
   over every stored vector, at several search breadths (ef).
3. kx next to its peers (benchmarks/peers.py, the `bench` extra), query by
   query in turns so machine noise hits all alike: a kx hybrid query (k 10,
   MMR on), the reference (bm25s + exact cosine + RRF over whole documents)
   and LanceDB's hybrid search (limit 10), each from the query text to its
   hits, embedding included (the same model and call for all three): p50,
   p95 and the ratio kx / LanceDB.
4. The search alone, the query vector given (no model time): kx hybrid with
   MMR and without, the reference and LanceDB, in turns: p50 / p95, the
   ratios kx / reference and kx / LanceDB, and what MMR adds
   (`--search-only` runs just this part).
5. One cold `kx datasets query` as a user runs it from a shell, and where its
   time goes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
from common import BENCH_DIR, DATA, HOME, REPO, ensure_dataset, percentile

STAGES = ("embed", "dense", "sparse", "fusion", "mmr", "total")


def stage_latency(engine, queries: list[str]) -> dict:
    for text in queries[:20]:
        engine.query("scifact", text)
    out = {}
    for label, mode, rerank in (("hybrid", "hybrid", True), ("hybrid (MMR off)", "hybrid", False),
                                ("dense", "dense", True), ("sparse", "sparse", True)):
        samples: dict[str, list[float]] = {s: [] for s in STAGES}
        beyond = []
        for text in queries:
            timings = engine.query("scifact", text, mode=mode, rerank=rerank).timings_ms
            for stage in STAGES:
                if stage in timings:
                    samples[stage].append(timings[stage])
            beyond.append(timings["total"] - timings.get("embed", 0.0))
        out[label] = {s: {"p50": round(percentile(v, 50), 2), "p95": round(percentile(v, 95), 2)}
                      for s, v in samples.items() if v}
        out[label]["beyond_embedding"] = {"p50": round(percentile(beyond, 50), 2),
                                          "p95": round(percentile(beyond, 95), 2)}
    return out


def pool_recall(engine, queries: list[str]) -> dict:
    from engine.embedded.dataset import Dataset
    from engine.embedded.readers import dense_ef

    dataset = Dataset(engine.settings, "scifact")
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


def peer_latency(engine, queries: list[str]) -> dict:
    from common import ensure_dataset
    from peers import LanceHybrid, Reference, load_collection

    collection = load_collection("scifact", ensure_dataset("scifact").embedder())  # cached document vectors
    reference, lance = Reference(collection), LanceHybrid(collection)
    embedder = engine.embedder()

    def kx_query(text: str):
        return engine.query("scifact", text, k=10)

    def reference_query(text: str):
        return reference.search("hybrid", text, embedder.encode([text])[0], 100)[:10]

    def lance_query(text: str):
        return lance.search(text, embedder.encode([text])[0], 10)

    runs = {"kx hybrid (MMR on)": kx_query, "reference hybrid": reference_query, "lancedb hybrid": lance_query}
    for text in queries[:20]:  # warm-up: caches, lazy imports, the model
        for fn in runs.values():
            fn(text)
    samples: dict[str, list[float]] = {label: [] for label in runs}
    for text in queries:
        for label, fn in runs.items():
            start = time.perf_counter()
            fn(text)
            samples[label].append((time.perf_counter() - start) * 1000.0)
    out = {label: {"p50": round(percentile(v, 50), 2), "p95": round(percentile(v, 95), 2)}
           for label, v in samples.items()}
    kx, ln = out["kx hybrid (MMR on)"], out["lancedb hybrid"]
    out["ratio kx / lancedb"] = {"p50": round(kx["p50"] / ln["p50"], 3), "p95": round(kx["p95"] / ln["p95"], 3)}
    return out


def search_only_latency(engine, queries: list[str], peers: bool, lance: bool = True) -> dict:
    """The search alone (the query vector given, so no model time), kx against its peers, in turns.

    Each query's vector is embedded once beforehand; every system then gets
    the same text and vector: kx hybrid with MMR (k 10) and without, the
    reference (bm25s + exact cosine + RRF, top 10 of 100 per list) and, when
    installed, LanceDB's hybrid search (limit 10). Queries take turns across
    the systems (in a shuffled order), so machine load hits all alike. Wall and process CPU time.
    """
    vectors = engine.embedder().encode(queries)
    runs = {"kx hybrid (MMR on)": lambda t, v: engine.query("scifact", t, vector=v, k=10),
            "kx hybrid (MMR off)": lambda t, v: engine.query("scifact", t, vector=v, k=10, rerank=False)}
    if peers:
        from common import ensure_dataset
        from peers import LanceHybrid, Reference, load_collection

        collection = load_collection("scifact", ensure_dataset("scifact").embedder())  # cached vectors
        reference = Reference(collection)
        runs["reference hybrid"] = lambda t, v: reference.search("hybrid", t, v, 100)[:10]
        try:
            if lance:
                table = LanceHybrid(collection)
                runs["lancedb hybrid"] = lambda t, v: table.search(t, v, 10)
        except ImportError:
            pass  # LanceDB not installed: kx against the reference only
    for text, vector in zip(queries[:20], vectors):  # warm-up: caches, lazy imports
        for fn in runs.values():
            fn(text, vector)
    samples: dict[str, list[float]] = {label: [] for label in runs}
    cpu: dict[str, list[float]] = {label: [] for label in runs}
    import random

    order = random.Random(27)
    for text, vector in zip(queries, vectors):
        # a shuffled order each query (seeded): LanceDB's worker threads run on after its query returns,
        # and would be charged (CPU) and felt (wall) by whichever system always came next
        labels = list(runs)
        order.shuffle(labels)
        for label in labels:
            fn = runs[label]
            start, start_cpu = time.perf_counter(), time.process_time()
            fn(text, vector)
            samples[label].append((time.perf_counter() - start) * 1000.0)
            cpu[label].append((time.process_time() - start_cpu) * 1000.0)
    # Wall time and the process's CPU time: on a loaded machine a query is often descheduled for a time
    # slice (p90 of a bare voyager search: 1.5 -> 30 ms at load 18), which wall time counts and CPU time
    # does not; CPU time is the work each system does.
    out: dict[str, dict] = {}
    for label in runs:
        for name, values in ((label, samples[label]), (f"{label}, CPU", cpu[label])):
            out[name] = {"p50": round(percentile(values, 50), 3), "p95": round(percentile(values, 95), 3)}
    for suffix in ("", ", CPU"):
        kx, off = out["kx hybrid (MMR on)" + suffix], out["kx hybrid (MMR off)" + suffix]
        out["MMR adds" + suffix] = {q: round(kx[q] / off[q] - 1.0, 3) for q in ("p50", "p95")}
        for peer in ("reference hybrid", "lancedb hybrid"):
            if peer + suffix in out:
                out[f"ratio kx / {peer.split()[0]}{suffix}"] = {q: round(kx[q] / out[peer + suffix][q], 3)
                                                               for q in ("p50", "p95")}
    return out


def _wall(args: list[str], env: dict) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(args, env=env, capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        raise SystemExit(f"{args} failed: {proc.stderr}")
    return time.perf_counter() - start, proc.stdout


def cold_query() -> dict:
    env = {**os.environ, "KX_HOME": str(HOME)}
    kx = [sys.executable, "-m", "kx_tui"]
    query = "Vitamin D deficiency is associated with an increased risk of multiple sclerosis."
    runs = {"python -c pass": [sys.executable, "-c", "pass"],
            "kx --help": kx + ["--help"],
            "import sentence_transformers": [sys.executable, "-c", "import sentence_transformers"],
            "kx datasets query --mode sparse": kx + ["datasets", "query", "scifact", "--text", query, "--mode",
                                                     "sparse", "--json"],
            "kx datasets query (hybrid)": kx + ["datasets", "query", "scifact", "--text", query, "--json"]}
    out = {}
    for label, args in runs.items():
        times, stdout = [], ""
        for _ in range(3):
            seconds, stdout = _wall(args, env)
            times.append(seconds)
        out[label] = {"median_s": round(sorted(times)[1], 3)}
        if "--json" in args:
            out[label]["engine_timings_ms"] = json.loads(stdout)["timings_ms"]
    return out


def main() -> None:
    import argparse

    from engine import Engine
    from engine.evaluation import read_queries

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-peers", action="store_true", help="skip the peers (no bench extra needed)")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold shell commands")
    parser.add_argument("--search-only", action="store_true",
                        help="only the search-alone comparison (query vectors given) and its ratios")
    parser.add_argument("--no-lance", action="store_true",
                        help="search alone: leave LanceDB out (its worker threads run on after each of its "
                             "queries and load the others' turns)")
    args = parser.parse_args()

    # built through the vector cache; queried with the real model, so embedding is really timed
    engine = Engine(ensure_dataset("scifact").settings)
    queries = list(read_queries(DATA / "scifact" / "queries.jsonl").values())
    if args.search_only:
        row = {"queries": len(queries),
               "search_only_ms": search_only_latency(engine, queries, not args.no_peers, not args.no_lance)}
        BENCH_DIR.mkdir(parents=True, exist_ok=True)
        (BENCH_DIR / "latency-search-only.json").write_text(json.dumps(row, indent=2))
        _print_search_only(row["search_only_ms"])
        return
    result = {"queries": len(queries), "stages_ms": stage_latency(engine, queries),
              "hnsw": pool_recall(engine, queries),
              "search_only_ms": search_only_latency(engine, queries, not args.no_peers)}
    if not args.no_peers:
        result["peers_ms"] = peer_latency(engine, queries)
    if not args.no_cold:
        result["cold_cli"] = cold_query()
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    (BENCH_DIR / "latency.json").write_text(json.dumps(result, indent=2))

    print(f"SciFact, {len(queries)} queries, one at a time (ms, p50 / p95)")
    print(f"{'mode':18}" + "".join(f"{s:>15}" for s in STAGES) + f"{'beyond embed':>15}")
    for label, stages in result["stages_ms"].items():
        cells = [f"{stages[s]['p50']:.2f} / {stages[s]['p95']:.2f}" if s in stages else "-" for s in STAGES]
        b = stages["beyond_embedding"]
        print(f"{label:18}" + "".join(f"{c:>15}" for c in cells) + f"{b['p50']:.2f} / {b['p95']:.2f}".rjust(15))
    h = result["hnsw"]
    print(f"\nHNSW pool of {h['pool']} vs exact cosine over {h['passages']} passages (default ef {h['default_ef']}):")
    for ef, row in h["by_ef"].items():
        print(f"  ef {ef:>4}: recall {row['recall']:.4f} (worst query {row['min_recall']:.2f}), "
              f"{row['p50_ms']:.3f} ms")
    print(f"  exact numpy search: {h['exact_numpy_ms']:.3f} ms a query")
    if "peers_ms" in result:
        print("\nFrom query text to hits, embedding included, in turns (ms):")
        for label, row in result["peers_ms"].items():
            print(f"  {label:24}p50 {row['p50']:>8}   p95 {row['p95']:>8}")
    _print_search_only(result["search_only_ms"])
    print("\nCold commands from a shell (median of 3):")
    for label, row in result.get("cold_cli", {}).items():
        extra = f"   engine: {row['engine_timings_ms']}" if "engine_timings_ms" in row else ""
        print(f"  {label:34}{row['median_s']:.2f} s{extra}")


def _print_search_only(rows: dict) -> None:
    print("\nSearch alone (query vector given), in turns (ms):")
    for label, row in rows.items():
        print(f"  {label:24}p50 {row['p50']:>8}   p95 {row['p95']:>8}")


if __name__ == "__main__":
    main()
