"""Ingest throughput against the physical floor: raw `model.encode` over the same passages.

    python benchmarks/ingest.py [--data ../shared/data/scifact] [--limit N] [--rounds 4]

Ingests a BEIR corpus (title + text per document) into a fresh dataset with
the engine and, in the same process, encodes exactly the passages the engine
produced with a plain sentence-transformers model; prints passages per second
for both and their ratio (target: engine >= 0.85 of raw encode).

The corpus is split into `rounds` parts, and each part is first ingested by
the engine, then raw-encoded, so a noisy neighbour on the machine slows both
sides alike. Both models are warmed on the same real passages first. The
engine's time includes reading, chunking, the SQLite commits and building
both indexes (once per round, as one command per part would).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time

from common import DATA, REPO


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DATA / "scifact"))
    parser.add_argument("--limit", type=int, default=0, help="only the first N documents (0: all)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "out" / "ingest.json"))
    args = parser.parse_args()

    from sentence_transformers import SentenceTransformer

    from engine import Engine, load_settings
    from engine.chunking import chunk_text
    from engine.dataset import Dataset
    from engine.documents import extract_text, from_jsonl
    from engine.models import bundled_model_path

    with tempfile.TemporaryDirectory() as home:
        settings = load_settings({"home": home})
        engine = Engine(settings)
        docs = list(from_jsonl(os.path.join(args.data, "corpus.jsonl"), settings.max_document_bytes))
        if args.limit:
            docs = docs[: args.limit]

        warm = [c.text for d in docs[:48]
                for c in chunk_text(extract_text(d), settings.chunk_size, settings.chunk_overlap)][:96]
        embedder = engine.embedder()
        embedder.encode(warm)
        model = SentenceTransformer(str(bundled_model_path()), device="cpu")
        model.encode(warm, batch_size=settings.embed_batch_size)

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
        engine_seconds = raw_seconds = 0.0
        seen_passages = 0
        size = -(-len(docs) // args.rounds)
        for part in range(args.rounds):
            batch = docs[part * size:(part + 1) * size]
            start = time.perf_counter()
            engine.ingest("bench", batch)
            engine_seconds += time.perf_counter() - start

            catalogue = Dataset(settings, "bench").reading()
            texts = [p.text for d in catalogue.documents() for p in catalogue.passages_of(d.ref)][seen_passages:]
            catalogue.close()
            seen_passages += len(texts)
            start = time.perf_counter()
            model.encode(texts, batch_size=settings.embed_batch_size, normalize_embeddings=True,
                         show_progress_bar=False)
            raw_seconds += time.perf_counter() - start
            print(f"round {part + 1}/{args.rounds}: {seen_passages} passages so far, "
                  f"engine {engine_seconds:.1f} s, raw {raw_seconds:.1f} s", flush=True)
        summary = engine.dataset_summary("bench")

    n = seen_passages
    result = {
        "corpus": os.path.basename(os.path.normpath(args.data)),
        "documents": summary.documents,
        "passages": n,
        "chunk_size": settings.chunk_size,
        "chunk_overlap": settings.chunk_overlap,
        "rounds": args.rounds,
        "engine_seconds": round(engine_seconds, 2),
        "engine_encode_seconds": round(encode_seconds, 2),
        "engine_overhead_seconds": round(engine_seconds - encode_seconds, 2),
        "raw_encode_seconds": round(raw_seconds, 2),
        "engine_passages_per_s": round(n / engine_seconds, 2),
        "raw_passages_per_s": round(n / raw_seconds, 2),
        "ratio": round(raw_seconds / engine_seconds, 3),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=2)
    print(f"{'':24}{'passages/s':>12}{'seconds':>10}")
    print(f"{'raw model.encode':24}{result['raw_passages_per_s']:>12}{result['raw_encode_seconds']:>10}")
    print(f"{'kx ingest':24}{result['engine_passages_per_s']:>12}{result['engine_seconds']:>10}")
    print(f"  of which encode {result['engine_encode_seconds']} s, everything else "
          f"{result['engine_overhead_seconds']} s")
    print(f"ratio (engine / raw): {result['ratio']}   target >= 0.85   "
          f"[{summary.documents} documents, {n} passages]")


if __name__ == "__main__":
    main()
