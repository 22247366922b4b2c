"""Retrieval quality on real test collections, kx next to its peers: nDCG@10 and Recall@100.

    python benchmarks/quality.py [--collections scifact cranfield cisi] [--no-peers] [--expand]

Each collection (BEIR layout, title + text per document) is ingested once into
the benchmark home with the default settings (vectors through the benchmark
cache, vector_cache.py), then every judged query runs under kx's dense,
sparse, hybrid and hybrid+MMR. In the same process, on the same model's
vectors, the peers of benchmarks/peers.py run the same queries: the
reference (bm25s + exact cosine + RRF 60 over whole documents) and LanceDB's
hybrid search. A document counts once, at its best passage's rank; measures
come from ir-measures (pytrec_eval). The peers need the `bench` extra.
With --expand, kx's variants run a second time with query expansion
(engine/expansion.py), as columns "... +exp".
"""

from __future__ import annotations

import argparse
import json

from common import BENCH_DIR, DATA, HOME, ensure_dataset

KX = ("dense", "sparse", "hybrid", "hybrid+mmr")
PEERS = ("ref dense", "ref sparse", "ref hybrid", "lancedb hybrid")
LABELS = ("nDCG@10", "Recall@100")


def kx_measures(name: str, expand: bool = False) -> dict:
    from engine import Engine, load_settings
    from engine.evaluation import EVAL_DEPTH, evaluate, read_qrels, read_queries

    cached = ensure_dataset(name)
    # deep lists so Recall@100 sees 100 distinct documents, as `kx eval` does
    engine = Engine(load_settings({"home": str(HOME), "max_k": EVAL_DEPTH, "candidate_pool": EVAL_DEPTH}),
                    cached.embedder())
    queries = read_queries(DATA / name / "queries.jsonl")
    qrels = read_qrels(DATA / name / "qrels.tsv")
    report = evaluate(lambda text, mode, rerank: engine.query(name, text, k=EVAL_DEPTH, mode=mode,
                                                              rerank=rerank).hits,
                      name, queries, qrels, list(KX)).to_dict()
    if expand:
        expanded = evaluate(lambda text, mode, rerank: engine.query(name, text, k=EVAL_DEPTH, mode=mode, rerank=rerank,
                                                                    expand=True).hits,
                            name, queries, qrels, list(KX)).to_dict()
        report["measures"].update({f"{v} +exp": m for v, m in expanded["measures"].items()})
    summary = engine.dataset_summary(name)
    return {**report, "documents": summary.documents, "passages": summary.passages,
            "embedder": cached.embedder()}


def peer_measures(name: str, embedder) -> dict:
    from peers import LanceHybrid, Reference, load_collection

    from engine.evaluation import EVAL_DEPTH, evaluate

    collection = load_collection(name, embedder)
    texts = list(collection.queries.values())
    vector_of = dict(zip(texts, embedder.encode(texts)))
    reference = Reference(collection)
    ref = evaluate(lambda text, mode, rerank: reference.search(mode, text, vector_of[text], EVAL_DEPTH),
                   name, collection.queries, collection.qrels, ["dense", "sparse", "hybrid"]).to_dict()
    lance = LanceHybrid(collection)
    lan = evaluate(lambda text, mode, rerank: lance.search(text, vector_of[text], 100),
                   name, collection.queries, collection.qrels, ["hybrid"]).to_dict()
    measures = {f"ref {v}": m for v, m in ref["measures"].items()}
    measures["lancedb hybrid"] = lan["measures"]["hybrid"]
    return measures


def targets(row: dict) -> dict[str, bool]:
    """The issue's quality targets on nDCG@10 (benchmarks, not tests: figures move with the data)."""
    n = {v: m["nDCG@10"] for v, m in row.items()}
    out = {"MMR on >= MMR off - 0.002": n["hybrid+mmr"] >= n["hybrid"] - 0.002}
    if "ref sparse" in n:
        out["sparse >= bm25s - 0.005"] = n["sparse"] >= n["ref sparse"] - 0.005
        out["hybrid >= reference hybrid"] = n["hybrid"] >= n["ref hybrid"]
        out["hybrid+MMR >= reference hybrid"] = n["hybrid+mmr"] >= n["ref hybrid"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collections", nargs="+", default=["scifact", "cranfield", "cisi"])
    parser.add_argument("--no-peers", action="store_true", help="kx only (no bench extra needed)")
    parser.add_argument("--expand", action="store_true", help="kx's variants once more with query expansion")
    parser.add_argument("--out", default=str(BENCH_DIR / "quality.json"))
    args = parser.parse_args()

    results = {}
    for name in args.collections:
        kx = kx_measures(name, args.expand)
        row = dict(kx["measures"])
        if not args.no_peers:
            row.update(peer_measures(name, kx["embedder"]))
        results[name] = {"documents": kx["documents"], "passages": kx["passages"], "queries": kx["judged_queries"],
                         "measures": row, "targets": targets(row)}

    expanded = tuple(f"{v} +exp" for v in KX) if args.expand else ()
    columns = [c for c in KX + expanded + PEERS if any(c in r["measures"] for r in results.values())]
    print(f"{'collection':11}{'measure':12}" + "".join(f"{c:>15}" for c in columns))
    for name, result in results.items():
        for label in LABELS:
            cells = [result["measures"][c][label] if c in result["measures"] else None for c in columns]
            print(f"{name:11}{label:12}" + "".join(f"{c:>15.4f}" if c is not None else f"{'':>15}" for c in cells))
    for name, result in results.items():
        print(f"{name}: " + "; ".join(f"{t} {'met' if ok else 'MISSED'}" for t, ok in result["targets"].items()))
    if not args.no_peers:
        from peers import describe

        print("peers:", describe())
    with open(args.out, "w") as fh:
        json.dump({"results": results}, fh, indent=2)


if __name__ == "__main__":
    main()
