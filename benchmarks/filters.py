"""Filtered queries against unfiltered ones, and a rebuild against a fresh ingest, on SciFact.

    KX_BENCH_DIR=/tmp/somewhere python benchmarks/filters.py [--queries 150] [--no-rebuild] [--no-filters]
        [--rebuild-first] [--backend embedded|milvus-lite]

1. Every SciFact test query (the first --queries of them), hybrid, k=10, MMR
   on, in turns: unfiltered, then `--where` name globs that keep ~1 %, ~10 %
   and ~50 % of the documents (`name:*00`, `name:*0`, `name:*[02468]`; SciFact's
   names are numeric ids). p50 / p95 of the whole query and the ratio to the
   unfiltered p50 (target <= 2x), and how many queries got fewer than k hits.
2. `rebuild scifact --as scifact-rebuilt` against a fresh ingest of the same
   corpus into another dataset, both through the benchmark vector cache (so
   both measure kx's pipeline, not the model): passages/s and the ratio
   (target >= 0.95).
Both ratios are measured in the same run on the same (loaded) machine.
With `--backend milvus-lite` (1. only: a Milvus dataset cannot be rebuilt)
the same corpus goes into a milvus-lite file under KX_BENCH_DIR once, and
the filters run as Milvus filter expressions inside its searches.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time

from common import BENCH_DIR, DATA, ensure_dataset, percentile

FILTERS = {"1%": ["name:*00"], "10%": ["name:*0"], "50%": ["name:*[02468]"]}


def filtered_latency(engine, queries: list[str]) -> dict:
    for text in queries[:10]:  # warm-up: readers, filters' caches, the model
        for where in (None, *FILTERS.values()):
            engine.query("scifact", text, where=where)
    samples: dict[str, list[float]] = {"none": [], **{label: [] for label in FILTERS}}
    short: dict[str, int] = {label: 0 for label in samples}
    for text in queries:
        for label, where in (("none", None), *FILTERS.items()):
            result = engine.query("scifact", text, where=where)
            samples[label].append(result.timings_ms["total"] - result.timings_ms.get("embed", 0.0))
            short[label] += len(result.hits) < result.k
    base = percentile(samples["none"], 50)
    return {label: {"p50_ms": round(percentile(v, 50), 2), "p95_ms": round(percentile(v, 95), 2),
                    "ratio_p50": round(percentile(v, 50) / base, 2), "queries_short_of_k": short[label]}
            for label, v in samples.items()}


def milvus_dataset():
    """A MilvusBackend over KX_BENCH_DIR/filters-milvus/scifact.db with SciFact in it (ingested once)."""
    from vector_cache import CachedEmbedder

    from engine import Engine, load_settings
    from engine.embedding.embedders import load_embedder
    from engine.milvus.backend import MilvusBackend
    from engine.text.inputs import from_jsonl

    folder = BENCH_DIR / "filters-milvus"
    folder.mkdir(parents=True, exist_ok=True)
    settings = load_settings({"home": str(folder / "home"), "backend": "milvus",
                              "milvus_uri": str(folder / "scifact.db")}, env={})
    card = Engine(settings).model_card()
    backend = MilvusBackend(settings, embedder=CachedEmbedder(load_embedder(card, settings), "scifact"))
    if "scifact" not in {s.name for s in backend.list_datasets()}:
        corpus = DATA / "scifact" / "corpus.jsonl"
        print(f"ingesting {corpus} into milvus-lite ...", file=sys.stderr, flush=True)
        backend.ingest("scifact", list(from_jsonl(corpus, settings.max_document_bytes)))
        time.sleep(15)   # milvus-lite seals and indexes segments after the flush: let it finish first
    return backend


def rebuild_rate(engine, rebuild_first: bool = False) -> dict:
    from engine.text.inputs import from_jsonl

    for name in ("scifact-rebuilt", "scifact-fresh"):
        folder = engine.settings.datasets_dir / name
        if folder.exists():
            shutil.rmtree(folder)
    docs = list(from_jsonl(DATA / "scifact" / "corpus.jsonl", engine.settings.max_document_bytes))
    timed = {}
    for step in (("rebuild", "fresh") if rebuild_first else ("fresh", "rebuild")):
        start = time.perf_counter()
        timed[step] = (engine.ingest("scifact-fresh", docs) if step == "fresh"
                       else engine.rebuild("scifact", "scifact-rebuilt"), time.perf_counter() - start)
    (fresh, fresh_s), (rebuilt, rebuilt_s) = timed["fresh"], timed["rebuild"]
    return {"order": "rebuild first" if rebuild_first else "fresh first", "passages": rebuilt.passages,
            "fresh_s": round(fresh_s, 1), "rebuild_s": round(rebuilt_s, 1),
            "fresh_passages_per_s": round(fresh.passages / fresh_s, 1),
            "rebuild_passages_per_s": round(rebuilt.passages / rebuilt_s, 1),
            "ratio": round((rebuilt.passages / rebuilt_s) / (fresh.passages / fresh_s), 3)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--no-rebuild", action="store_true")
    parser.add_argument("--rebuild-first", action="store_true", help="time the rebuild before the fresh ingest")
    parser.add_argument("--no-filters", action="store_true")
    parser.add_argument("--backend", choices=["embedded", "milvus-lite"], default="embedded")
    args = parser.parse_args()
    from engine.evaluation import read_queries

    engine = ensure_dataset("scifact") if args.backend == "embedded" else milvus_dataset()
    if args.backend != "embedded":
        args.no_rebuild = True
    queries = list(read_queries(DATA / "scifact" / "queries.jsonl").values())[:args.queries]
    result: dict = {"bench_dir": str(BENCH_DIR), "backend": args.backend, "queries": len(queries)}
    if not args.no_filters:
        result["filtered_ms"] = filtered_latency(engine, queries)
    if not args.no_rebuild:
        result["rebuild"] = rebuild_rate(engine, args.rebuild_first)
    engine.close()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
