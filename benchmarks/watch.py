"""Watched-folder ingest: how soon a dropped file is queryable, and what the watcher costs in throughput.

    python benchmarks/watch.py [--data ../shared/data/scifact] [--files 1000] [--drops 7]

Latency: one file at a time lands in a watched folder; the clock runs from
just before it is written until a sparse query for a word only it holds finds
it (the watcher's "ingested" event comes first; the query confirms it). The
floor is the settle time, which the watcher waits on purpose.

Throughput: the same N files (BEIR abstracts cut to about one passage each)
go into one dataset by a plain Engine.ingest and into another by dropping
them into a watched folder; the watcher's clock runs from the first file
copied in to the last one ingested, settle time included. Ratio = plain
seconds / watcher seconds, summed over rounds that alternate which side goes
first (target >= 0.9). Both sides share one warm model.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PASSAGE_CHARS = 900  # under the default chunk size, so one file is one passage on both sides


class _Arrivals:
    """Counts the watcher's ingested events and lets the benchmark wait on them."""

    def __init__(self) -> None:
        self.ingested: dict[str, float] = {}
        self.batches: list[int] = []
        self.errors: list[object] = []
        self._cond = threading.Condition()

    def __call__(self, event) -> None:
        from engine.watch import BatchDone, Ingested, Refused, Unchanged, WatchError

        with self._cond:
            if isinstance(event, Ingested):
                self.ingested[event.path] = time.perf_counter()
            elif isinstance(event, BatchDone):
                self.batches.append(event.files)
            elif isinstance(event, (Refused, Unchanged, WatchError)):
                self.errors.append(event)
            self._cond.notify_all()

    def wait(self, predicate, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                if self.errors:
                    raise SystemExit(f"unexpected watcher event: {self.errors[0]}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SystemExit(f"timed out after {timeout} s")
                self._cond.wait(remaining)


def _texts(corpus: Path, count: int) -> list[str]:
    texts = []
    with corpus.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            text = f"{record.get('title', '')}\n\n{record['text']}".strip()
            if len(text) > PASSAGE_CHARS:
                text = text[: text.rfind(" ", 0, PASSAGE_CHARS)]
            if len(text) > 200:
                texts.append(text)
            if len(texts) == count:
                break
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "scifact")
    parser.add_argument("--files", type=int, default=1000, help="files in the throughput drop")
    parser.add_argument("--drops", type=int, default=7, help="single-file drops timed for latency")
    parser.add_argument("--rounds", type=int, default=2, help="plain/watched pairs, alternating which goes first")
    parser.add_argument("--settle", type=float, default=None, help="watcher settle seconds (default: the CLI's)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "watch.json")
    args = parser.parse_args()

    from engine import Engine, load_settings
    from engine.documents import from_file
    from engine.watch import DEFAULT_SETTLE_SECONDS, FolderWatcher

    settle = DEFAULT_SETTLE_SECONDS if args.settle is None else args.settle
    texts = _texts(args.data / "corpus.jsonl", args.files + args.drops)
    drop_texts, bulk_texts = texts[: args.drops], texts[args.drops:]
    with tempfile.TemporaryDirectory() as scratch:
        scratch_path = Path(scratch).resolve()  # event paths are resolved ones
        settings = load_settings({"home": str(scratch_path / "home")})
        engine = Engine(settings)
        engine.embedder().encode(bulk_texts[:96])  # torch's first batches of a shape are slow: warm both sides

        # -- latency: one file at a time --------------------------------------------
        latency_dir = scratch_path / "latency"
        latency_dir.mkdir()
        arrivals = _Arrivals()
        latencies, event_latencies = [], []
        with FolderWatcher(engine, "latency", latency_dir, arrivals, settle_seconds=settle):
            for i, text in enumerate(drop_texts):
                marker = f"zqmarker{i}x"
                path = latency_dir / f"drop-{i}.txt"
                start = time.perf_counter()
                path.write_text(f"{marker} {text}", encoding="utf-8")
                arrivals.wait(lambda key=str(path): key in arrivals.ingested, timeout=120)
                hits = engine.query("latency", marker, mode="sparse", k=1).hits
                found = time.perf_counter()
                if not hits or hits[0].document_name != path.stem:
                    raise SystemExit(f"{path.name} was reported ingested but a query does not find it")
                latencies.append(found - start)
                event_latencies.append(arrivals.ingested[str(path)] - start)

        # -- throughput: the same files, plain ingest vs. dropped into a watched folder.
        # Rounds alternate which side goes first, so neither always runs on a warmer (or busier) machine.
        staged = scratch_path / "staged"
        staged.mkdir()
        files = []
        for i, text in enumerate(bulk_texts):
            files.append(staged / f"doc-{i:04d}.txt")
            files[-1].write_text(text, encoding="utf-8")

        def plain(name: str) -> float:
            start = time.perf_counter()
            report = engine.ingest(name, [from_file(p, settings.max_document_bytes) for p in files])
            seconds = time.perf_counter() - start
            sizes[name] = (report.documents, report.passages)
            return seconds

        def watched(name: str) -> float:
            folder = scratch_path / name
            folder.mkdir()
            bulk = _Arrivals()
            with FolderWatcher(engine, name, folder, bulk, settle_seconds=settle):
                start = time.perf_counter()
                for path in files:
                    shutil.copyfile(path, folder / path.name)
                copy_seconds.append(time.perf_counter() - start)
                bulk.wait(lambda: len(bulk.ingested) == len(files), timeout=1800)
                seconds = max(bulk.ingested.values()) - start
            summary = engine.dataset_summary(name)
            sizes[name] = (summary.documents, summary.passages)
            batch_files.append(bulk.batches)
            return seconds

        sizes: dict[str, tuple[int, int]] = {}
        copy_seconds: list[float] = []
        batch_files: list[list[int]] = []
        plain_runs, watch_runs = [], []
        for r in range(args.rounds):
            if r % 2 == 0:
                plain_runs.append(plain(f"plain-{r}"))
                watch_runs.append(watched(f"watched-{r}"))
            else:
                watch_runs.append(watched(f"watched-{r}"))
                plain_runs.append(plain(f"plain-{r}"))
        if len(set(sizes.values())) != 1:
            raise SystemExit(f"the datasets differ: {sizes}")
        passages = next(iter(sizes.values()))[1]
        engine.close()

    n = len(files)
    result = {
        "corpus": args.data.name,
        "settle_seconds": settle,
        "latency_drops": len(latencies),
        "latency_median_s": round(statistics.median(latencies), 3),
        "latency_min_s": round(min(latencies), 3),
        "latency_max_s": round(max(latencies), 3),
        "latency_to_event_median_s": round(statistics.median(event_latencies), 3),
        "files": n,
        "passages": passages,
        "rounds": args.rounds,
        "plain_seconds": [round(x, 2) for x in plain_runs],
        "watch_seconds": [round(x, 2) for x in watch_runs],
        "watch_copy_seconds": [round(x, 2) for x in copy_seconds],
        "watch_batch_files": batch_files,
        "plain_files_per_s": round(n * len(plain_runs) / sum(plain_runs), 2),
        "watch_files_per_s": round(n * len(watch_runs) / sum(watch_runs), 2),
        "ratio": round(sum(plain_runs) / sum(watch_runs), 3),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"drop -> queryable (settle {settle:g} s, {len(latencies)} drops): median {result['latency_median_s']} s "
          f"(min {result['latency_min_s']}, max {result['latency_max_s']}); "
          f"to the ingested event {result['latency_to_event_median_s']} s")
    print(f"{'':28}{'files/s':>10}{'seconds per round':>20}")
    print(f"{'plain Engine.ingest':28}{result['plain_files_per_s']:>10}{str(result['plain_seconds']):>20}")
    print(f"{'watched folder':28}{result['watch_files_per_s']:>10}{str(result['watch_seconds']):>20}")
    print(f"ratio (plain seconds / watched seconds): {result['ratio']}   target >= 0.9   "
          f"[{n} files, {passages} passages; watcher batches {batch_files}; "
          f"load average {result['load_average_1min']} on {os.cpu_count()} cores]")

if __name__ == "__main__":
    main()
