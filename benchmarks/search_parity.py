"""Bit-for-bit parity of the query path against another commit, on SciFact's 300 queries in every mode.

    python benchmarks/search_parity.py --baseline COMMIT      # e.g. main before a search-path change
    python benchmarks/search_parity.py --baseline COMMIT --collection cranfield   # one whose vectors are cached
    python benchmarks/search_parity.py --dump FILE            # this tree's answers, as JSON

A change meant to make queries faster must not change a single answer. This
runs every SciFact test query through `Engine.query` in each mode (hybrid,
dense and sparse, MMR on and off, k 10 and 50, expanded, every version), twice more with `--where`
filters (one small enough for the exact pass, one that widens the graph
search), once with this tree and once with COMMIT's (extracted with `git
archive` into a temporary folder, these benchmark files copied over it),
both over the same dataset files, and compares every field of every hit:
order, refs, ranks, and every score as its exact float (float.hex).

The query vectors come from the benchmark vector cache (the same floats for
both trees) and are passed with the text, so the model's run-to-run noise
cannot hide or fake a difference. Exit status 1 on the first difference.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from common import BENCH_DIR, DATA, REPO, ensure_dataset

# (label, query keyword arguments)
RUNS: tuple[tuple[str, dict], ...] = (
    ("hybrid", {"mode": "hybrid", "rerank": True}),
    ("hybrid no-mmr", {"mode": "hybrid", "rerank": False}),
    ("hybrid k50", {"mode": "hybrid", "rerank": True, "k": 50}),
    ("dense", {"mode": "dense", "rerank": True}),
    ("dense no-mmr", {"mode": "dense", "rerank": False}),
    ("sparse", {"mode": "sparse", "rerank": True}),
    ("sparse no-mmr", {"mode": "sparse", "rerank": False}),
    # SciFact's documents are named by number: "1*" allows ~1,300 passages (the exact pass), "[1-4]*" ~45 %
    # (the graph searched wider until the pool is full of allowed passages)
    ("hybrid where name:1*", {"mode": "hybrid", "rerank": True, "where": ["name:1*"]}),
    ("hybrid where name:[1-4]*", {"mode": "hybrid", "rerank": True, "where": ["name:[1-4]*"]}),
    # the second pass (query expansion) in each mode, and every version searched
    ("hybrid expand", {"mode": "hybrid", "rerank": True, "expand": True}),
    ("dense expand", {"mode": "dense", "rerank": False, "expand": True}),
    ("sparse expand", {"mode": "sparse", "rerank": True, "expand": True}),
    ("hybrid versions all", {"mode": "hybrid", "rerank": True, "versions": "all"}),
)
_FILES = ("search_parity.py", "common.py", "vector_cache.py")


def _exact(value):
    """A JSON-safe value in which two floats compare equal only when they are the same float."""
    if isinstance(value, float):
        return float.hex(value)
    if isinstance(value, (list, tuple)):
        return [_exact(v) for v in value]
    if isinstance(value, dict):
        return {k: _exact(v) for k, v in value.items()}
    return value


def dump(path: Path, limit: int | None, collection: str = "scifact") -> None:
    from engine.evaluation import read_queries

    engine = ensure_dataset(collection)
    queries = list(read_queries(DATA / collection / "queries.jsonl").values())[:limit]
    vectors = engine.embedder().encode(queries)  # from the cache: the same floats in both trees
    out: dict[str, list] = {}
    for label, kwargs in RUNS:
        answers = []
        for text, vector in zip(queries, vectors):
            result = engine.query(collection, text, vector=vector, **kwargs)
            answers.append({"hits": [_exact(asdict(h)) for h in result.hits], "notes": result.notes,
                            "coverage": _exact(result.dense_coverage)})
        out[label] = answers
    path.write_text(json.dumps(out))


def _baseline_tree(commit: str, folder: Path) -> Path:
    tree = folder / "tree"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", commit], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    for name in _FILES:  # this script and its helpers, so both trees answer the same questions
        shutil.copy(REPO / "benchmarks" / name, tree / "benchmarks" / name)
    (folder / DATA.parent.name).symlink_to(DATA.parent)  # the collections, where common.py looks for them
    return tree


def _run_dump(tree: Path, out: Path, limit: int | None, collection: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree), "KX_BENCH_DIR": str(BENCH_DIR)}  # one dataset for both
    args = [sys.executable, str(tree / "benchmarks" / "search_parity.py"), "--dump", str(out),
            "--collection", collection]
    if limit:
        args += ["--limit", str(limit)]
    subprocess.run(args, cwd=tree, env=env, check=True)


def compare(ours: dict, theirs: dict) -> list[str]:
    problems = []
    for label, _kwargs in RUNS:
        for i, (a, b) in enumerate(zip(ours[label], theirs[label])):
            if a != b:
                hits_a, hits_b = a["hits"], b["hits"]
                where = next((j for j, (x, y) in enumerate(zip(hits_a, hits_b)) if x != y), min(len(hits_a),
                                                                                                len(hits_b)))
                detail = ""
                if where < min(len(hits_a), len(hits_b)):
                    fields = [f for f in hits_a[where] if hits_a[where][f] != hits_b[where].get(f)]
                    detail = f", fields {fields}: {[hits_a[where][f] for f in fields]} vs " \
                             f"{[hits_b[where][f] for f in fields]}"
                problems.append(f"{label}, query {i}: first difference at hit {where + 1}{detail}")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", help="the commit to compare this tree's answers with")
    parser.add_argument("--dump", type=Path, help="write this tree's answers to FILE and stop")
    parser.add_argument("--limit", type=int, help="only the first N queries (a quick look)")
    # SciFact by default; another BEIR collection under data/ (cranfield, cisi) when its vectors are cached and
    # SciFact's are not (embedding SciFact's corpus takes an hour on a loaded 2-core machine)
    parser.add_argument("--collection", default="scifact", help="the collection to query (default scifact)")
    args = parser.parse_args()
    if args.dump:
        dump(args.dump, args.limit, args.collection)
        return
    if not args.baseline:
        parser.error("give --baseline COMMIT (or --dump FILE)")
    ensure_dataset(args.collection)  # built once, by this tree: both trees then read the same index files
    with tempfile.TemporaryDirectory(prefix="kx-parity-") as tmp:
        folder = Path(tmp)
        tree = _baseline_tree(args.baseline, folder)
        _run_dump(tree, folder / "theirs.json", args.limit, args.collection)
        _run_dump(REPO, folder / "ours.json", args.limit, args.collection)
        ours = json.loads((folder / "ours.json").read_text())
        theirs = json.loads((folder / "theirs.json").read_text())
    problems = compare(ours, theirs)
    total = sum(len(ours[label]) for label, _ in RUNS)
    hits = sum(len(a["hits"]) for label, _ in RUNS for a in ours[label])
    if problems:
        print(f"{len(problems)} of {total} answers differ from {args.baseline}:")
        for line in problems[:20]:
            print("  " + line)
        raise SystemExit(1)
    print(f"identical: {total} answers ({len(RUNS)} runs x {total // len(RUNS)} queries, {hits:,} hits), "
          f"every field and float, on {args.collection}, against {args.baseline}")


if __name__ == "__main__":
    main()
