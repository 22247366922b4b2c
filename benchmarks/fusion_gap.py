"""Where hybrid's gap to the reference comes from: swap each of kx's two lists for the reference's.

    python benchmarks/fusion_gap.py [--collections cranfield cisi]   # needs the `bench` extra (bm25s)

For every judged query, kx's own dense and sparse candidate pools (300 passages, as `kx eval` asks) are
turned into document rankings (a document at its best passage's place, as the evaluation counts it), and
the reference of benchmarks/peers.py gives its whole-document rankings (exact cosine over the same
model's document vectors, bm25s). Each pairing is fused at document level by RRF (K 60, ties on the
document id) and scored with nDCG@10. Also printed: each list alone (nDCG@10, nDCG@30, Recall@50), the
share of documents cut into more than one passage among each dense list's first 10 and 11-30 (against
their share of all documents and of the judged-relevant ones), and the per-query difference between the
reference's pairing and kx's (mean and standard error). No MMR and no third list here: this isolates
what enters fusion.
"""

from __future__ import annotations

import argparse
import statistics

from common import DATA, ensure_dataset

DEPTH = 300
RRF_K = 60


def _documents(ranked: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for doc in ranked:
        seen.setdefault(doc, None)
    return list(seen)


def _rrf(*lists: list[str]) -> list[str]:
    scores: dict[str, float] = {}
    for ranked in lists:
        for rank, doc in enumerate(ranked, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores, key=lambda d: (-scores[d], d))


def _per_query(runs: dict[str, list[str]], qrels: dict[str, dict[str, int]], measure: str) -> dict[str, float]:
    import ir_measures
    from ir_measures import Qrel, ScoredDoc

    rows = [ScoredDoc(q, d, float(len(docs) - i)) for q, docs in runs.items() for i, d in enumerate(docs[:100])]
    judged = [Qrel(q, d, r) for q, docs in qrels.items() if q in runs for d, r in docs.items()]
    values = {q: 0.0 for q in runs}  # a query with no hit counts as 0
    for metric in ir_measures.iter_calc([ir_measures.parse_measure(measure)], judged, rows):
        values[metric.query_id] = float(metric.value)
    return values


def gap(name: str) -> None:
    from peers import Reference, load_collection

    from engine.evaluation import read_qrels, read_queries

    engine = ensure_dataset(name)
    qrels = read_qrels(DATA / name / "qrels.tsv")
    queries = {q: t for q, t in read_queries(DATA / name / "queries.jsonl").items() if q in qrels}
    embedder = engine.embedder()
    vectors = embedder.encode(list(queries.values()))
    kx: dict[str, dict[str, list[str]]] = {"dense": {}, "sparse": {}}
    parts: dict[str, int] = {}
    with engine.reading(name) as searcher:
        for (qid, text), vector in zip(queries.items(), vectors):
            for mode, found in (("dense", searcher.dense_candidates(vector, DEPTH)),
                                ("sparse", searcher.sparse_candidates(text, DEPTH))):
                rows = searcher.passages(list(found.keys))
                docs = searcher.documents(sorted({row.doc_ref for row in rows.values()}))
                names = [docs[rows[key].doc_ref].name for key in found.keys]  # found.keys: best first
                for key in found.keys:
                    parts[docs[rows[key].doc_ref].name] = rows[key].chunk_count
                kx[mode][qid] = _documents(names)
    collection = load_collection(name, embedder)
    reference = Reference(collection)
    vector_of = dict(zip(queries.values(), vectors))
    ref = {"dense": {q: [collection.ids[i] for i in reference.dense(vector_of[t], DEPTH)] for q, t in queries.items()},
           "sparse": {q: [collection.ids[i] for i in reference.sparse(t, DEPTH)] for q, t in queries.items()}}

    def mean(values: dict[str, float]) -> float:
        return sum(values.values()) / len(values)

    print(f"\n{name}: {len(queries)} judged queries, {len(collection.ids)} documents")
    print(f"{'lists':28}{'nDCG@10':>10}{'nDCG@30':>10}{'R@50':>10}")
    for label, run in (("kx dense (best passage)", kx["dense"]), ("reference dense (whole doc)", ref["dense"]),
                       ("kx sparse (best passage)", kx["sparse"]), ("reference sparse (bm25s)", ref["sparse"])):
        cells = [mean(_per_query(run, qrels, m)) for m in ("nDCG@10", "nDCG@30", "R@50")]
        print(f"{label:28}" + "".join(f"{c:>10.4f}" for c in cells))
    fused = {}
    print(f"{'RRF of dense + sparse':28}{'nDCG@10':>10}")
    for dense_side, sparse_side in (("kx", "kx"), ("reference", "reference"), ("kx", "reference"), ("reference", "kx")):
        d, s = (kx if dense_side == "kx" else ref)["dense"], (kx if sparse_side == "kx" else ref)["sparse"]
        fused[(dense_side, sparse_side)] = _per_query({q: _rrf(d[q], s[q]) for q in queries}, qrels, "nDCG@10")
        print(f"{dense_side + ' + ' + sparse_side:28}{mean(fused[(dense_side, sparse_side)]):>10.4f}")
    diff = [fused[("reference", "reference")][q] - fused[("kx", "kx")][q] for q in queries]
    print(f"reference - kx per query: mean {statistics.mean(diff):+.4f}, standard error "
          f"{statistics.stdev(diff) / len(diff) ** 0.5:.4f}; reference ahead on {sum(d > 0.001 for d in diff)}, "
          f"kx ahead on {sum(d < -0.001 for d in diff)}")
    multi = {doc for doc, n in parts.items() if n > 1}
    relevant = [d in multi for q in queries for d, r in qrels[q].items() if r > 0 and d in parts]
    print(f"documents in 2+ passages: {len(multi) / len(parts):.3f} of those seen, "
          f"{statistics.mean(relevant):.3f} of the relevant ones")
    for label, run in (("kx dense", kx["dense"]), ("reference dense", ref["dense"])):
        shares = [statistics.mean(statistics.mean(d in multi for d in run[q][lo:hi]) for q in queries if run[q][lo:hi])
                  for lo, hi in ((0, 10), (10, 30))]
        print(f"  among {label}'s first 10: {shares[0]:.3f}, 11-30: {shares[1]:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collections", nargs="+", default=["cranfield", "cisi"])
    args = parser.parse_args()
    for name in args.collections:
        gap(name)


if __name__ == "__main__":
    main()
