"""What a query's first sight of its words costs on the sparse side, in two source trees side by side.

    python benchmarks/sparse_cold.py --trees /tmp/kx-base . --folder HOME/datasets/scifact [--rounds 2]
    python benchmarks/sparse_cold.py --trees /tmp/kx-base . --synthetic HOME [--rounds 4]

`--trees A B`: source trees (e.g. `git archive REV | tar -x -C /tmp/kx-base`); every measurement runs in a
fresh process per tree, the trees taking turns, both over the same index files (nothing is written).

`--folder` (a SciFact dataset's folder): SciFact test queries 100-199 on a freshly opened BM25 scorer, so
every word is met for the first time, split into the terms' postings (document frequency and postings
read from the index's segments), the scoring, and turning the top document numbers into passage seqs; ms a
query, the median over rounds.

`--synthetic` (a home holding benchmarks/scaling.py's `synthetic` dataset, built with precomputed vectors):
60 queries of three Zipf-drawn vocabulary words and a random unit vector, alternating sparse and hybrid
(MMR on) from the first query on: thread CPU p50 of each mode, the median over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

QUERIES = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact" / "queries.jsonl"

SPLIT = r'''
import json, sys, time
import numpy as np
from pathlib import Path
from engine.embedded.sparse import SparseIndex

folder, queries = Path(sys.argv[1]), sys.argv[2]
texts = [json.loads(line)["text"] for line in open(queries)][100:200]
index = SparseIndex(folder, stopwords=True)
scorer = index.open_scorer(1.2, 0.75)
postings = scoring = seqs = 0.0
for text in texts:
    terms = index.terms(text)
    a = time.perf_counter()
    known = [t for t in terms if scorer.document_frequency(t) > 0]
    b = time.perf_counter()
    real = getattr(scorer, "_seqs_of", None)  # trees before round 4's segments turned docnums into seqs lazily
    met = []
    if real is not None:
        scorer._seqs_of = lambda docs: (met.append(docs), np.zeros(len(docs), dtype=np.int64))[1]
    scorer.top_arrays(known, 100)
    c = time.perf_counter()
    if real is not None:
        scorer._seqs_of = real
        if met:
            real(met[0])
    d = time.perf_counter()
    postings += b - a; scoring += c - b; seqs += d - c
n = len(texts)
print(json.dumps({"postings": 1000 * postings / n, "scoring": 1000 * scoring / n, "seqs": 1000 * seqs / n,
                  "sparse": 1000 * (postings + scoring + seqs) / n}))
'''

SYNTHETIC = r'''
import json, sys, time
import numpy as np
from engine import Engine, load_settings

engine = Engine(load_settings({"home": sys.argv[1], "embed_model": "none"}, env={}))
rng = np.random.default_rng(int(sys.argv[2]))
engine.query("synthetic", "w1 w2 w3", mode="sparse", rerank=False)   # open the readers
cpu = {"sparse": [], "hybrid": []}
for i in range(60):
    words = " ".join(f"w{int(r)}" for r in np.minimum(rng.zipf(1.2, size=3), 20000) - 1)
    vector = rng.standard_normal(384).astype(np.float32)
    vector /= np.linalg.norm(vector)
    mode = "sparse" if i % 2 == 0 else "hybrid"
    start = time.thread_time()
    engine.query("synthetic", words, vector=vector, mode=mode)
    cpu[mode].append((time.thread_time() - start) * 1000)
print(json.dumps({mode: float(np.median(v)) for mode, v in cpu.items()}))
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", nargs=2, required=True, metavar=("BEFORE", "AFTER"))
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--folder", help="a SciFact dataset's folder (HOME/datasets/scifact)")
    where.add_argument("--synthetic", help="a home holding scaling.py's synthetic dataset")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trees = [str(Path(t).resolve()) for t in args.trees]
    results: dict[str, list[dict]] = {t: [] for t in trees}
    for r in range(args.rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            env = dict(os.environ, PYTHONPATH=tree, OPENBLAS_NUM_THREADS="1")
            child = [SPLIT, args.folder, str(QUERIES)] if args.folder else [SYNTHETIC, args.synthetic, str(100 + r)]
            done = subprocess.run([sys.executable, "-c", *child], env=env, capture_output=True, text=True,
                                  cwd="/tmp", check=False)
            if done.returncode:
                sys.exit(f"{tree}: {done.stderr[-2000:]}")
            results[tree].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"load average {os.getloadavg()[0]:.2f}; median over {args.rounds} rounds (ms a query)")
    before, after = trees
    for part in results[before][0]:
        b = statistics.median(x[part] for x in results[before])
        a = statistics.median(x[part] for x in results[after])
        print(f"{part:10s} before {b:8.3f}  after {a:8.3f}  after/before {a / b if b else float('nan'):.3f}")


if __name__ == "__main__":
    main()
