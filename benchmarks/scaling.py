"""How ingest and query scale with corpus size, embedded engine vs milvus-lite (SCALING.md).

    python benchmarks/scaling.py [--sizes 10000 100000 300000] [--backends embedded milvus-lite] [--queries 50]
        [--corpus collections|synthetic] [--no-floor]
    python benchmarks/scaling.py --reopen-only --sizes 100000     # the reopen figures of a dataset built before
    python benchmarks/scaling.py --answer-only --sizes 1000000    # every figure but ingest's, of a dataset left
    python benchmarks/scaling.py --resume --sizes 1000000 [--earlier-passages N --earlier-s S]
                                                                  # finish a stopped build, then every figure

`--corpus collections` (the default): documents of several passages each
(median ~7, one to ~150), their text recombined from the sentences of the
shared SciFact, Cranfield and CISI corpora with a seeded RNG
(scaling_corpus.py), ingested as files are: kx cuts them into passages and
takes each passage's vector from a stand-in embedder with no model
(hash-derived random unit vectors, its own time reported beside kx's).
`--corpus synthetic` (the rows before round 4): 40 words drawn (Zipf-like)
from a 20,000-word vocabulary, one passage per document, with random unit
vectors passed as pre-computed vectors. Either way no model runs, into a
fresh dataset per size.

Queries: 2-6 words of a collection sentence (synthetic: three vocabulary
words) and a random unit vector, timed end to end through `query()`: dense,
sparse, hybrid with MMR, and hybrid filtered by `--where name:*0` (~10 % of
the documents) and `name:*00` (~1 %), the modes interleaved, after a 15 s
pause (milvus-lite settles its segments after a flush) and five warm-up
queries. Disk is the store's folder after ingest. Random vectors are the
worst case for HNSW (no clusters), so recall is not measured here; the
SciFact figures (benchmarks/backends.py) are the ones for quality.

For the embedded engine, also: the build process's peak RSS (VmHWM after
ingest; it includes the documents' bytes the benchmark holds, reported
beside it), a query process's peak RSS and its cold open (a fresh Python
process: imports, opening the dataset, the first hybrid answer), the
reopen after a small commit (another writer commits ~100 passages while a
long-lived engine holds the dataset open; the engine's next query reopens
what changed; its time minus a warm query's, median of three commits),
the documents listing and the TUI's document browser (scaling_browse.py,
a fresh process), and, for the collections corpus, the floor
(scaling_floor.py, a fresh process after the rest): voyager `add_items` and
a bm25s index of the same passages and vectors; kx's bulk ingest rate is
reported against it. `--reopen-only` measures the cold open, RSS and
reopen on the dataset an earlier run left (no ingest), e.g. to compare two
versions of the code; `--answer-only` adds the query latencies, disk and
the listings, e.g. on a dataset whose build was stopped part-way (what it
holds is reported). `--resume` (embedded, collections corpus) continues a
build a stopped run left: the same seeded documents, less those the dataset
already holds by name (read from its listing, not ingested again), ingested
as a fresh run ingests; the rate of that part is reported, and over both
parts when the stopped part's passages and ingest seconds are given; then
the floor at the full size and every answering figure, as a fresh run.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from common import BENCH_DIR, percentile
from scaling_floor import peak_rss_mb

DIM = 384
VOCAB = 20_000
WORDS = 40
MODES = ("dense", "sparse", "hybrid")
FILTERS = {"where_10pct": ["name:*0"], "where_1pct": ["name:*00"]}   # names end in a document number
SETTLE_S = 15   # after ingest, before timing: milvus-lite builds and compacts segments for ~10 s after a flush
HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def _words(rng, n: int):
    import numpy as np

    ranks = np.minimum(rng.zipf(1.2, size=(n, WORDS)), VOCAB) - 1
    return [" ".join(f"w{r}" for r in row) for row in ranks]


def _unit(rng, n: int):
    import numpy as np

    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@dataclass
class Corpus:
    """What one kind of corpus needs: its dataset name, its documents, queries and the small commit's."""

    dataset: str
    probe: str                                          # a query's text for the cold and reopen figures
    documents: Callable[[int, int], tuple[list, Any]]   # (size, seed) -> (DocumentInputs, vectors or None)
    queries: Callable[[int, int], list[str]]
    embedder: Callable[[], Any]                         # the engine's embedder (None: vectors come given)


def _synthetic_documents(size: int, seed: int) -> tuple[list, Any]:
    import numpy as np

    from engine.text.inputs import from_text

    rng = np.random.default_rng(seed)
    return [from_text(t, f"p{seed}-{i}") for i, t in enumerate(_words(rng, size))], _unit(rng, size)


def _synthetic_queries(count: int, seed: int) -> list[str]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return [" ".join(f"w{int(r)}" for r in rng.integers(0, 2000, 3)) for _ in range(count)]


