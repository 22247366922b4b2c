"""Hubness of the dense side, and corrections that act on the query or the scores (issue 37, item 2).

    python benchmarks/hubness.py [--sets own dev cranfield cisi scifact] [--json OUT]

A hub is a passage that sits in the nearest neighbours of many queries whatever they ask (with
all-MiniLM-L6-v2: long narrative passages, close to the corpus mean). For each dataset of the
benchmark home (built by qa.py / quality.py, vectors from the cache) this reads every passage's
stored unit vector and measures, by exact cosine:

- k-occurrence N10: how often each passage is among the 10 nearest of the other passages (every passage
  a query); its skewness (0 for no hubs, larger for more) and the share of all top-10 slots the 1 % most
  frequent passages take;
- over the set's real questions: the share of dense top-10 slots taken by passages that turn up for at
  least 10 % of the questions;
- retrieval, dense alone: QA success@1 / success@5 / MRR@10, or nDCG@10 on a BEIR collection.

under each scoring (q: the query's unit vector, p: a passage's):

- plain:    q . p
- centred a:  (q - a m) . p, m the dataset's mean passage vector (query-side centring: a passage close to the
              mean, which every query is somewhat near, loses that part); a 1 unless given;
- csls a:     q . p - a r(p), r(p) the passage's mean cosine to its own 10 nearest passages (CSLS-style local
              scaling; r would be stored at embed time); a 0.5 (CSLS's own) unless given;
- docnorm a:  q . p - a q . c(d), c(d) the mean vector of the passage's document (per-document score
              normalisation: a passage counts by how far it stands above its own document); a 0.5 unless given;
- longdoc a:  q . p - a (sqrt(2 ln max(n, 8)) - sqrt(2 ln 8)), n the passages of p's document: engine/ranking.py's
              long-document correction (shipped at LONG_DOCUMENT_PENALTY 0.05); a 0.05 unless given.

`--sets pile` is qa.py's pile (both question sets over both sets' files).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

import numpy as np
from common import BENCH_DIR, DATA, ensure_dataset

from engine.ranking import LONG_DOCUMENT_PASSAGES, LONG_DOCUMENT_PENALTY

K = 10
VARIANTS = ("plain", "centred", "centred 0.5", "csls", "csls 0.25", "docnorm", "docnorm 0.25", "longdoc",
            "longdoc 0.1")


def load_passages(engine, name: str) -> tuple[list[str], list[str], np.ndarray]:
    """(document names, passage texts, unit vectors) of every embedded passage, in seq order."""
    path = Path(engine.dataset_summary(name).path) / "catalog.sqlite"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute("SELECT d.name, p.text, p.vector FROM passages p JOIN documents d ON d.ref = p.doc_ref "
                      "WHERE length(p.vector) > 0 ORDER BY p.seq").fetchall()
    db.close()
    vectors = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    return [r[0] for r in rows], [r[1] for r in rows], vectors


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Row-wise indices of the k best, best first (ties on the lower index)."""
    part = np.argpartition(-scores, k, axis=1)[:, :k] if scores.shape[1] > k else \
        np.tile(np.arange(scores.shape[1]), (scores.shape[0], 1))
    picked = np.take_along_axis(scores, part, axis=1)
    order = np.lexsort((part, -picked), axis=1)
    return np.take_along_axis(part, order, axis=1)


class Scorings:
    """Each variant's score of queries against every passage."""

    def __init__(self, docs: list[str], vectors: np.ndarray) -> None:
        self.vectors = vectors
        self.mean = vectors.mean(axis=0)
        self.centre_penalty = vectors @ self.mean
        self.local = self._local_scale(vectors)
        names = sorted(set(docs))
        self.doc_of = np.array([names.index(d) for d in docs]) if len(names) < 5000 else \
            np.unique(np.array(docs), return_inverse=True)[1]
        centroids = np.zeros((len(names), vectors.shape[1]), dtype=np.float32)
        np.add.at(centroids, self.doc_of, vectors)
        centroids /= np.bincount(self.doc_of, minlength=len(names))[:, None]
        self.centroids = centroids
        sizes = np.maximum(np.bincount(self.doc_of, minlength=len(names)), LONG_DOCUMENT_PASSAGES)[self.doc_of]
        self.draws = np.sqrt(2 * np.log(sizes)) - np.sqrt(2 * np.log(LONG_DOCUMENT_PASSAGES))

    @staticmethod
    def _local_scale(vectors: np.ndarray, block: int = 1024) -> np.ndarray:
        """Each passage's mean cosine to its K nearest other passages."""
        out = np.zeros(len(vectors), dtype=np.float32)
        for start in range(0, len(vectors), block):
            sims = vectors[start:start + block] @ vectors.T
            idx = np.arange(start, min(start + block, len(vectors)))
            sims[idx - start, idx] = -np.inf
            out[idx] = np.sort(np.partition(sims, -K, axis=1)[:, -K:], axis=1).mean(axis=1)
        return out

    def scores(self, variant: str, queries: np.ndarray) -> np.ndarray:
        """`variant`: a scoring's name, then optionally its strength (default: centred 1, csls and docnorm 0.5)."""
        plain = queries @ self.vectors.T
        kind, _, strength = variant.partition(" ")
        if kind == "plain":
            return plain
        if kind == "centred":
            return plain - float(strength or 1) * self.centre_penalty[None, :]
        if kind == "csls":
            return plain - float(strength or 0.5) * self.local[None, :]
        if kind == "docnorm":
            return plain - float(strength or 0.5) * (queries @ self.centroids.T)[:, self.doc_of]
        if kind == "longdoc":
            return plain - float(strength or LONG_DOCUMENT_PENALTY) * self.draws[None, :]
        raise ValueError(variant)


