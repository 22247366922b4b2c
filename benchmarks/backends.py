"""SciFact on both backends: ingest passages/s, query p50/p95 per mode, nDCG@10 per mode.

    python benchmarks/backends.py [--docs N] [--backends embedded milvus-lite] [--milvus-uri URI]

The same documents, the same vectors (the benchmark vector cache,
vector_cache.py: every passage and query text is embedded once, before any
timing, so the figures are the stores' and the query pipeline's, not the
model's) and the same settings go into a fresh dataset on each backend.
`--docs N` keeps the first N documents that some test query judges, then
fills up in file order (nDCG over a subset is higher than over the whole
corpus, but the same subset on both backends compares like with like).
Sparse differs by design: the embedded engine stems and drops stopwords,
Milvus's portable analyzer only lowercases (engine/milvus/schema.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time

from common import BENCH_DIR, DATA, percentile

MODES = ("dense", "sparse", "hybrid", "hybrid+mmr")
SETTINGS = {"max_k": 100, "candidate_pool": 100}
SETTLE_S = 15


def _corpus(limit: int | None):
    from engine.evaluation import read_qrels, read_queries
    from engine.text.inputs import from_jsonl

    folder = DATA / "scifact"
    docs = list(from_jsonl(folder / "corpus.jsonl", 50 * 2**20))
    queries = read_queries(folder / "queries.jsonl")
    qrels = read_qrels(folder / "qrels.tsv")
    if limit and limit < len(docs):
        judged = {d for q in qrels.values() for d in q}
        first = [d for d in docs if d.name in judged]
        rest = [d for d in docs if d.name not in judged]
        docs = (first + rest)[:limit]
        kept = {d.name for d in docs}
        qrels = {q: {d: r for d, r in rel.items() if d in kept} for q, rel in qrels.items()}
        qrels = {q: rel for q, rel in qrels.items() if rel}
    return docs, queries, qrels


def _backend(kind: str, embedder, uri: str | None):
    from engine import load_settings
    from engine.open_backend import open_backend

    folder = BENCH_DIR / "backends" / kind
    if kind == "milvus-lite" and folder.exists():
        from milvus_lite.server_manager import server_manager_instance

        server_manager_instance.release_server(str(folder / "scifact.db"))
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    settings = {"home": str(folder / "home"), **SETTINGS}
    if kind != "embedded":
        settings.update(backend="milvus", milvus_uri=uri or str(folder / "scifact.db"))
    return open_backend(load_settings(settings, env={}), embedder=embedder)


def run(kind: str, docs, queries, qrels, embedder, uri: str | None) -> dict:
    from engine.evaluation import evaluate

    backend = _backend(kind, embedder, uri)
    started = time.perf_counter()
    report = backend.ingest("scifact", docs)
    ingest_s = time.perf_counter() - started
    timings: dict[str, list[float]] = {m: [] for m in MODES}

    def ask(text: str, mode: str, rerank: bool):
        result = backend.query("scifact", text, k=100, mode=mode, rerank=rerank)
        timings[mode + ("+mmr" if rerank and mode == "hybrid" else "")].append(result.timings_ms["total"])
        return result.hits

    # a pause (milvus-lite builds and compacts segments for ~10 s after a flush, competing for the cores),
    # then a few warm-up queries so neither backend is timed loading its readers
    time.sleep(SETTLE_S)
    for text in list(queries.values())[:5]:
        backend.query("scifact", text, k=10)
    measures = evaluate(ask, "scifact", queries, qrels, list(MODES)).to_dict()["measures"]
    backend.close()
    return {
        "documents": report.documents, "passages": report.passages, "ingest_s": round(ingest_s, 2),
        "ingest_passages_per_s": round(report.passages / ingest_s, 1),
        "modes": {m: {"nDCG@10": round(measures[m]["nDCG@10"], 4),
                      "p50_ms": round(percentile(timings[m], 50), 2),
                      "p95_ms": round(percentile(timings[m], 95), 2)} for m in MODES},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=None, help="use a judged-first subset of N documents")
    parser.add_argument("--backends", nargs="+", default=["embedded", "milvus-lite"],
                        choices=["embedded", "milvus-lite", "milvus"])
    parser.add_argument("--milvus-uri", default=None, help="for --backends milvus: http(s)://host:port")
    parser.add_argument("--out", default=str(BENCH_DIR / "backends.json"))
    args = parser.parse_args()

    from vector_cache import CachedEmbedder

    from engine import load_settings
    from engine.embedding.cards import model_card_for
    from engine.embedding.embedders import load_embedder
    from engine.text.chunking import chunk_text

    docs, queries, qrels = _corpus(args.docs)
    settings = load_settings(SETTINGS, env={})
    embedder = CachedEmbedder(load_embedder(model_card_for(settings.embed_model), settings), "scifact")
    # fill the vector cache first: every timed figure below is the store's and the pipeline's, not the model's
    texts = [c.text for d in docs for c in chunk_text(_text(d), settings.chunk_size, settings.chunk_overlap)]
    embedder.encode(texts + [q for q in queries.values()], batch_size=32)
    results = {"documents": len(docs), "queries": len([q for q in queries if q in qrels])}
    for kind in args.backends:
        results[kind] = run(kind, docs, queries, qrels, embedder, args.milvus_uri)
        print(json.dumps({kind: results[kind]}), flush=True)
    with open(args.out, "w") as out:
        json.dump(results, out, indent=2)
    print(f"wrote {args.out}")


def _text(doc) -> str:
    from engine.embedded.catalogue.documents import text_of_bytes

    return text_of_bytes(doc.data, doc.media_type) or ""


if __name__ == "__main__":
    main()
