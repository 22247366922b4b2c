"""Ingest throughput against the physical floor: raw `model.encode` over the same passages.

    python benchmarks/ingest.py [--data ../shared/data/scifact] [--limit N] [--rounds 4]
                                [--models default default-int8] [--runtime onnx]

Ingests a BEIR corpus (title + text per document) into a fresh dataset per
model with the engine and, in the same process, encodes exactly the passages
the engine produced with a plain sentence-transformers model; prints passages
per second for each and their ratio to raw encode (targets: the fp32 default
on ONNX Runtime >= 1.0 x, default-int8 >= 1.7 x).

The corpus is split into `rounds` parts, and each part is first ingested by
each engine, then raw-encoded, so a noisy neighbour on the machine slows both
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

from common import DATA, HOME, REPO


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DATA / "scifact"))
    parser.add_argument("--limit", type=int, default=0, help="only the first N documents (0: all)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--models", nargs="+", default=["default", "default-int8"],
                        help="KX_SERVE_EMBED_MODEL values to ingest with, side by side")
    parser.add_argument("--runtime", default="onnx", choices=["onnx", "torch"], help="KX_EMBED_RUNTIME")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "out" / "ingest.json"))
    args = parser.parse_args()

    from sentence_transformers import SentenceTransformer

    from engine import Engine, load_settings
    from engine.embedded.dataset import Dataset
    from engine.embedding.cards import bundled_model_path
    from engine.text.chunking import chunk_text
    from engine.text.inputs import extract_text, from_jsonl

    with tempfile.TemporaryDirectory() as home:
        cache = str(HOME / "models")  # the benchmarks' exported graphs: exported once, not per run
        engines = {m: Engine(load_settings({"home": home, "embed_model": m, "embed_runtime": args.runtime,
                                            "model_cache": cache})) for m in args.models}
        settings = next(iter(engines.values())).settings
        docs = list(from_jsonl(os.path.join(args.data, "corpus.jsonl"), settings.max_document_bytes))
        if args.limit:
            docs = docs[: args.limit]

        warm = [c.text for d in docs[:48]
                for c in chunk_text(extract_text(d), settings.chunk_size, settings.chunk_overlap)][:96]
        model = SentenceTransformer(str(bundled_model_path()), device="cpu")
        model.encode(warm, batch_size=settings.embed_batch_size)
        encode_seconds = {m: 0.0 for m in engines}
        for m, engine in engines.items():
            embedder = engine.embedder()
            embedder.prepare(lambda line: print(line, flush=True))
            embedder.encode(warm)
            real_encode = embedder.encode

            def timed_encode(texts, batch_size=32, progress=None, _real=real_encode, _m=m):
                start = time.perf_counter()
                try:
                    return _real(texts, batch_size=batch_size, progress=progress)
                finally:
                    encode_seconds[_m] += time.perf_counter() - start

            embedder.encode = timed_encode  # type: ignore[method-assign]
        engine_seconds = {m: 0.0 for m in engines}
        raw_seconds = 0.0
        seen_passages = 0
        size = -(-len(docs) // args.rounds)
        for part in range(args.rounds):
            batch = docs[part * size:(part + 1) * size]
            for m, engine in engines.items():
                start = time.perf_counter()
                engine.ingest(_dataset_name(m), batch)
                engine_seconds[m] += time.perf_counter() - start

            catalogue = Dataset(settings, _dataset_name(args.models[0])).reading()
            texts = [p.text for d in catalogue.documents() for p in catalogue.passages_of(d.ref)][seen_passages:]
            catalogue.close()
            seen_passages += len(texts)
            start = time.perf_counter()
            model.encode(texts, batch_size=settings.embed_batch_size, normalize_embeddings=True,
                         show_progress_bar=False)
            raw_seconds += time.perf_counter() - start
            spent = ", ".join(f"{m} {s:.1f} s" for m, s in engine_seconds.items())
            print(f"round {part + 1}/{args.rounds}: {seen_passages} passages so far, {spent}, "
                  f"raw {raw_seconds:.1f} s", flush=True)
        summary = engines[args.models[0]].dataset_summary(_dataset_name(args.models[0]))

    n = seen_passages
    result = {
        "corpus": os.path.basename(os.path.normpath(args.data)),
        "documents": summary.documents,
        "passages": n,
        "chunk_size": settings.chunk_size,
        "chunk_overlap": settings.chunk_overlap,
        "embed_batch_size": settings.embed_batch_size,
        "runtime": args.runtime,
        "rounds": args.rounds,
        "raw_encode_seconds": round(raw_seconds, 2),
        "raw_passages_per_s": round(n / raw_seconds, 2),
        "engines": {m: {
            "engine_seconds": round(engine_seconds[m], 2),
            "engine_encode_seconds": round(encode_seconds[m], 2),
            "engine_overhead_seconds": round(engine_seconds[m] - encode_seconds[m], 2),
            "engine_passages_per_s": round(n / engine_seconds[m], 2),
            "ratio": round(raw_seconds / engine_seconds[m], 3),
        } for m in engines},
        "load_average_at_end": os.getloadavg(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=2)
    print(f"{'':34}{'passages/s':>12}{'seconds':>10}{'vs raw':>8}")
    print(f"{'raw SentenceTransformer.encode':34}{result['raw_passages_per_s']:>12}{result['raw_encode_seconds']:>10}")
    for m, row in result["engines"].items():
        print(f"{'kx ingest, ' + m + ' (' + args.runtime + ')':34}{row['engine_passages_per_s']:>12}"
              f"{row['engine_seconds']:>10}{row['ratio']:>8}")
        print(f"  of which encode {row['engine_encode_seconds']} s, everything else {row['engine_overhead_seconds']} s")
    print(f"targets: default >= 1.0 x raw, default-int8 >= 1.7 x raw   [{summary.documents} documents, {n} passages]")


def _dataset_name(model: str) -> str:
    return "bench-" + "".join(c if c.isalnum() else "-" for c in model.lower())[:40]


if __name__ == "__main__":
    main()