def k_occurrence(scorings: Scorings, variant: str, block: int = 1024) -> dict:
    """N10 over the passages as queries (self left out): skewness and the top 1 %'s share of the slots."""
    vectors = scorings.vectors
    counts = np.zeros(len(vectors), dtype=np.int64)
    for start in range(0, len(vectors), block):
        sims = scorings.scores(variant, vectors[start:start + block])
        idx = np.arange(start, min(start + block, len(vectors)))
        sims[idx - start, idx] = -np.inf
        np.add.at(counts, _top(sims, K).reshape(-1), 1)
    mean, std = counts.mean(), counts.std()
    top = np.sort(counts)[::-1][:max(1, len(counts) // 100)]
    return {"N10 skewness": float(((counts - mean) ** 3).mean() / std ** 3) if std else 0.0,
            "top 1% share of slots": float(top.sum() / counts.sum()), "N10 max": int(counts.max()),
            "never in a top-10": float((counts == 0).mean())}


def query_hubs(scorings: Scorings, variant: str, queries: np.ndarray, docs: list[str]) -> dict:
    top = _top(scorings.scores(variant, queries), K)
    counts = np.bincount(top.reshape(-1), minlength=len(docs))
    hubs = counts >= max(2, int(np.ceil(0.1 * len(queries))))
    worst = np.argsort(-counts, kind="stable")[:3]
    return {"hub share of top-10 slots": float(counts[hubs].sum() / top.size),
            "most frequent": [(docs[i], int(counts[i])) for i in worst]}


def qa_scores(scorings: Scorings, variant: str, queries: np.ndarray, questions: list[dict], docs: list[str],
              texts: list[str], doc_of) -> dict:
    from qa import norm

    top = _top(scorings.scores(variant, queries), K)
    ranks = []
    for q, row in zip(questions, top):
        answer = norm(q["answer"])
        ranks.append(next((i + 1 for i, p in enumerate(row.tolist())
                           if doc_of(docs[p]) == q["doc"] and answer in norm(texts[p])), None))
    n = len(ranks)
    return {"success@1": sum(r == 1 for r in ranks) / n, "success@5": sum(r is not None and r <= 5 for r in ranks) / n,
            "MRR@10": sum(1 / r for r in ranks if r) / n}


def beir_scores(scorings: Scorings, variant: str, queries: dict[str, np.ndarray], qrels, docs: list[str]) -> dict:
    import ir_measures
    from ir_measures import Qrel, ScoredDoc

    ids = list(queries)
    top = _top(scorings.scores(variant, np.stack([queries[i] for i in ids])), 300)
    run = []
    for qid, row in zip(ids, top):
        seen: dict[str, float] = {}
        for p in row.tolist():
            seen.setdefault(docs[p], float(300 - len(seen)))
        run += [ScoredDoc(qid, d, s) for d, s in seen.items()]
    rows = [Qrel(q, d, r) for q, ds in qrels.items() if q in queries for d, r in ds.items()]
    total = sum(m.value for m in ir_measures.iter_calc([ir_measures.nDCG @ 10], rows, run))
    return {"nDCG@10": total / len(ids)}


def measure(label: str) -> dict:
    from qa import DEV_NAME, NAME, PILE_NAME, ensure_qa_dataset, question_sets

    from engine.evaluation import read_qrels, read_queries

    if label in ("own", "dev", "pile"):
        [(_, name, questions, doc_of)] = question_sets([label])
        engine = ensure_qa_dataset(name={"own": NAME, "dev": DEV_NAME, "pile": PILE_NAME}[label])
        query_vectors = engine.embedder().encode([q["question"] for q in questions])
    else:
        name = label
        engine = ensure_dataset(label)
        queries = read_queries(DATA / label / "queries.jsonl")
        qrels = read_qrels(DATA / label / "qrels.tsv")
        judged = {q: t for q, t in queries.items() if q in qrels}
        encoded = engine.embedder().encode(list(judged.values()))
        by_id = dict(zip(judged, encoded))
        query_vectors = np.stack(list(by_id.values()))
    docs, texts, vectors = load_passages(engine, name)
    scorings = Scorings(docs, vectors)
    out: dict = {"passages": len(docs)}
    for variant in VARIANTS:
        row = {**k_occurrence(scorings, variant), **query_hubs(scorings, variant, query_vectors, docs)}
        if label in ("own", "dev", "pile"):
            row.update(qa_scores(scorings, variant, query_vectors, questions, docs, texts, doc_of))
        else:
            row.update(beir_scores(scorings, variant, by_id, qrels, docs))
        out[variant] = row
        shown = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items() if k != "most frequent"}
        print(f"{label:9} {variant:8} {json.dumps(shown)}", flush=True)
        print(f"{'':9} {'':8} most frequent in the questions' top-10: {row['most frequent']}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", default=["own", "dev", "cranfield", "cisi", "scifact"])
    parser.add_argument("--json", default=str(BENCH_DIR / "hubness.json"))
    args = parser.parse_args()
    results = {label: measure(label) for label in args.sets}
    with open(args.json, "w") as fh:
        json.dump(results, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
