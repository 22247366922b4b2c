"""Filtered queries against unfiltered ones on a built dataset, this tree against another commit's, in turns.

    python benchmarks/filtered_queries.py --home HOME --dataset corpus [--against COMMIT] [--queries 40]
        [--rounds 2] [--modes hybrid,dense,sparse] [--where name:*0 --where name:*00 ...]

For each tree (this one, and with --against COMMIT's, extracted with `git
archive` into a temporary folder), a fresh process opens the dataset and
asks the same queries: the text and a pre-computed unit vector (random,
seeded: no model), k 10, MMR on for hybrid, unfiltered and with each
`--where` clause in turns, so all of them see the same machine load; with
--reopen-rounds, also the first query with each filter after another
writer's small commit (the reader reopened), less a warm one. The trees
take turns too (--rounds processes each). It reports, per tree, mode and
filter: the first filtered query's time (the filter resolved and what is
kept for it read), p50 / p95 of the rest and the ratio to the unfiltered
p50; each process's peak RSS (before any commit); the dense pool's recall
of exact search over each filter's passages (20 queries); and whether both trees
gave the same answers (every hit's ref, rank and every score), with the
first difference of each query that did not.

Default filters fit benchmarks/scaling.py's corpus (documents s<seed>/fNN/doc-NNNNNNN): `name:*0` ~10 % of
the documents, `name:*00` ~1 %, `name:*/f07/*` one folder of 40 (~2.5 %).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_WHERE = ["name:*0", "name:*00", "name:*/f07/*"]


def _percentile(values: list[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(values, q)) if values else float("nan")


def run_tree(home: str, dataset: str, modes: list[str], wheres: list[str], texts: list[str],
             reopen_rounds: int) -> dict:
    """This process's tree: timings and answers for every (mode, filter), the filters in turns; with
    `reopen_rounds`, only the first query with each filter after small commits (`after_commits`)."""
    import numpy as np

    from engine import load_settings
    from engine.open_backend import open_backend

    backend = open_backend(load_settings({"home": home, "embed_model": "none"}, env={}), embedder=None)
    dimension = backend.searcher(dataset).fingerprint.dimension
    queries = len(texts) - 3
    vectors = np.random.default_rng(17).standard_normal((len(texts), dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    kinds = [(mode, where) for mode in modes for where in [None, *wheres]]

    def ask(i: int, mode: str, where: str | None) -> tuple[float, list]:
        t = time.perf_counter()
        result = backend.query(dataset, texts[i], vector=None if mode == "sparse" else vectors[i], k=10, mode=mode,
                               rerank=mode == "hybrid", where=[where] if where else None)
        took = (time.perf_counter() - t) * 1000
        return took, [[h.passage_ref, h.rank, h.score, h.dense_score, h.sparse_score, h.fused_score]
                      for h in result.hits]

    if reopen_rounds:
        reopen = {str(where): after_commits(home, dataset, lambda i: ask(3 + i % queries, "hybrid", where)[0],
                                            reopen_rounds) for where in [None, *wheres]}
        backend.close()
        return {"reopen_ms": reopen}
    first = {f"{mode} {where}": round(ask(0, mode, where)[0], 1) for mode, where in kinds}
    for i in (1, 2):   # warm-up
        for mode, where in kinds:
            ask(i, mode, where)
    times: dict[str, list[float]] = {f"{m} {w}": [] for m, w in kinds}
    answers: dict[str, list] = {f"{m} {w}": [] for m, w in kinds}
    for i in range(3, queries + 3):
        for mode, where in kinds:
            took, hits = ask(i, mode, where)
            times[f"{mode} {where}"].append(took)
            answers[f"{mode} {where}"].append(hits)
    peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    recall = dense_recall(backend.searcher(dataset), wheres, vectors[3:3 + min(queries, 20)])
    backend.close()
    return {"first_ms": first, "times": times, "answers": answers, "peak_rss_mb": round(peak / 1024),
            "recall": recall}


def dense_recall(searcher, wheres: list[str], vectors) -> dict:
    """Each filter's dense pool (100) against exact search over its allowed passages' stored vectors (float64
    numpy, read from the catalogue here): the mean and least share of the exact 100 it holds."""
    import numpy as np

    from engine.filters import parse_where

    out = {}
    with searcher.lock:
        for where in wheres:
            only = searcher.passage_filter(parse_where([where]), "latest")
            seqs = only.allowed
            stored = searcher.catalogue.vectors_by_seq(seqs.tolist(), vectors.shape[1]).astype(np.float64)
            shares = []
            for vector in vectors:
                exact = set(seqs[np.argsort(-(stored @ vector.astype(np.float64)))[:100]].tolist())
                shares.append(len(exact & set(searcher.dense_candidates(vector, 100, only).keys)) / len(exact))
            out[where] = {"mean": round(float(np.mean(shares)), 4), "least": round(float(min(shares)), 4)}
    return out


def after_commits(home: str, dataset: str, ask, rounds: int) -> list[float]:
    """The first query after another writer commits 10 documents (~100 passages: the graph's tail), less the
    median of 5 warm ones, in ms, `rounds` times. Writes to the dataset: run it on a copy."""
    import numpy as np
    from scaling import corpus_of

    from engine import load_settings
    from engine.open_backend import open_backend

    corpus = corpus_of("corpus")
    writer = open_backend(load_settings({"home": home, "embed_model": "none"}, env={}), embedder=corpus.embedder())
    run = time.time_ns() % 2**31   # new documents every time
    out = []
    for round_ in range(rounds):
        warm = float(np.median([ask(i) for i in range(5)]))
        docs, vectors = corpus.documents(10, run + round_)
        writer.ingest(dataset, docs, vectors=vectors)
        out.append(round(ask(5) - warm, 1))
    writer.close()
    return out


def _tree_of(commit: str, folder: Path) -> Path:
    tree = folder / "tree"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", commit], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    shutil.copy(HERE / "filtered_queries.py", tree / "benchmarks" / "filtered_queries.py")
    (folder / "shared").symlink_to(REPO.parent / "shared")   # the collections, where scaling_corpus.py looks
    return tree


def _child(tree: Path, args: argparse.Namespace, questions: Path, out: Path, reopen_rounds: int = 0) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "benchmarks")])}
    command = [sys.executable, str(tree / "benchmarks" / "filtered_queries.py"), "--home", args.home,
               "--dataset", args.dataset, "--questions", str(questions), "--modes", args.modes,
               "--child", str(out), "--reopen-rounds", str(reopen_rounds)] + [f"--where={w}" for w in args.where]
    subprocess.run(command, cwd=tree, env=env, check=True)
    return json.loads(out.read_text())


def _summary(runs: list[dict], reopens: list[dict], modes: list[str], wheres: list[str]) -> dict:
    out: dict = {"peak_rss_mb": [r["peak_rss_mb"] for r in runs]}
    for where in [None, *wheres] if reopens else []:
        samples = [t for r in reopens for t in r["reopen_ms"][str(where)]]
        out[f"after a commit: hybrid {where}"] = {"samples_ms": samples,
                                                  "median_ms": round(_percentile(samples, 50), 1)}
    for mode in modes:
        base = _percentile([t for r in runs for t in r["times"][f"{mode} None"]], 50)
        for where in [None, *wheres]:
            key = f"{mode} {where}"
            samples = [t for r in runs for t in r["times"][key]]
            p50 = _percentile(samples, 50)
            out[key] = {"first_ms": [r["first_ms"][key] for r in runs], "p50_ms": round(p50, 1),
                        "p95_ms": round(_percentile(samples, 95), 1), "ratio_p50": round(p50 / base, 2)}
    out["dense recall of the exact top 100"] = runs[0]["recall"]
    return out


def _differences(ours: dict, theirs: dict) -> dict:
    found: dict = {}
    for key, answers in ours["answers"].items():
        lines = []
        for i, (a, b) in enumerate(zip(answers, theirs["answers"][key])):
            if a != b:
                at = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                lines.append(f"query {i}: hit {at + 1}: {a[at] if at < len(a) else None} vs "
                             f"{b[at] if at < len(b) else None}")
        found[key] = {"identical": len(answers) - len(lines), "of": len(answers), "first": lines[:3]}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--against", help="a commit whose tree answers the same queries in turns with this one")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2, help="processes per tree, the trees in turns")
    parser.add_argument("--modes", default="hybrid")
    parser.add_argument("--where", action="append", help=f"a filter clause (default {' '.join(DEFAULT_WHERE)})")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--questions", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help="also write the report as JSON here")
    parser.add_argument("--reopen-rounds", type=int, default=0,
                        help="also time the first hybrid query with each filter after another writer commits 10 "
                             "documents, N times per process (WRITES to the dataset: give a copy; needs the "
                             "scaling corpus's stand-in model, benchmarks/scaling.py)")
    args = parser.parse_args()
    args.where = args.where or DEFAULT_WHERE
    modes = args.modes.split(",")
    if args.child:
        texts = json.loads(args.questions.read_text())
        args.child.write_text(json.dumps(run_tree(args.home, args.dataset, modes, args.where, texts,
                                                  args.reopen_rounds)))
        return
    from scaling_corpus import query_texts

    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kx-filtered-") as tmp:
        folder = Path(tmp)
        questions = folder / "questions.json"   # real-looking text: 2-6 words of the shared collections' sentences
        questions.write_text(json.dumps(query_texts(args.queries + 3, 17)))
        trees = {"this tree": REPO}
        if args.against:
            trees[args.against] = _tree_of(args.against, folder)
        runs: dict[str, list[dict]] = {label: [] for label in trees}
        reopens: dict[str, list[dict]] = {label: [] for label in trees}
        for round_ in range(args.rounds):
            for n, (label, tree) in enumerate(trees.items()):
                runs[label].append(_child(tree, args, questions, folder / f"answers-{round_}-{n}.json"))
        for round_ in range(args.rounds if args.reopen_rounds else 0):   # after every answer was compared
            for n, (label, tree) in enumerate(trees.items()):
                reopens[label].append(_child(tree, args, questions, folder / f"reopen-{round_}-{n}.json",
                                             args.reopen_rounds))
    report: dict = {"home": args.home, "dataset": args.dataset, "queries": args.queries, "rounds": args.rounds,
                    "load_average": [round(x, 2) for x in (*load, *os.getloadavg())],
                    "trees": {label: _summary(r, reopens[label], modes, args.where) for label, r in runs.items()}}
    if args.against:
        report["answers_vs_" + args.against] = _differences(runs["this tree"][0], runs[args.against][0])
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