def _collection_documents(size: int, seed: int) -> tuple[list, Any]:
    from scaling_corpus import documents

    from engine.text.inputs import from_text

    return [from_text(text, f"s{seed}/{name}") for name, text in documents(size, seed)], None


def _stand_in():
    from scaling_corpus import StandIn

    return StandIn()


def corpus_of(kind: str) -> Corpus:
    if kind == "synthetic":
        return Corpus("synthetic", "w1 w20 w300", _synthetic_documents, _synthetic_queries, lambda: None)
    from scaling_corpus import query_texts

    return Corpus("corpus", "boundary layer transition", _collection_documents, query_texts, _stand_in)


_COLD = """
import json, sys, time
started = time.perf_counter()
sys.path.insert(0, {repo!r})
import numpy as np
from engine import load_settings
from engine.open_backend import open_backend
backend = open_backend(load_settings({{"home": {home!r}, "embed_model": "none"}}, env={{}}), embedder=None)
rng = np.random.default_rng(1)
vector = rng.standard_normal(384).astype(np.float32)
backend.query({dataset!r}, {probe!r}, vector=vector, k=10, mode="hybrid")
first = time.perf_counter() - started
for i in range(20):
    backend.query({dataset!r}, f"{probe} {{i}}", vector=rng.standard_normal(384).astype(np.float32),
                  k=10, mode="hybrid")
# VmHWM, not getrusage's ru_maxrss: Linux carries the parent's high-water mark into a child across fork and exec,
# so ru_maxrss here reported the benchmark's own size (13.6 GB at 1 M, 2.7 GB at 300k), not this process's
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({{"first_answer_s": first, "peak_rss_mb": peak / 1024}}))
"""


def _child(args: list[str], env_extra: dict | None = None) -> dict:
    """Run a Python child with this tree's code first on its path; its last stdout line, as JSON."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE)]), **(env_extra or {})}
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{args[:2]} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def cold_open(home: Path, corpus: Corpus) -> dict:
    """A fresh process: imports, open, first hybrid answer; then 20 more, and its peak RSS."""
    start = time.perf_counter()
    found = _child(["-c", _COLD.format(repo=str(REPO), home=str(home), dataset=corpus.dataset, probe=corpus.probe)])
    return {"cold_first_answer_s": round(found["first_answer_s"], 2),
            "cold_process_s": round(time.perf_counter() - start, 2),
            "query_process_peak_rss_mb": round(found["peak_rss_mb"])}


def reopen_after_commit(home: Path, size: int, corpus: Corpus, rounds: int = 3) -> dict:
    """A long-lived engine's first query after another writer commits ~100 passages, less a warm query."""
    import numpy as np

    from engine import load_settings
    from engine.open_backend import open_backend

    settings = load_settings({"home": str(home), "embed_model": "none"}, env={})
    reader = open_backend(settings, embedder=None)
    writer = open_backend(settings, embedder=corpus.embedder())
    query = np.random.default_rng(size + 7).standard_normal(DIM).astype(np.float32)
    # new passages every run (a seed of the clock): a second --reopen-only run offering the same documents
    # would commit nothing
    run = time.time_ns() % 2**31

    def ask() -> float:
        t = time.perf_counter()
        reader.query(corpus.dataset, corpus.probe, vector=query, k=10, mode="hybrid")
        return time.perf_counter() - t

    for _ in range(5):
        ask()
    warm = float(np.median([ask() for _ in range(10)]))
    reopen, commit = [], []
    for round_ in range(rounds):
        docs, vectors = corpus.documents(100, run + round_)
        t = time.perf_counter()
        writer.ingest(corpus.dataset, docs, vectors=vectors)
        commit.append(time.perf_counter() - t)
        reopen.append(ask() - warm)
    reader.close()
    writer.close()
    return {"warm_hybrid_ms": round(warm * 1000, 1), "commit_100_s": round(float(np.median(commit)), 2),
            "reopen_after_100_s": round(float(np.median(reopen)), 3), "reopen_samples_s": [round(r, 3) for r in reopen]}


def _ingest(backend, corpus: Corpus, docs: list, vectors, embedder) -> dict:
    """Build the dataset; what it took, and the build process's peak RSS (the documents' bytes included)."""
    from engine.records import DocumentStatus

    held = sum(len(d.data or b"") for d in docs) + (0 if vectors is None else vectors.nbytes)
    started = time.perf_counter()
    report = backend.ingest(corpus.dataset, docs, vectors=vectors)
    ingest_s = time.perf_counter() - started
    added = sum(r.passages for r in report.results if r.status == DocumentStatus.ADDED)
    # the report's documents and passages are the dataset's totals; the rate counts what this ingest added
    out = {"documents": report.documents, "passages": report.passages, "passages_added": added,
           "ingest_s": round(ingest_s, 1), "ingest_per_s": round(added / ingest_s, 1),
           "build_peak_rss_mb": round(peak_rss_mb()),
           "benchmark_held_mb": round(held / 2**20)}
    if embedder is not None:
        out["stand_in_embedder_s"] = round(embedder.seconds, 1)
    return out


