"""Real-looking documents for the scaling benchmark, and the stand-in vectors kx and the floor both use.

Documents: sentences of the shared collections (SciFact, Cranfield, CISI:
titles and abstracts, ~60,000 sentences) drawn with a seeded RNG and put
together into documents of a few passages each, as real files are: each
document's length is drawn log-normally (as kx's chunker cuts them: median
7 passages, ~9.6 on average, from one to ~150), its text is a title line and
paragraphs of 2-8 sentences. A million passages are then ~100,000
documents whose sentences recombine, not copies of 8,000 abstracts: every
document and nearly every passage is distinct text, while the words, their
frequencies and the sentence lengths are those of real scientific prose.

Vectors: `StandIn`, an embedder with no model. A passage's vector is the
normalised signed sum of four rows of a fixed 16,384 x 384 Gaussian table,
the rows and signs picked by the blake2b digest of its text: in effect a
random unit vector (the worst case for HNSW: no clusters), the same for the
same text in every process (so the floor indexes exactly the vectors kx
did), at ~2 microseconds a passage. It stands where a pre-computed vector
would: kx cuts the documents into passages itself and asks it for their
vectors, so no model time is in the figures (its own time is counted and
reported beside them).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
from paths import DATA

DIM = 384
COLLECTIONS = ("scifact", "cranfield", "cisi")
_TABLE_ROWS = 1 << 14
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# kx's chunker ends a passage at a sentence or paragraph end, so over this prose each passage advances ~610
# characters, not size - overlap = 800 (chunk_text over 38,832 passages of these documents: 587-620)
_STEP, _OVERLAP = 610, 200
FOLDERS = 40   # documents are named f00/doc-0000001 ... f39/...: `name:f07/*` keeps 1/40 of them


@dataclass
class Pool:
    sentences: list[str]
    titles: list[str]


def sentence_pool(collections: Sequence[str] = COLLECTIONS, data: Path = DATA) -> Pool:
    """Every sentence (20-400 characters) and title of the shared collections' corpora."""
    sentences: list[str] = []
    titles: list[str] = []
    for name in collections:
        with (data / name / "corpus.jsonl").open(encoding="utf-8") as fh:
            for line in fh:
                doc = json.loads(line)
                if doc.get("title"):
                    titles.append(" ".join(doc["title"].split()))
                sentences.extend(s for s in (" ".join(p.split()) for p in _SENTENCE.split(doc.get("text") or ""))
                                 if 20 <= len(s) <= 400)
    return Pool(sentences, titles)


def passages_in(length: int) -> int:
    """About how many passages kx's default chunking (1000/200) cuts a text of `length` characters into."""
    return max(1, -(-(length - _OVERLAP) // _STEP))


def _document(rng: np.random.Generator, pool: Pool, passages: int) -> str:
    target = passages * _STEP + _OVERLAP - int(rng.integers(0, _STEP - 100))
    parts = [pool.titles[int(rng.integers(len(pool.titles)))]]
    length = len(parts[0])
    while length < target:
        picks = rng.integers(len(pool.sentences), size=int(rng.integers(2, 9)))
        paragraph = " ".join(pool.sentences[int(i)] for i in picks)
        parts.append(paragraph)
        length += len(paragraph) + 2
    return "\n\n".join(parts)


def documents(size: int, seed: int, pool: Pool | None = None) -> Iterator[tuple[str, str]]:
    """(name, text) of documents adding up to about `size` passages, the same for the same size and seed."""
    pool = pool or sentence_pool()
    rng = np.random.default_rng(seed)
    made = 0
    number = 0
    while made < size:
        passages = int(min(150, max(1, round(rng.lognormal(np.log(6), 0.9)))))
        text = _document(rng, pool, min(passages, size - made))
        number += 1
        made += passages_in(len(text))
        yield f"f{number % FOLDERS:02d}/doc-{number:07d}", text


def query_texts(count: int, seed: int, pool: Pool | None = None) -> list[str]:
    """Queries of 2-6 consecutive words from random sentences of the pool (what a person might type)."""
    pool = pool or sentence_pool()
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        words = pool.sentences[int(rng.integers(len(pool.sentences)))].split()
        n = int(rng.integers(2, 7))
        if len(words) > n:
            start = int(rng.integers(0, len(words) - n))
            out.append(" ".join(words[start:start + n]).strip(".,;:()"))
    return out


class StandIn:
    """An embedder without a model: hash-derived unit vectors (see the module's docstring)."""

    def __init__(self, dimension: int = DIM) -> None:
        from engine.embedding.cards import ModelCard

        self._card = ModelCard(model_id="hash-stand-in@bench", name="hash-stand-in", path=Path("."),
                               pooling="mean", dimension=dimension, normalized=True, max_seq_length=None,
                               causal_lm=False, architecture="Hash")
        self._table = np.random.default_rng(0).standard_normal((_TABLE_ROWS, dimension)).astype(np.float32)
        self.seconds = 0.0   # time spent in encode: the stand-in's, not kx's
        self.count = 0

    @property
    def card(self):
        return self._card

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress=None) -> np.ndarray:
        started = time.perf_counter()
        out = vectors(texts, self._table)
        self.seconds += time.perf_counter() - started
        self.count += len(texts)
        if progress is not None:
            progress(len(texts))
        return out


def vectors(texts: Sequence[str], table: np.ndarray | None = None) -> np.ndarray:
    """The stand-in's unit vectors of `texts` (float32, one row each)."""
    if table is None:
        table = np.random.default_rng(0).standard_normal((_TABLE_ROWS, DIM)).astype(np.float32)
    digests = np.frombuffer(b"".join(hashlib.blake2b(t.encode("utf-8"), digest_size=8).digest() for t in texts),
                            dtype=np.uint16).reshape(len(texts), 4)
    rows = (digests & (_TABLE_ROWS - 1)).astype(np.intp)
    signs = np.where(digests & 0x8000, -1.0, 1.0).astype(np.float32)
    out = np.einsum("nk,nkd->nd", signs, table[rows])
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32)
