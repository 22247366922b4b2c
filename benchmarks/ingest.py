"""Ingest throughput against the physical floor: raw `model.encode` over the same passages.

    python benchmarks/ingest.py [--data ../shared/data/scifact] [--limit N]

Ingests a BEIR corpus (title + text per document) into a fresh dataset with
the engine, then encodes exactly the passages the engine produced with a
plain sentence-transformers model in the same process, and prints passages
per second for both and their ratio (target: engine >= 0.85 of raw).
Both sides get a warm model; the engine's time includes reading, chunking,
SQLite commits and building both indexes.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "scifact")
    parser.add_argument("--limit", type=int, default=0, help="only the first N documents (0: all)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "ingest.json")
    args = parser.parse_args()

    from engine import Engine, load_settings
    from engine.dataset import Dataset
    from engine.chunking import chunk_text
    from engine.documents import extract_text, from_jsonl

    corpus = args.data / "corpus.jsonl"
    with tempfile.TemporaryDirectory() as home:
        settings = load_settings({"home": home})
        engine = Engine(settings)
        docs = list(from_jsonl(corpus, settings.max_document_bytes))
        if args.limit:
            docs = docs[: args.limit]
        # Both sides start warm: torch's first batches of a new shape are slow,
        # so each model first encodes the same real passages, untimed.
        warm = [c.text for d in docs[:48] for c in chunk_text(extract_text(d), settings.chunk_size,
                                                                settings.chunk_overlap)][:96]
        embedder = engine.embedder()
        embedder.encode(warm)

        encode_seconds = 0.0
        real_encode = embedder.encode

        def timed_encode(texts, batch_size=32, progress=None):
            nonlocal encode_seconds
            start = time.perf_counter()
            try:
                return real_encode(texts, batch_size=batch_size, progress=progress)
            finally:
                encode_seconds += time.perf_counter() - start

        embedder.encode = timed_encode  # type: ignore[method-assign]
        start = time.perf_counter()
        report = engine.ingest("bench", docs)
        engine_seconds = time.perf_counter() - start

        catalogue = Dataset(settings, "bench").reading()
        texts = [p.text for d in catalogue.documents() for p in catalogue.passages_of(d.ref)]
        catalogue.close()

    from sentence_transformers import SentenceTransformer

    from engine.models import bundled_model_path

    model = SentenceTransformer(str(bundled_model_path()), device="cpu")
    model.encode(warm, batch_size=settings.embed_batch_size)
    start = time.perf_counter()
    model.encode(texts, batch_size=settings.embed_batch_size, normalize_embeddings=True, show_progress_bar=False)
    raw_seconds = time.perf_counter() - start

    n = len(texts)
    result = {
        "corpus": str(args.data.name),
        "documents": report.documents,
        "passages": n,
        "chunk_size": settings.chunk_size,
        "chunk_overlap": settings.chunk_overlap,
        "engine_seconds": round(engine_seconds, 2),
        "engine_encode_seconds": round(encode_seconds, 2),
        "engine_overhead_seconds": round(engine_seconds - encode_seconds, 2),
        "raw_encode_seconds": round(raw_seconds, 2),
        "engine_passages_per_s": round(n / engine_seconds, 2),
        "raw_passages_per_s": round(n / raw_seconds, 2),
        "ratio": round(raw_seconds / engine_seconds, 3),
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores, Python {platform.python_version()}",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"{'':24}{'passages/s':>12}{'seconds':>10}")
    print(f"{'raw model.encode':24}{result['raw_passages_per_s']:>12}{result['raw_encode_seconds']:>10}")
    print(f"{'kx ingest':24}{result['engine_passages_per_s']:>12}{result['engine_seconds']:>10}")
    print(f"  of which encode {result['engine_encode_seconds']} s, everything else "
          f"{result['engine_overhead_seconds']} s")
    print(f"ratio (engine / raw): {result['ratio']}   target >= 0.85   "
          f"[{report.documents} documents, {n} passages]")


if __name__ == "__main__":
    main()