def _latencies(backend, corpus: Corpus, size: int, queries: int) -> dict:
    import numpy as np

    texts = corpus.queries(queries + 5, size + 1)
    qv = _unit(np.random.default_rng(size + 2), queries + 5)
    for i in range(5):
        backend.query(corpus.dataset, texts[i], vector=qv[i], k=10, mode="hybrid")
    kinds = [*MODES, *FILTERS]
    times: dict[str, list[float]] = {m: [] for m in kinds}
    for i in range(5, queries + 5):   # the modes interleaved: each sees the same machine load
        for kind in kinds:
            mode = kind if kind in MODES else "hybrid"
            t = time.perf_counter()
            backend.query(corpus.dataset, texts[i], vector=None if mode == "sparse" else qv[i], k=10, mode=mode,
                          rerank=mode == "hybrid", where=FILTERS.get(kind))
            times[kind].append((time.perf_counter() - t) * 1000)
    return {kind: {"p50_ms": round(percentile(times[kind], 50), 1), "p95_ms": round(percentile(times[kind], 95), 1)}
            for kind in kinds}


def _disk_mb(folder: Path) -> float:
    return round(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20, 1)


def _answering(home: Path, size: int, corpus: Corpus) -> dict:
    """What a user of the built dataset meets: a cold open, the reopen after a small commit, the listings."""
    return {**cold_open(home, corpus), **reopen_after_commit(home, size, corpus),
            **_child([str(HERE / "scaling_browse.py"), "--home", str(home), "--dataset", corpus.dataset])}


def answer_only(size: int, queries: int, corpus: Corpus) -> dict:
    """Every figure but ingest's, on the dataset an earlier (or stopped) run left at this size."""
    from engine import load_settings
    from engine.open_backend import open_backend

    folder = BENCH_DIR / "scaling" / f"embedded-{corpus.dataset}-{size}"
    backend = open_backend(load_settings({"home": str(folder / "home"), "embed_model": "none"}, env={}),
                           embedder=None)
    summary = backend.dataset_summary(corpus.dataset)
    out: dict = {"size": size, "corpus": corpus.dataset, "documents": summary.documents,
                 "passages": summary.passages, "backlog": summary.backlog, "disk_mb": _disk_mb(folder)}
    out.update(_latencies(backend, corpus, size, queries))
    backend.close()
    out.update(_answering(folder / "home", size, corpus))
    return out


def measure(kind: str, size: int, queries: int, corpus: Corpus, floor: bool) -> dict:
    from engine import load_settings
    from engine.open_backend import open_backend

    folder = BENCH_DIR / "scaling" / f"{kind}-{corpus.dataset}-{size}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    settings = {"home": str(folder / "home"), "embed_model": "none"}
    if kind == "milvus-lite":
        settings.update(backend="milvus", milvus_uri=str(folder / "store.db"))
    embedder = corpus.embedder()
    backend = open_backend(load_settings(settings, env={}), embedder=embedder)
    docs, vectors = corpus.documents(size, size)
    out: dict = {"size": size, "corpus": corpus.dataset, **_ingest(backend, corpus, docs, vectors, embedder)}
    del docs, vectors
    return _after_ingest(kind, backend, folder, out, queries, corpus, floor)


def _after_ingest(kind: str, backend, folder: Path, out: dict, queries: int, corpus: Corpus, floor: bool) -> dict:
    """Every figure after the build: latencies, disk, then (embedded) the answering figures and the floor."""
    size = out["size"]
    gc.collect()   # the documents' bytes go before the queries
    print(json.dumps({"stage": "ingested", "at": time.strftime("%H:%M:%S"), **out}), flush=True)
    time.sleep(SETTLE_S)
    out.update(_latencies(backend, corpus, size, queries))
    backend.close()
    out["disk_mb"] = _disk_mb(folder)
    if kind == "embedded":
        out.update(_answering(folder / "home", size, corpus))
        if floor and corpus.dataset == "corpus":
            out.update(_child([str(HERE / "scaling_floor.py"), "--size", str(size), "--seed", str(size),
                               "--folder", str(folder / "floor")]))
            out["kx_over_floor"] = round(out["ingest_per_s"] / out["floor_per_s"], 3)
            if "whole_ingest_per_s" in out:
                out["whole_kx_over_floor"] = round(out["whole_ingest_per_s"] / out["floor_per_s"], 3)
    return out


