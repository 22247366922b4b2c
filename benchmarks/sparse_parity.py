"""Why kx's sparse nDCG@10 differed from bm25s's, one analysis choice at a time (no embeddings needed).

    python benchmarks/sparse_parity.py [--collections scifact cranfield cisi]

Scores every judged query with a plain numpy BM25 (Lucene IDF) over kx's
passages (chunk 1000/200, a document at its best passage) or over whole
documents, changing one thing at a time from kx's analysis: how repeated
query words count, the stoplist, the token pattern, k1; and bm25s itself
(lucene, k1 1.5, b 0.75, its stoplist, PyStemmer English) over whole
documents as the reference. Needs the `bench` extra. Takes ~1 min a collection.
"""

from __future__ import annotations

import argparse
import math
import re
from collections import Counter

import numpy as np
from peers import DocHit

KX_TOKENS = r"\w+(?:\.\w+)*"
SKLEARN_TOKENS = r"(?u)\b\w\w+\b"   # bm25s's (scikit-learn's) pattern: words of 2+ characters


def analyzer(pattern: str, stoplist: frozenset[str]):
    from whoosh.lang.porter2 import stem

    rx = re.compile(pattern)
    return lambda text: [stem(t) for t in rx.findall(text.lower()) if t not in stoplist]


class NumpyBm25:
    def __init__(self, units: list[str], analyze, k1: float, b: float = 0.75) -> None:
        self.analyze, self.k1 = analyze, k1
        postings: dict[str, list[tuple[int, int]]] = {}
        lengths = np.zeros(len(units))
        for u, text in enumerate(units):
            tokens = analyze(text)
            lengths[u] = len(tokens)
            for term, tf in Counter(tokens).items():
                postings.setdefault(term, []).append((u, tf))
        self.postings = {t: (np.array([u for u, _ in p]), np.array([f for _, f in p], float))
                         for t, p in postings.items()}
        self.n = len(units)
        self.norm = k1 * ((1 - b) + b * lengths / lengths.mean())

    def top(self, query: str, count_repeats: bool, depth: int) -> list[int]:
        tokens = self.analyze(query)
        weights = Counter(tokens) if count_repeats else dict.fromkeys(tokens, 1)
        scores = np.zeros(self.n)
        for term, qtf in weights.items():
            if term not in self.postings:
                continue
            ids, tfs = self.postings[term]
            idf = math.log(1 + (self.n - len(ids) + 0.5) / (len(ids) + 0.5))
            scores[ids] += qtf * idf * tfs * (self.k1 + 1) / (tfs + self.norm[ids])
        order = np.argsort(-scores, kind="stable")[:depth]
        return [int(u) for u in order if scores[u] > 0]


def main() -> None:
    from peers import Reference, load_collection

    from engine.evaluation import evaluate
    from engine.text.analysis import ENGLISH_STOPWORDS
    from engine.text.chunking import chunk_text

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collections", nargs="+", default=["scifact", "cranfield", "cisi"])
    args = parser.parse_args()
    from bm25s.stopwords import STOPWORDS_EN

    lucene33 = frozenset(STOPWORDS_EN)
    variants = {  # label: (units, token pattern, stoplist, k1, count repeated query words)
        "kx before (passages, once per word)": ("passages", KX_TOKENS, ENGLISH_STOPWORDS, 1.2, False),
        "+ repeated query words count": ("passages", KX_TOKENS, ENGLISH_STOPWORDS, 1.2, True),
        "+ repeats, k1 1.5": ("passages", KX_TOKENS, ENGLISH_STOPWORDS, 1.5, True),
        "+ repeats, bm25s's 33 stopwords": ("passages", KX_TOKENS, lucene33, 1.2, True),
        "+ repeats, 2+ character tokens": ("passages", SKLEARN_TOKENS, ENGLISH_STOPWORDS, 1.2, True),
        "once per word, bm25s's 33 stopwords": ("passages", KX_TOKENS, lucene33, 1.2, False),
        "once per word, k1 1.5": ("passages", KX_TOKENS, ENGLISH_STOPWORDS, 1.5, False),
        "once per word, whole documents": ("documents", KX_TOKENS, ENGLISH_STOPWORDS, 1.2, False),
        "bm25s settings, numpy, whole documents": ("documents", SKLEARN_TOKENS, lucene33, 1.5, True),
    }

    class NoVectors:
        def encode(self, texts):
            return np.zeros((len(texts), 1), dtype=np.float32)

    rows: dict[str, dict[str, float]] = {}
    for name in args.collections:
        collection = load_collection(name, NoVectors())
        passages, owner = [], []
        for i, text in enumerate(collection.texts):
            for chunk in chunk_text(text, 1000, 200):
                passages.append(chunk.text)
                owner.append(i)
        units = {"passages": (passages, owner), "documents": (collection.texts, list(range(len(collection.texts))))}

        def score(search) -> float:
            report = evaluate(lambda text, mode, rerank: search(text), name, collection.queries, collection.qrels,
                              ["sparse"])
            return report.scores["sparse"]["nDCG@10"]

        reference = Reference(collection)
        rows.setdefault("bm25s (reference)", {})[name] = score(lambda text: reference.search("sparse", text, None,
                                                                                             300))
        for label, (kind, pattern, stoplist, k1, repeats) in variants.items():
            texts, unit_doc = units[kind]
            bm25 = NumpyBm25(texts, analyzer(pattern, stoplist), k1)
            rows.setdefault(label, {})[name] = score(
                lambda text: [DocHit(collection.ids[unit_doc[u]]) for u in bm25.top(text, repeats, 300)])
        print(name, "done", flush=True)

    print(f"{'nDCG@10':42}" + "".join(f"{n:>11}" for n in args.collections))
    for label, by in rows.items():
        print(f"{label:42}" + "".join(f"{by[n]:>11.4f}" for n in args.collections))


if __name__ == "__main__":
    main()
