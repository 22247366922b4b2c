"""Retrieval quality on real test collections: nDCG@10 and Recall@100 per mode.

    python benchmarks/quality.py [--collections scifact cranfield cisi]

Each collection (BEIR layout, title + text per document) is ingested once into
benchmarks/out/home with the default settings, then every judged query runs
under dense, sparse, hybrid and hybrid+MMR. A document counts once, at its
best passage's rank; measures come from ir-measures (pytrec_eval).
"""

from __future__ import annotations

import argparse
import json

from common import DATA, HOME, REPO, ensure_dataset

# Measured on this machine class with whole documents, exact numpy cosine,
# bm25s (stemmed) and RRF K=60 (see the issue); None where no figure was given.
REFERENCE = {
    "scifact": {"dense": 0.645, "sparse": 0.686, "hybrid": 0.717},
    "cranfield": {"dense": 0.382, "sparse": 0.373, "hybrid": 0.423},
    "cisi": {"dense": None, "sparse": None, "hybrid": None},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collections", nargs="+", default=["scifact", "cranfield", "cisi"])
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "out" / "quality.json"))
    args = parser.parse_args()

    from engine.evaluation import EVAL_DEPTH, VARIANTS, evaluate, read_qrels, read_queries
    from engine import Engine, load_settings

    results = {}
    for name in args.collections:
        ensure_dataset(name)
        # deep lists so Recall@100 sees 100 distinct documents, as `kx eval` does
        engine = Engine(load_settings({"home": str(HOME), "max_k": EVAL_DEPTH, "candidate_pool": EVAL_DEPTH}))
        queries = read_queries(DATA / name / "queries.jsonl")
        qrels = read_qrels(DATA / name / "qrels.tsv")
        report = evaluate(lambda text, mode, rerank: engine.query(name, text, k=EVAL_DEPTH, mode=mode,
                                                                  rerank=rerank).hits,
                          name, queries, qrels, list(VARIANTS))
        summary = engine.dataset_summary(name)
        results[name] = {**report.to_dict(), "documents": summary.documents, "passages": summary.passages}

    print(f"{'collection':11}{'measure':12}" + "".join(f"{v:>12}" for v in VARIANTS) + f"{'reference hybrid':>18}")
    for name, result in results.items():
        for label in ("nDCG@10", "Recall@100"):
            row = result["measures"]
            ref = REFERENCE.get(name, {}).get("hybrid") if label == "nDCG@10" else None
            print(f"{name:11}{label:12}" + "".join(f"{row[v][label]:>12.4f}" for v in VARIANTS)
                  + (f"{ref:>18.3f}" if ref else f"{'':>18}"))
    with open(args.out, "w") as fh:
        json.dump({"results": results, "reference_ndcg10": REFERENCE}, fh, indent=2)


if __name__ == "__main__":
    main()
