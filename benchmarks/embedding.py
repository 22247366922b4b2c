"""The embedding runtimes side by side: torch (sentence-transformers), ONNX Runtime fp32 and int8.

    python benchmarks/embedding.py [--parts query throughput cold quality] [--passages 384] [--queries 200]

Every part measures its contenders in one run, interleaved (each round runs
all of them in turn), so a noisy neighbour slows them alike; the targets are
ratios (issue #10):

- query: one short query at a time, warmed: p50 / p95 ms. Target ONNX fp32
  p50 <= 0.45 x torch's.
- throughput: SciFact passages as kx cuts them (1000 characters, overlap 200),
  passages/s of raw `SentenceTransformer.encode` (batch 32) against kx's ONNX
  embedder at several batch sizes and thread layouts (one session with 1 or
  all intra-op threads; two Python threads sharing a 1-thread session).
  Targets at the default batch: fp32 >= 1.0 x raw, int8 >= 1.7 x raw.
- cold: fresh processes from a shell, median of 5 rounds: `python -c pass`,
  `kx datasets list`, `kx datasets query` (hybrid, ONNX) and the same query
  with KX_EMBED_RUNTIME=torch, `kx info` and `kx --help`, with .pyc files
  written. Targets: query <= 1.0 s and <= 8 x list (issue #27);
  list <= 4 x `python -c pass`. --cold-baseline CHECKOUT runs list, info,
  --help and the query from another checkout in the same rounds (before /
  after a change).
- quality: nDCG@10 of exact dense retrieval (cosine over every document,
  title + text, truncated by the model at 256 tokens) with fp32 and int8 on
  SciFact, Cranfield and CISI. fp32 ONNX gives torch's vectors (tests pin
  cosine >= 0.9999), so it stands for both. Target: int8 costs <= 0.005.

The ONNX graphs are exported (once) into benchmarks/out/home/models.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from common import DATA, HOME, REPO, percentile, scifact_passages

OUT = REPO / "benchmarks" / "out"


def _embedders(threads: int = 0):
    """torch, ONNX fp32 and ONNX int8 embedders of the bundled model, all loaded."""
    from engine import load_settings
    from engine.embedding.cards import model_card_for
    from engine.embedding.embedders import SentenceTransformerEmbedder
    from engine.embedding.onnx_export import open_onnx

    settings = load_settings({"home": str(HOME), "embed_threads": threads}, env={})
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    return {"torch": SentenceTransformerEmbedder(model_card_for("default")),
            "onnx fp32": open_onnx(settings, model_card_for("default"), say),
            "onnx int8": open_onnx(settings, model_card_for("default-int8"), say)}


def _queries(limit: int) -> list[str]:
    from engine.evaluation import read_queries

    return list(read_queries(DATA / "scifact" / "queries.jsonl").values())[:limit]


def query_latency(embedders: dict, queries: list[str]) -> dict:
    for e in embedders.values():
        for text in queries[:20]:
            e.encode([text])
    samples: dict[str, list[float]] = {name: [] for name in embedders}
    for text in queries:
        for name, e in embedders.items():
            start = time.perf_counter()
            e.encode([text])
            samples[name].append((time.perf_counter() - start) * 1000)
    out = {name: {"p50_ms": round(percentile(v, 50), 2), "p95_ms": round(percentile(v, 95), 2)}
           for name, v in samples.items()}
    for name in ("onnx fp32", "onnx int8"):
        out[name]["p50_vs_torch"] = round(out[name]["p50_ms"] / out["torch"]["p50_ms"], 3)
    return out


def _two_threads(embedder, texts: list[str], batch: int) -> None:
    """Two Python threads share one session (onnxruntime releases the GIL in run)."""
    order = sorted(texts, key=len, reverse=True)
    batches = [order[i:i + batch] for i in range(0, len(order), batch)]
    work = iter(batches)
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                chunk = next(work, None)
            if chunk is None:
                return
            embedder.encode(chunk, batch_size=batch)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def throughput(passages: list[str], rounds: int) -> dict:
    from sentence_transformers import SentenceTransformer

    from engine.embedding.cards import bundled_model_path

    cores = os.cpu_count() or 1
    layouts = {f"{cores} threads": _embedders(0), "1 thread": _embedders(1)}
    raw = SentenceTransformer(str(bundled_model_path()), device="cpu")
    contenders = {"raw SentenceTransformer.encode (32)": lambda texts: raw.encode(
        texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)}
    for variant in ("onnx fp32", "onnx int8"):
        for batch in (16, 32, 64):
            e = layouts[f"{cores} threads"][variant]
            contenders[f"{variant}, batch {batch}, {cores} threads"] = (lambda e, b: lambda t: e.encode(t, b))(e, batch)
        one = layouts["1 thread"][variant]
        contenders[f"{variant}, batch 32, 1 thread"] = (lambda e: lambda t: e.encode(t, 32))(one)
        contenders[f"{variant}, batch 32, 2 workers x 1 thread"] = (lambda e: lambda t: _two_threads(e, t, 32))(one)
    warm = passages[:64]
    for fn in contenders.values():
        fn(warm)
    seconds = {name: 0.0 for name in contenders}
    size = -(-len(passages) // rounds)
    for r in range(rounds):
        part = passages[r * size:(r + 1) * size]
        for name, fn in contenders.items():
            start = time.perf_counter()
            fn(part)
            seconds[name] += time.perf_counter() - start
        print(f"throughput round {r + 1}/{rounds}", file=sys.stderr, flush=True)
    base = len(passages) / seconds["raw SentenceTransformer.encode (32)"]
    return {name: {"passages_per_s": round(len(passages) / s, 2), "vs_raw": round(len(passages) / s / base, 3)}
            for name, s in seconds.items()}


def _wall(args: list[str], env: dict) -> float:
    start = time.perf_counter()
    # run in the checkout on PYTHONPATH: `python -m` puts the working directory first on sys.path
    proc = subprocess.run(args, env=env, capture_output=True, text=True, cwd=env.get("PYTHONPATH", REPO))
    if proc.returncode != 0:
        raise SystemExit(f"{args} failed: {proc.stderr}")
    return time.perf_counter() - start


def cold(rounds: int, baseline: Path | None = None, torch: bool = True, pyc: bool = True) -> dict:
    """Fresh processes, interleaved; `baseline`: another checkout (e.g. main before a change) run alike.

    pyc: bytecode is written (PYTHONDONTWRITEBYTECODE dropped) and one unmeasured round runs first, so every
    figure is a run with .pyc files in place, as after `pip install`. Without: kx's own modules have none
    (their __pycache__ folders removed, PYTHONDONTWRITEBYTECODE=1), each run compiles them, as in a source
    checkout where bytecode is off; the libraries keep theirs.
    """
    from engine import Engine, load_settings
    from engine.text.inputs import from_text

    engine = Engine(load_settings({"home": str(HOME)}, env={}))
    if "handbook" not in {s.name for s in engine.list_datasets()}:
        engine.ingest("handbook", [from_text(p.read_text(encoding="utf-8"), name=p.name)
                                   for p in sorted((REPO / "samples" / "handbook").glob("*.md"))])
    engine.prepare_model()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KX_") and k != "PYTHONDONTWRITEBYTECODE"}
    if not pyc:
        import shutil

        env["PYTHONDONTWRITEBYTECODE"] = "1"
        for checkout in (REPO, baseline) if baseline is not None else (REPO,):
            for cache in [*(checkout / "engine").rglob("__pycache__"), *(checkout / "kx_tui").rglob("__pycache__")]:
                shutil.rmtree(cache)
    env.update({"KX_HOME": str(HOME), "PYTHONPATH": str(REPO)})
    kx = [sys.executable, "-m", "kx_tui"]
    query = kx + ["datasets", "query", "handbook", "--text", "how many days of paid leave", "--json"]
    runs = {"python -c pass": ([sys.executable, "-c", "pass"], env),
            "kx --help": (kx + ["--help"], env),
            "kx datasets list": (kx + ["datasets", "list"], env),
            "kx info": (kx + ["info"], env),
            "kx datasets query (hybrid, onnx)": (query, env)}
    if torch:
        runs["kx datasets query (hybrid, torch)"] = (query, {**env, "KX_EMBED_RUNTIME": "torch"})
    if baseline is not None:
        old = {**env, "PYTHONPATH": str(baseline)}
        runs.update({"baseline: kx --help": (kx + ["--help"], old),
                     "baseline: kx datasets list": (kx + ["datasets", "list"], old),
                     "baseline: kx info": (kx + ["info"], old),
                     "baseline: kx datasets query (hybrid, onnx)": (query, old)})
    for args, run_env in runs.values():  # writes the .pyc files; not measured
        _wall(args, run_env)
    times: dict[str, list[float]] = {label: [] for label in runs}
    for r in range(rounds):
        for label, (args, run_env) in runs.items():
            times[label].append(_wall(args, run_env))
        print(f"cold round {r + 1}/{rounds}", file=sys.stderr, flush=True)
    out: dict[str, Any] = {label: {"median_s": round(statistics.median(v), 3)} for label, v in times.items()}
    out["bytecode"] = ("written (.pyc in place; one unmeasured round first)" if pyc else
                       "none for kx's own modules (compiled on every run); the libraries' in place")

    def med(label: str) -> float:
        return out[label]["median_s"]

    ratios = {"query / list": round(med("kx datasets query (hybrid, onnx)") / med("kx datasets list"), 2),
              "list / python -c pass": round(med("kx datasets list") / med("python -c pass"), 2),
              "info / python -c pass": round(med("kx info") / med("python -c pass"), 2),
              "--help / python -c pass": round(med("kx --help") / med("python -c pass"), 2)}
    if torch:
        ratios["onnx query / torch query"] = round(med("kx datasets query (hybrid, onnx)")
                                                   / med("kx datasets query (hybrid, torch)"), 3)
    if baseline is not None:
        out["baseline"] = str(baseline)
        ratios.update({
            "baseline: query / list": round(med("baseline: kx datasets query (hybrid, onnx)")
                                            / med("baseline: kx datasets list"), 2),
            "baseline: list / python -c pass": round(med("baseline: kx datasets list") / med("python -c pass"), 2),
            "baseline: info / python -c pass": round(med("baseline: kx info") / med("python -c pass"), 2),
            "baseline: --help / python -c pass": round(med("baseline: kx --help") / med("python -c pass"), 2),
            "list: this tree / baseline": round(med("kx datasets list") / med("baseline: kx datasets list"), 3),
            "query: this tree / baseline": round(med("kx datasets query (hybrid, onnx)")
                                                 / med("baseline: kx datasets query (hybrid, onnx)"), 3)})
    out["ratios"] = ratios
    return out


def _ndcg(vectors, ids: list[str], query_vectors, qids: list[str], qrels: dict) -> float:
    import ir_measures
    import numpy as np
    from ir_measures import Qrel, ScoredDoc

    scores = query_vectors @ vectors.T
    run = []
    for i, qid in enumerate(qids):
        top = np.argsort(-scores[i])[:10]
        run.extend(ScoredDoc(qid, ids[j], float(scores[i, j])) for j in top)
    rows = [Qrel(q, d, r) for q, docs in qrels.items() if q in set(qids) for d, r in docs.items()]
    total = sum(m.value for m in ir_measures.iter_calc([ir_measures.nDCG @ 10], rows, run))
    return float(total) / len(qids)  # a judged query with no relevant hit counts as 0


def whole_documents(name: str) -> tuple[list[str], list[str], dict[str, str], dict]:
    """A BEIR collection as the quality part embeds it: ids, title + text per document, judged queries, qrels."""
    from engine.evaluation import read_qrels, read_queries

    folder = DATA / name
    docs = [json.loads(line) for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    qrels = read_qrels(folder / "qrels.tsv")
    queries = {q: t for q, t in read_queries(folder / "queries.jsonl").items() if q in qrels}
    return [str(d["_id"]) for d in docs], [f"{d.get('title', '')}\n\n{d['text']}".strip() for d in docs], queries, qrels


def quality(collections: list[str]) -> dict:
    embedders = _embedders(0)
    out = {}
    for name in collections:
        folder = DATA / name
        if not (folder / "corpus.jsonl").exists():
            print(f"skipping {name}: {folder} is absent", file=sys.stderr)
            continue
        ids, texts, queries, qrels = whole_documents(name)
        row = {"documents": len(ids), "queries": len(queries)}
        for variant in ("onnx fp32", "onnx int8"):
            start = time.perf_counter()
            vectors = embedders[variant].encode(texts)
            seconds = time.perf_counter() - start
            qv = embedders[variant].encode(list(queries.values()))
            row[variant] = {"ndcg@10": round(_ndcg(vectors, ids, qv, list(queries), qrels), 4),
                            "docs_per_s": round(len(ids) / seconds, 1)}
            print(f"quality {name} {variant}: {row[variant]}", file=sys.stderr, flush=True)
        row["int8_cost"] = round(row["onnx fp32"]["ndcg@10"] - row["onnx int8"]["ndcg@10"], 4)
        out[name] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", nargs="+", default=["query", "throughput", "cold", "quality"],
                        choices=["query", "throughput", "cold", "quality"])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--passages", type=int, default=384)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cold-rounds", type=int, default=5)
    parser.add_argument("--cold-baseline", type=Path, default=None, metavar="CHECKOUT",
                        help="cold: also run list, info, --help and the query from this checkout (e.g. the "
                             "commit before a change, `git worktree add` or `git archive` of it), interleaved")
    parser.add_argument("--cold-no-pyc", action="store_true",
                        help="cold: kx's modules without bytecode, compiled on every run (a source checkout with "
                             "PYTHONDONTWRITEBYTECODE=1)")
    parser.add_argument("--cold-without-torch", action="store_true",
                        help="cold: skip the torch-runtime query (the slowest run of a round)")
    parser.add_argument("--collections", nargs="+", default=["scifact", "cranfield", "cisi"])
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    result: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
                    "load_average_at_start": [round(x, 1) for x in load]}
    if "query" in args.parts:
        result["query"] = query_latency(_embedders(0), _queries(args.queries))
        print(json.dumps(result["query"], indent=1), flush=True)
    if "throughput" in args.parts:
        result["throughput"] = throughput(scifact_passages(args.passages), args.rounds)
        print(json.dumps(result["throughput"], indent=1), flush=True)
    if "cold" in args.parts:
        result["cold"] = cold(args.cold_rounds, args.cold_baseline, torch=not args.cold_without_torch,
                              pyc=not args.cold_no_pyc)
        print(json.dumps(result["cold"], indent=1), flush=True)
    if "quality" in args.parts:
        result["quality"] = quality(args.collections)
        print(json.dumps(result["quality"], indent=1), flush=True)
    result["load_average_at_end"] = [round(x, 1) for x in os.getloadavg()]
    target = OUT / f"embedding-{'-'.join(args.parts)}{'-no-pyc' if args.cold_no_pyc else ''}.json"
    target.write_text(json.dumps(result, indent=2))
    print(f"written {target}")


if __name__ == "__main__":
    main()
