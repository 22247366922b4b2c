"""Shared by the benchmarks: where the test collections are and a reusable benchmark home."""

from __future__ import annotations

import sys
from pathlib import Path

from paths import BENCH_DIR, DATA, HOME, REPO

sys.path.insert(0, str(REPO))
__all__ = ["BENCH_DIR", "DATA", "HOME", "REPO", "ensure_dataset", "percentile"]


def ensure_dataset(collection: str, home: Path = HOME, **settings):
    """An engine over `home` with the BEIR `collection` ingested (a no-op when already there).

    The engine embeds through the benchmark vector cache (vector_cache.py), so
    a dataset rebuilt after an index change, and every query text seen before,
    costs no model time; `settings` override the defaults.
    """
    from vector_cache import CachedEmbedder

    from engine import Engine, load_settings
    from engine.embedding.embedders import load_embedder
    from engine.errors import KxError, Status
    from engine.text.inputs import from_jsonl

    engine = Engine(load_settings({"home": str(home), **settings}))
    engine = Engine(engine.settings, CachedEmbedder(load_embedder(engine.model_card()), collection))
    names = {s.name for s in engine.list_datasets()}
    if collection in names:
        try:
            engine.query(collection, "probe", mode="sparse", rerank=False)
            # an ingest stopped in stage 2 (a killed benchmark) leaves passages without vectors: dense would
            # be measured over part of the collection, so the backlog is finished first
            if engine.dataset_summary(collection).backlog:
                print(f"embedding {collection}'s backlog ...", file=sys.stderr, flush=True)
                engine.embed(collection)
            return engine
        except KxError as exc:  # built under another tokenizer or chunk config: rebuild it
            if exc.status is not Status.FAILED_PRECONDITION:
                raise
            import shutil

            shutil.rmtree(engine.dataset_summary(collection).path)
            engine = Engine(engine.settings, engine.embedder())
    corpus = DATA / collection / "corpus.jsonl"
    print(f"ingesting {corpus} ...", file=sys.stderr, flush=True)
    engine.ingest(collection, list(from_jsonl(corpus, engine.settings.max_document_bytes)))
    return engine


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100.0 * (len(ordered) - 1))))
    return ordered[index]


def cpu_name() -> str:
    """The processor's model name, for a figure's record (which CPU made it)."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def scifact_passages(limit: int) -> list[str]:
    """The first `limit` passages of SciFact's corpus, cut as kx's default chunking cuts them (1000/200)."""
    import json

    from engine.text.chunking import chunk_text

    texts: list[str] = []
    with (DATA / "scifact" / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            texts.extend(c.text for c in chunk_text(f"{doc['title']}\n\n{doc['text']}", 1000, 200))
            if len(texts) >= limit:
                return texts[:limit]
    return texts
