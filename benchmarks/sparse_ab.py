"""Sparse answers of two trees on the same SciFact index: how far a BM25 change moves the ranking.

    KX_BENCH_DIR=/tmp/sparse-ab python benchmarks/sparse_ab.py --baseline /work/main

Builds one home with SciFact's corpus (the hash embedder: sparse search needs no model, and the dense
side is not compared), then runs every judged query in sparse mode (k 10, no MMR) with this tree and
with the tree at BASELINE (a checkout's folder), both over the same index files, and prints how many
queries keep their top-10 order, their top-10 set and their first hit, the scores' relative change
and each tree's document nDCG@10. `benchmarks/search_parity.py` proves a change identical; this
measures one meant to change scores (issue 38: BM25 statistics from the live passages).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from paths import BENCH_DIR, DATA, REPO


def dump(home: Path, out: Path) -> None:
    """This interpreter's tree (PYTHONPATH) over `home`: each judged query's top 10 and the nDCG@10."""
    import ir_measures
    from ir_measures import Qrel, ScoredDoc

    from engine import Engine, load_settings
    from engine.evaluation import document_run, read_qrels, read_queries
    from engine.text.inputs import from_jsonl

    sys.path.append(str(REPO))  # the hash embedder, from this checkout's tests (after the tree's engine)
    from tests.helpers import HashEmbedder

    engine = Engine(load_settings({"home": str(home)}, env={}), embedder=HashEmbedder())
    if not (home / "datasets" / "scifact").exists():
        started = time.time()
        engine.ingest("scifact", from_jsonl(DATA / "scifact" / "corpus.jsonl", 10**8))
        print(f"built in {time.time() - started:.0f} s", file=sys.stderr)
    queries, qrels = read_queries(DATA / "scifact" / "queries.jsonl"), read_qrels(DATA / "scifact" / "qrels.tsv")
    judged = {q: t for q, t in queries.items() if q in qrels}
    answers, run = {}, []
    for qid, text in judged.items():
        hits = engine.query("scifact", text, mode="sparse", rerank=False, k=10).hits
        answers[qid] = [(h.passage_ref, float.hex(h.score)) for h in hits]
        run += [ScoredDoc(qid, doc, score) for doc, score in document_run(hits).items()]
    rows = [Qrel(q, d, r) for q, docs in qrels.items() if q in judged for d, r in docs.items()]
    measure = ir_measures.parse_measure("nDCG@10")
    ndcg = sum(m.value for m in ir_measures.iter_calc([measure], rows, run)) / len(judged)
    out.write_text(json.dumps({"ndcg": ndcg, "answers": answers}))


def compare(theirs: dict, ours: dict) -> None:
    a, b = theirs["answers"], ours["answers"]
    order = sum(1 for q in a if [r for r, _ in a[q]] == [r for r, _ in b[q]])
    kept = sum(1 for q in a if {r for r, _ in a[q]} == {r for r, _ in b[q]})
    first = sum(1 for q in a if a[q][:1] and b[q][:1] and a[q][0][0] == b[q][0][0])
    changes = []
    for q in a:
        mine = {r: float.fromhex(s) for r, s in b[q]}
        changes += [abs(float.fromhex(s) - mine[r]) / float.fromhex(s) for r, s in a[q] if r in mine]
    print(f"{len(a)} queries: same top-10 order {order}, same top-10 set {kept}, same first hit {first}; "
          f"scores' relative change median {statistics.median(changes):.4f}, max {max(changes):.4f}; "
          f"nDCG@10 {theirs['ndcg']:.4f} (baseline) -> {ours['ndcg']:.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, help="the other tree's folder (a checkout or git worktree)")
    parser.add_argument("--dump", type=Path, help=argparse.SUPPRESS)   # one tree's run, in its own process
    args = parser.parse_args()
    home = BENCH_DIR / "sparse-ab-home"
    if args.dump:
        dump(home, args.dump)
        return
    if not args.baseline:
        parser.error("give --baseline FOLDER")
    with tempfile.TemporaryDirectory(prefix="kx-sparse-ab-") as tmp:
        outs = []
        for tree in (args.baseline, REPO):
            out = Path(tmp) / f"{len(outs)}.json"
            subprocess.run([sys.executable, __file__, "--dump", str(out)], check=True,
                           env={**os.environ, "PYTHONPATH": str(tree), "KX_BENCH_DIR": str(BENCH_DIR)})
            outs.append(json.loads(out.read_text()))
    compare(*outs)


if __name__ == "__main__":
    main()
