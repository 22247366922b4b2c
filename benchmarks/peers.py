"""The peers kx is measured against, run in the same process on the same vectors.

* `Reference`: what a careful user would script by hand over whole documents:
  bm25s (Lucene BM25, k1 1.5, b 0.75, its English stoplist, PyStemmer English),
  exact numpy cosine over the same model's document vectors, and RRF with K 60.
* `LanceHybrid`: LanceDB's hybrid search over the same document vectors: its
  native full-text index, its vector search (flat, so exact) and its
  RRFReranker.

Both need the optional `bench` extra (`pip install -c constraints.txt -e ".[bench]"`);
the product and the tests never import this module.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from common import DATA

RRF_K = 60


@dataclass(frozen=True)
class DocHit:
    """What the evaluation needs from a hit: the judged document's id."""

    document_name: str


@dataclass
class Collection:
    """A BEIR collection with its document and query vectors."""

    name: str
    ids: list[str]
    texts: list[str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    doc_vectors: np.ndarray


def load_collection(name: str, embedder) -> Collection:
    """Documents as kx reads them (title + text), embedded whole (the model truncates at its limit)."""
    from engine.errors import KxError
    from engine.evaluation import read_qrels, read_queries
    from engine.text.inputs import extract_text, from_jsonl

    ids, texts = [], []
    for doc in from_jsonl(DATA / name / "corpus.jsonl", 2**31):
        try:
            texts.append(extract_text(doc))
        except KxError:  # an empty record: kx refuses it too
            continue
        ids.append(doc.name)
    return Collection(name, ids, texts, read_queries(DATA / name / "queries.jsonl"),
                      read_qrels(DATA / name / "qrels.tsv"), embedder.encode(texts))


def _rrf(*lists: list[int]) -> list[int]:
    scores: dict[int, float] = {}
    for ranked in lists:
        for rank, doc in enumerate(ranked, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores, key=lambda d: (-scores[d], d))


class Reference:
    """bm25s + exact cosine + RRF 60 over whole documents."""

    def __init__(self, collection: Collection) -> None:
        import bm25s
        import Stemmer

        self.collection = collection
        self._stemmer = Stemmer.Stemmer("english")
        tokens = bm25s.tokenize(collection.texts, stopwords="en", stemmer=self._stemmer, show_progress=False)
        self._bm25 = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
        self._bm25.index(tokens, show_progress=False)
        self._vocab = tokens.vocab
        self._matrix = collection.doc_vectors

    def sparse(self, text: str, depth: int) -> list[int]:
        import bm25s

        words = bm25s.tokenize([text], stopwords="en", stemmer=self._stemmer, return_ids=False,
                               show_progress=False)[0]
        words = [w for w in words if w in self._vocab]
        if not words:
            return []
        docs, scores = self._bm25.retrieve([words], k=min(depth, len(self.collection.ids)), show_progress=False,
                                           n_threads=1)
        return [int(d) for d, s in zip(docs[0], scores[0]) if s > 0]

    def dense(self, vector: np.ndarray, depth: int) -> list[int]:
        sims = self._matrix @ vector
        top = np.argpartition(-sims, min(depth, len(sims) - 1))[:depth]
        return [int(i) for i in top[np.argsort(-sims[top], kind="stable")]]

    def search(self, mode: str, text: str, vector: np.ndarray, depth: int) -> list[DocHit]:
        if mode == "dense":
            ranked = self.dense(vector, depth)
        elif mode == "sparse":
            ranked = self.sparse(text, depth)
        else:
            ranked = _rrf(self.dense(vector, depth), self.sparse(text, depth))[:depth]
        return [DocHit(self.collection.ids[i]) for i in ranked]


class LanceHybrid:
    """LanceDB: one table of whole documents, its native FTS index, hybrid search with RRF."""

    def __init__(self, collection: Collection, folder: Path | None = None) -> None:
        import lancedb
        import pyarrow as pa
        from lancedb.rerankers import RRFReranker

        self.collection = collection
        self._tmp = None if folder else tempfile.TemporaryDirectory(prefix="kx-lancedb-")
        db = lancedb.connect(str(folder or self._tmp.name))
        dim = collection.doc_vectors.shape[1]
        data = pa.table({
            "doc_id": pa.array(collection.ids),
            "text": pa.array(collection.texts),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(collection.doc_vectors.reshape(-1),
                                                                 type=pa.float32()), dim),
        })
        self._table = db.create_table(collection.name, data, mode="overwrite")
        self._table.create_fts_index("text", replace=True)  # native (not tantivy): stemmed, stopwords removed
        self._reranker = RRFReranker(K=RRF_K)

    def search(self, text: str, vector: np.ndarray, k: int) -> list[DocHit]:
        rows = (self._table.search(query_type="hybrid").vector(vector.astype(np.float32)).text(text)
                .distance_type("cosine").rerank(self._reranker).limit(k).to_list())
        return [DocHit(row["doc_id"]) for row in rows]


def timed(fn, *args) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn(*args)
    return (time.perf_counter() - start) * 1000.0, out


def describe() -> dict[str, str]:
    """Peer versions, for the record."""
    from importlib.metadata import version

    return {name: version(name) for name in ("bm25s", "PyStemmer", "lancedb", "pyarrow")}


if __name__ == "__main__":
    print(json.dumps(describe()))