def remaining(backend, corpus: Corpus, size: int) -> tuple[list, int]:
    """The documents of this size's build the dataset does not hold yet (by name, from its listing), in the
    fresh run's order, and how many it holds."""
    from engine.backend import every_document

    held = {row.name for row in every_document(backend, corpus.dataset)}
    docs, vectors = corpus.documents(size, size)
    if vectors is not None:
        raise SystemExit("--resume builds the collections corpus only (its vectors come from the stand-in)")
    left = [d for d in docs if d.name not in held]
    return left, len(docs) - len(left)


def resume(size: int, queries: int, corpus: Corpus, floor: bool, earlier: tuple[int, float] | None) -> dict:
    """Finish the build a stopped run left at this size (the documents it holds skipped by name), then measure."""
    from engine import load_settings
    from engine.open_backend import open_backend

    folder = BENCH_DIR / "scaling" / f"embedded-{corpus.dataset}-{size}"
    if not (folder / "home").is_dir():
        raise SystemExit(f"--resume: no build to finish at {folder}")
    embedder = corpus.embedder()
    backend = open_backend(load_settings({"home": str(folder / "home"), "embed_model": "none"}, env={}),
                           embedder=embedder)
    before = backend.dataset_summary(corpus.dataset)
    started = time.perf_counter()
    docs, skipped = remaining(backend, corpus, size)
    out: dict = {"size": size, "corpus": corpus.dataset, "held_documents": before.documents,
                 "held_passages": before.passages, "held_backlog": before.backlog, "skipped_documents": skipped,
                 "prepare_s": round(time.perf_counter() - started, 1)}   # the listing and the documents' generation
    out.update(_ingest(backend, corpus, docs, None, embedder))
    del docs
    if earlier is not None:
        passages, seconds = earlier[0] + out["passages_added"], earlier[1] + out["ingest_s"]
        out.update(earlier_passages=earlier[0], earlier_ingest_s=earlier[1], whole_passages=passages,
                   whole_ingest_s=round(seconds, 1), whole_ingest_per_s=round(passages / seconds, 1))
    return _after_ingest("embedded", backend, folder, out, queries, corpus, floor)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000, 300_000])
    parser.add_argument("--backends", nargs="+", default=["embedded", "milvus-lite"])
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--corpus", choices=["collections", "synthetic"], default="collections")
    parser.add_argument("--no-floor", action="store_true", help="leave out the floor (collections corpus only)")
    parser.add_argument("--out", default=str(BENCH_DIR / "scaling.json"))
    parser.add_argument("--reopen-only", action="store_true",
                        help="cold open, RSS and reopen of the embedded datasets an earlier run left")
    parser.add_argument("--answer-only", action="store_true",
                        help="every figure but ingest's, of the embedded datasets an earlier (or stopped) run left")
    parser.add_argument("--resume", action="store_true",
                        help="finish the embedded build a stopped run left (documents it holds skipped), then measure")
    parser.add_argument("--earlier-passages", type=int, help="with --resume: passages the stopped run committed")
    parser.add_argument("--earlier-s", type=float, help="with --resume: the stopped run's ingest seconds")
    args = parser.parse_args()
    corpus = corpus_of(args.corpus)
    results = []
    if (args.earlier_passages is None) != (args.earlier_s is None):
        parser.error("--earlier-passages and --earlier-s go together")
    if args.resume:
        earlier = None if args.earlier_passages is None else (args.earlier_passages, args.earlier_s)
        for size in args.sizes:
            row = {"backend": "embedded", "load_average": os.getloadavg(), "command": " ".join(sys.argv),
                   **resume(size, args.queries, corpus, not args.no_floor, earlier),
                   "load_average_end": os.getloadavg()}
            results.append(row)
            print(json.dumps(row), flush=True)
            Path(args.out).write_text(json.dumps(results, indent=2))
        return
    if args.reopen_only:
        for size in args.sizes:
            home = BENCH_DIR / "scaling" / f"embedded-{corpus.dataset}-{size}" / "home"
            row = {"backend": "embedded", "size": size, "load_average": os.getloadavg(), **cold_open(home, corpus),
                   **reopen_after_commit(home, size, corpus)}
            print(json.dumps(row), flush=True)
        return
    if args.answer_only:
        for size in args.sizes:
            row = {"backend": "embedded", "load_average": os.getloadavg(), "command": " ".join(sys.argv),
                   **answer_only(size, args.queries, corpus), "load_average_end": os.getloadavg()}
            print(json.dumps(row), flush=True)
        return
    for size in args.sizes:
        for kind in args.backends:
            row = {"backend": kind, "load_average": os.getloadavg(), "command": " ".join(sys.argv),
                   **measure(kind, size, args.queries, corpus, not args.no_floor)}
            row["load_average_end"] = os.getloadavg()
            results.append(row)
            print(json.dumps(row), flush=True)
            Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
