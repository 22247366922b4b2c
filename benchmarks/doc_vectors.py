"""Would a whole-document vector for short documents lift kx's dense side? (issue 24, offline experiment)

    KX_BENCH_DIR=/tmp/kxq-cache python benchmarks/doc_vectors.py [--collections cranfield cisi scifact]

Benchmark only: nothing is indexed. Each collection is ingested as quality.py does (default settings,
vectors through the benchmark cache); each document's whole text (title + text, as peers.py's
load_collection reads it) is embedded once (the model truncates at its window). A document is "short"
when its whole text fits the model window: its token count from the model's own tokenizer, special tokens
included, is at most the card's max_seq_length (256). Then `DatasetSearcher.dense_candidates` is wrapped,
so the engine's real query pipeline (RRF, the third "sentence" list, the lead vote, MMR with its floor)
runs on a modified dense list. The variants (own = the passage's cosine, doc = its document's whole-text
cosine, short documents only; long documents keep own):

  V0        unmodified (voyager's list as it comes)
  V1 max    max(own, doc) for every passage of a short document
  V2 doc    doc + 1e-4 * own (the document's cosine; own breaks the tie inside it)
  V3 first  max(own, doc) for a short document's first passage only
  V4 blend  0.5 * own + 0.5 * doc
  V5 doc all   V2 for every document, long ones too (their whole-text vector truncated at the window,
               as the reference's): the reference's dense ranking, passage-level
  V6 max all   V1 for every document, long ones too
  V7 doc all cap1  diagnostic: V5 with one passage per document in the dense list (the one with the best
               own cosine), as fusion_gap.py's document-level lists are

For V1-V7 the pool is voyager's pool (its scores as it gives them) joined with every passage of the
`pool` short (V5-V7: any) documents nearest by whole-text cosine (their own cosine exact from the stored
vectors), re-scored, re-ranked and cut to the pool size, as an index holding one extra vector per short
document would find them. Measured 2026-12-04 (notes/q24-docvec.md): no variant lifts Cranfield's
hybrid+MMR by more than 0.002; not built. nDCG@10 and Recall@100 by engine.evaluation.evaluate at
EVAL_DEPTH (as quality.py): dense, hybrid (MMR off) and hybrid+mmr.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from common import BENCH_DIR, DATA, HOME, ensure_dataset

MODES = ("dense", "hybrid", "hybrid+mmr")
VARIANTS = ("V0", "V1 max", "V2 doc", "V3 first", "V4 blend", "V5 doc all", "V6 max all", "V7 doc all cap1")
TIE = 1e-4


class Context:
    """One collection's passages, their documents' whole-text vectors, and which documents are short."""

    def __init__(self, engine, name: str) -> None:
        from peers import load_collection

        from engine.embedding.onnx_runtime import load_tokenizer

        searcher = engine.searcher(name)
        rows = searcher.passages(list(range(0, searcher.catalogue.max_passage_seq() + 1)))
        self.seqs = np.asarray(sorted(rows), dtype=np.int64)
        self.pos = {int(s): i for i, s in enumerate(self.seqs)}
        documents = searcher.documents(sorted({r.doc_ref for r in rows.values()}))
        collection = load_collection(name, engine.embedder())
        index = {d: i for i, d in enumerate(collection.ids)}
        self.doc_of = np.asarray([index[documents[rows[int(s)].doc_ref].name] for s in self.seqs], dtype=np.int64)
        self.first = np.asarray([rows[int(s)].chunk_index == 0 for s in self.seqs])
        self.chunks = np.asarray([rows[int(s)].chunk_count for s in self.seqs])
        vectors = searcher.vectors(self.seqs.tolist()).astype(np.float64)
        self.passage_vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        doc = collection.doc_vectors.astype(np.float64)
        self.doc_vectors = doc / np.maximum(np.linalg.norm(doc, axis=1, keepdims=True), 1e-12)
        card = engine.model_card()
        tokenizer = load_tokenizer(card)
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self.window = int(card.max_seq_length)
        self.tokens = np.asarray([len(e.ids) for e in tokenizer.encode_batch(collection.texts)])
        self.short_doc = self.tokens <= self.window
        self.short = self.short_doc[self.doc_of]
        self.passages_of: dict[int, np.ndarray] = {}
        for p, d in enumerate(self.doc_of.tolist()):
            self.passages_of.setdefault(d, []).append(p)  # type: ignore[union-attr]
        self.passages_of = {d: np.asarray(ps) for d, ps in self.passages_of.items()}
        self.short_docs = np.flatnonzero(self.short_doc)
        self.split = self.chunks > 1  # the passage's document is cut in two or more

    def counts(self) -> dict:
        return {"documents": int(len(self.short_doc)), "short documents": int(self.short_doc.sum()),
                "passages": int(len(self.seqs)), "passages of short documents": int(self.short.sum()),
                "short documents cut in 2+": int(len({int(d) for d in self.doc_of[self.short & self.split]})),
                "documents cut in 2+": int(len({int(d) for d in self.doc_of[self.split]})),
                "window tokens": self.window,
                "median tokens": float(np.median(self.tokens))}

    def rescored(self, variant: str, vector: np.ndarray, pool: int, found):
        from engine.retrieval import Candidates

        q = np.asarray(vector, dtype=np.float64)
        q = q / (np.linalg.norm(q) or 1.0)
        own = self.passage_vectors @ q
        given = np.asarray([self.pos[int(k)] for k in found.keys], dtype=np.int64)
        own[given] = found.scores  # voyager's own scores where it gave one
        doc_cos = self.doc_vectors @ q
        cap1 = variant.endswith(" cap1")
        variant = variant.removesuffix(" cap1")
        every = variant.endswith(" all")  # long documents too: their truncated whole-text vector
        eligible = np.arange(len(self.short_doc)) if every else self.short_docs
        near = eligible[np.argsort(-doc_cos[eligible], kind="stable")[:pool]]
        members = np.unique(np.concatenate([given] + [self.passages_of.get(int(d), given[:0]) for d in near]))
        o, d = own[members], doc_cos[self.doc_of[members]]
        short = np.ones(len(members), dtype=bool) if every else self.short[members]
        if variant in ("V1 max", "V6 max all"):
            score = np.where(short, np.maximum(o, d), o)
        elif variant in ("V2 doc", "V5 doc all", "V7 doc all"):
            score = np.where(short, d + TIE * o, o)
        elif variant == "V3 first":
            score = np.where(short & self.first[members], np.maximum(o, d), o)
        elif variant == "V4 blend":
            score = np.where(short, 0.5 * o + 0.5 * d, o)
        else:
            raise ValueError(variant)
        order = np.lexsort((self.seqs[members], -score))
        if cap1:  # a document's best passage by its own cosine only
            best = np.lexsort((self.seqs[members], -o, self.doc_of[members]))
            keep = np.zeros(len(members), dtype=bool)
            keep[best[np.r_[True, np.diff(self.doc_of[members][best]) != 0]]] = True
            order = order[keep[order]]
        order = order[:pool]
        return Candidates.of(self.seqs[members][order].tolist(), score[order])


def run(name: str, variants: list[str]) -> dict:
    from engine import Engine, load_settings
    from engine.embedded.readers import DatasetSearcher
    from engine.evaluation import EVAL_DEPTH, evaluate, read_qrels, read_queries

    cached = ensure_dataset(name)
    engine = Engine(load_settings({"home": str(HOME), "max_k": EVAL_DEPTH, "candidate_pool": EVAL_DEPTH}),
                    cached.embedder())
    context = Context(engine, name)
    queries = read_queries(DATA / name / "queries.jsonl")
    qrels = read_qrels(DATA / name / "qrels.tsv")
    original = DatasetSearcher.dense_candidates
    state = {"variant": "V0", "rescored": 0}

    def dense_candidates(self, vector, pool, only=None):
        found = original(self, vector, pool, only)
        if state["variant"] == "V0" or only is not None:
            return found
        state["rescored"] += 1
        return context.rescored(state["variant"], vector, pool, found)

    DatasetSearcher.dense_candidates = dense_candidates
    out = {"counts": context.counts(), "measures": {}}
    print(name, json.dumps(out["counts"]), flush=True)
    try:
        for variant in variants:
            state["variant"], state["rescored"] = variant, 0
            started = time.time()
            report = evaluate(lambda text, mode, rerank: engine.query(name, text, k=EVAL_DEPTH, mode=mode,
                                                                      rerank=rerank).hits,
                              name, queries, qrels, list(MODES)).to_dict()
            out["measures"][variant] = report["measures"]
            cells = " ".join(f"{m} {report['measures'][m]['nDCG@10']:.4f}/{report['measures'][m]['Recall@100']:.4f}"
                             for m in MODES)
            print(f"{name:10}{variant:14}{cells}  ({time.time() - started:.0f} s, "
                  f"{state['rescored']} dense lists rescored)", flush=True)
    finally:
        DatasetSearcher.dense_candidates = original
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collections", nargs="+", default=["cranfield", "cisi"])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    parser.add_argument("--out", default=str(BENCH_DIR / "doc_vectors.json"))
    args = parser.parse_args()
    results = {name: run(name, args.variants) for name in args.collections}
    print("\nnDCG@10 (delta vs V0)   " + "".join(f"{c + ' ' + m:>26}" for c in results for m in MODES))
    for variant in args.variants:
        cells = []
        for result in results.values():
            for m in MODES:
                value = result["measures"][variant][m]["nDCG@10"]
                base = result["measures"]["V0"][m]["nDCG@10"] if "V0" in result["measures"] else value
                cells.append(f"{value:.4f} ({value - base:+.4f})")
        print(f"{variant:24}" + "".join(f"{c:>26}" for c in cells))
    with open(args.out, "w") as fh:
        json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
