"""The floor under kx's bulk ingest: the libraries alone, on the same passages and vectors.

    python benchmarks/scaling_floor.py --size 1000000 --seed 1000000 --folder /tmp/floor   # prints one JSON line

scaling.py runs it in its own process after kx's build (so the two never
hold their data at once). The same documents as kx ingested
(scaling_corpus.documents, same size and seed), cut by kx's own chunker
(untimed: chunking is part of kx's figure, not the floor's), the same
stand-in vectors (untimed), then, timed:

1. voyager: an index with kx's graph parameters (cosine, M = 12,
   ef_construction = 200, float32, seed 1), `add_items` in batches of 2,048
   on every core, then saved to a file (kx keeps its graph on disk too);
2. BM25: bm25s tokenises the passages (English stop words, no stemmer),
   indexes them and saves the index.

Floor passages/s = passages / (voyager time + BM25 time): what a program
that only feeds the two libraries would reach, with no catalogue, no text
store, no provenance and no crash safety. bm25s is a test extra of kx
(`pip install bm25s`); voyager is kx's own.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import time
from pathlib import Path

BATCH = 2048
THREADS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def passages(size: int, seed: int) -> list[str]:
    """The passage texts of the benchmark's documents, cut as kx cuts them (default 1000/200)."""
    from scaling_corpus import documents

    from engine.text.chunking import chunk_text

    return [c.text for _name, text in documents(size, seed) for c in chunk_text(text, 1000, 200)]


def voyager_floor(texts: list[str], folder: Path) -> dict:
    from scaling_corpus import vectors
    from voyager import Index, Space, StorageDataType

    matrix = vectors(texts)
    index = Index(Space.Cosine, num_dimensions=matrix.shape[1], M=12, ef_construction=200, random_seed=1,
                  storage_data_type=StorageDataType.Float32)
    started = time.perf_counter()
    for start in range(0, len(matrix), BATCH):
        index.add_items(matrix[start:start + BATCH], ids=list(range(start, min(start + BATCH, len(matrix)))),
                        num_threads=THREADS)
    added = time.perf_counter() - started
    index.save(str(folder / "graph.voy"))
    saved = time.perf_counter() - started - added
    return {"voyager_add_s": round(added, 1), "voyager_save_s": round(saved, 1)}


def bm25_floor(texts: list[str], folder: Path) -> dict:
    import bm25s

    started = time.perf_counter()
    tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
    tokenized = time.perf_counter() - started
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    indexed = time.perf_counter() - started - tokenized
    retriever.save(str(folder / "bm25"))
    saved = time.perf_counter() - started - tokenized - indexed
    return {"bm25_tokenize_s": round(tokenized, 1), "bm25_index_s": round(indexed, 1), "bm25_save_s": round(saved, 1)}


def floor(size: int, seed: int, folder: Path) -> dict:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    started = time.perf_counter()
    texts = passages(size, seed)
    out: dict = {"floor_passages": len(texts), "floor_prepare_s": round(time.perf_counter() - started, 1)}
    out.update(voyager_floor(texts, folder))
    gc.collect()   # the vectors and the graph go before BM25's tokens come
    out.update(bm25_floor(texts, folder))
    total = sum(out[k] for k in ("voyager_add_s", "voyager_save_s", "bm25_tokenize_s", "bm25_index_s",
                                 "bm25_save_s"))
    out["floor_s"] = round(total, 1)
    out["floor_per_s"] = round(len(texts) / total, 1)
    out["floor_disk_mb"] = round(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20, 1)
    out["floor_peak_rss_mb"] = round(peak_rss_mb())
    return out


def peak_rss_mb() -> float:
    """This process's own high-water mark (VmHWM; ru_maxrss carries a parent's across fork and exec)."""
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--folder", type=Path, required=True)
    args = parser.parse_args()
    print(json.dumps(floor(args.size, args.seed, args.folder)), flush=True)


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
