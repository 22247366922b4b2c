"""The offline agent against one hybrid query, on CISI and Cranfield's long, multi-part questions.

    nice -n 10 python benchmarks/agent.py [--queries 20] [--collections cisi cranfield]

For each goal (a judged query, the longest `--queries` of each collection by
word count), the offline agent runs with the default bounds; the documents it
read are scored by recall against the judgements, and so is one hybrid query
of the same text given the same passage budget (k = passages the agent read,
the engine's default MMR pass on). Each document is one passage here, so
passages read = documents read. Also reported: steps and wall time per goal.

Embedding a collection with torch takes minutes on a shared 2-core machine, so
the document vectors are computed once and cached (with the dataset) under
/work/scratch/agent/ (override with --cache); the datasets are ingested with
those pre-computed vectors through the engine API. The agent's own sentence
and passage embeddings, and the query embeddings, are computed live.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from common import DATA, percentile

CACHE = Path("/work/scratch/agent")


def _corpus(collection: str) -> tuple[list[str], list[str]]:
    ids, texts = [], []
    with (DATA / collection / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            ids.append(str(record["_id"]))
            texts.append(f"{record.get('title', '')}\n{record['text']}".strip())
    return ids, texts


def _vectors(collection: str, ids: list[str], texts: list[str], cache: Path, embedder) -> np.ndarray:
    path = cache / f"{collection}-vectors.npy"
    ids_path = cache / f"{collection}-ids.json"
    if path.exists() and ids_path.exists() and json.loads(ids_path.read_text()) == ids:
        return np.load(path)
    print(f"embedding {len(texts)} documents of {collection} (cached in {path}) ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    vectors = embedder.encode(texts, batch_size=32)
    print(f"  {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    ids_path.write_text(json.dumps(ids))
    return vectors


def _engine(collection: str, cache: Path):
    from engine import Engine, load_settings
    from engine.text.inputs import DocumentInput

    # max_k 100: the single query must be able to spend the agent's whole passage budget
    engine = Engine(load_settings({"home": str(cache / "home"), "max_k": 100}, env={}))
    ids, texts = _corpus(collection)
    vectors = _vectors(collection, ids, texts, cache, engine.embedder())
    if collection not in {s.name for s in engine.list_datasets()}:
        docs = [DocumentInput(name=i, data=t.encode("utf-8")) for i, t in zip(ids, texts)]
        engine.ingest(collection, docs, vectors=vectors)
    return engine


def _queries(collection: str, n: int) -> tuple[list[tuple[str, str]], dict[str, set[str]]]:
    qrels: dict[str, set[str]] = {}
    with (DATA / collection / "qrels.tsv").open(encoding="utf-8") as handle:
        for line in handle:
            parts = line.strip().split("\t")
            if len(parts) >= 3 and parts[2].lstrip("-").isdigit() and int(parts[2]) > 0:
                qrels.setdefault(parts[0], set()).add(parts[1])
    queries = []
    with (DATA / collection / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if str(record["_id"]) in qrels:
                queries.append((str(record["_id"]), " ".join(record["text"].split())))
    queries.sort(key=lambda q: (-len(q[1].split()), q[0]))  # the longest questions: the multi-part ones
    return queries[:n], qrels


def run(collection: str, n: int, cache: Path) -> dict:

    engine = _engine(collection, cache)
    queries, qrels = _queries(collection, n)
    engine.query(collection, "warm up", k=5)
    rows = []
    for qid, text in queries:
        relevant = qrels[qid]
        started = time.perf_counter()
        agent = engine.run_agent(text, collection)
        agent_s = time.perf_counter() - started
        read_docs = {hit.document_name for hit in agent.read.values()}
        budget = max(1, len(agent.read))
        started = time.perf_counter()
        single = engine.query(collection, text, k=budget)
        single_s = time.perf_counter() - started
        single_docs = {hit.document_name for hit in single.hits}
        rows.append({
            "id": qid, "words": len(text.split()), "relevant": len(relevant), "budget": budget,
            "agent_recall": len(read_docs & relevant) / len(relevant),
            "single_recall": len(single_docs & relevant) / len(relevant),
            "steps": len(agent.steps), "stop": agent.stop_reason, "agent_s": agent_s, "single_s": single_s,
        })
        print(f"{collection} q{qid}: budget {budget}, agent {rows[-1]['agent_recall']:.3f} vs single "
              f"{rows[-1]['single_recall']:.3f}, {len(agent.steps)} steps ({agent.stop_reason}), {agent_s:.1f} s",
              file=sys.stderr, flush=True)
    engine.close()
    wins = sum(r["agent_recall"] > r["single_recall"] for r in rows)
    losses = sum(r["agent_recall"] < r["single_recall"] for r in rows)
    return {
        "collection": collection, "goals": len(rows),
        "mean_words": statistics.mean(r["words"] for r in rows),
        "mean_budget": statistics.mean(r["budget"] for r in rows),
        "agent_recall": statistics.mean(r["agent_recall"] for r in rows),
        "single_recall": statistics.mean(r["single_recall"] for r in rows),
        "wins": wins, "ties": len(rows) - wins - losses, "losses": losses,
        "steps_mean": statistics.mean(r["steps"] for r in rows),
        "steps_max": max(r["steps"] for r in rows),
        "stops": {s: sum(r["stop"] == s for r in rows) for s in sorted({r["stop"] for r in rows})},
        "agent_s_p50": percentile([r["agent_s"] for r in rows], 50),
        "agent_s_max": max(r["agent_s"] for r in rows),
        "single_ms_p50": 1000 * percentile([r["single_s"] for r in rows], 50),
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=20, help="goals per collection (the longest judged queries)")
    parser.add_argument("--collections", nargs="+", default=["cisi", "cranfield"])
    parser.add_argument("--cache", type=Path, default=CACHE, help="where document vectors and datasets are kept")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    args = parser.parse_args()
    results = []
    for collection in args.collections:
        if not (DATA / collection / "corpus.jsonl").exists():
            print(f"skipping {collection}: {DATA / collection} is absent", file=sys.stderr)
            continue
        results.append(run(collection, args.queries, args.cache))
    print("| collection | goals (mean words) | passage budget (mean) | agent Recall | single hybrid Recall | "
          "agent better / same / worse | steps mean (max) | stops | agent s/goal p50 (max) | single query ms p50 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        stops = ", ".join(f"{k} {v}" for k, v in r["stops"].items())
        print(f"| {r['collection']} | {r['goals']} ({r['mean_words']:.0f}) | {r['mean_budget']:.0f} | "
              f"{r['agent_recall']:.3f} | {r['single_recall']:.3f} | {r['wins']} / {r['ties']} / {r['losses']} | "
              f"{r['steps_mean']:.1f} ({r['steps_max']}) | {stops} | {r['agent_s_p50']:.1f} ({r['agent_s_max']:.1f}) | "
              f"{r['single_ms_p50']:.0f} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
