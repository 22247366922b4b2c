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
seconds / watcher seconds, the median over rounds that alternate which side
goes first (target >= 0.9); CPU seconds are shown too, as they hold steadier
than wall time on a shared machine. Both sides share one warm model.
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
        from engine.watch.events import BatchDone, Ingested, Refused, Unchanged, WatchError

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
    parser.add_argument("--rounds", type=int, default=3, help="plain/watched pairs, alternating which goes first")
    parser.add_argument("--settle", type=float, default=None, help="watcher settle seconds (default: the CLI's)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "watch.json")
    args = parser.parse_args()

    from engine import Engine, load_settings
    from engine.text.inputs import from_file
    from engine.watch.watcher import DEFAULT_SETTLE_SECONDS, FolderWatcher

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

        def plain(name: str) -> tuple[float, float]:
            # On a worker thread, as the watcher's ingest runs (and as the TUI runs ingest): on a busy
            # machine torch was measured up to a third slower called from the main thread, which
            # would flatter the watcher.
            reports = []
            wall, cpu = time.perf_counter(), time.process_time()
            worker = threading.Thread(target=lambda: reports.append(
                engine.ingest(name, [from_file(p, settings.max_document_bytes) for p in files])))
            worker.start()
            worker.join()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if not reports:
                raise SystemExit("the plain ingest failed (see the traceback above)")
            sizes[name] = (reports[0].documents, reports[0].passages)
            return wall, cpu

        def watched(name: str) -> tuple[float, float]:
            folder = scratch_path / name
            folder.mkdir()
            bulk = _Arrivals()
            with FolderWatcher(engine, name, folder, bulk, settle_seconds=settle):
                wall, cpu = time.perf_counter(), time.process_time()
                for path in files:
                    shutil.copyfile(path, folder / path.name)
                copy_seconds.append(time.perf_counter() - wall)
                bulk.wait(lambda: len(bulk.ingested) == len(files), timeout=1800)
                cpu = time.process_time() - cpu
                wall = max(bulk.ingested.values()) - wall
            summary = engine.dataset_summary(name)
            sizes[name] = (summary.documents, summary.passages)
            batch_files.append(bulk.batches)
            return wall, cpu

        sizes: dict[str, tuple[int, int]] = {}
        copy_seconds: list[float] = []
        batch_files: list[list[int]] = []
        plain_runs: list[tuple[float, float]] = []
        watch_runs: list[tuple[float, float]] = []
        loads: list[float] = []
        for r in range(args.rounds):
            loads.append(os.getloadavg()[0])
            if r % 2 == 0:
                plain_runs.append(plain(f"plain-{r}"))
                watch_runs.append(watched(f"watched-{r}"))
            else:
                watch_runs.append(watched(f"watched-{r}"))
                plain_runs.append(plain(f"plain-{r}"))
        loads.append(os.getloadavg()[0])
        if len(set(sizes.values())) != 1:
            raise SystemExit(f"the datasets differ: {sizes}")
        passages = next(iter(sizes.values()))[1]
        engine.close()

    n = len(files)
    plain_wall = [w for w, _ in plain_runs]
    watch_wall = [w for w, _ in watch_runs]
    ratios = [p / w for p, w in zip(plain_wall, watch_wall)]
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
        "plain_seconds": [round(x, 2) for x in plain_wall],
        "watch_seconds": [round(x, 2) for x in watch_wall],
        "plain_cpu_seconds": [round(c, 2) for _, c in plain_runs],
        "watch_cpu_seconds": [round(c, 2) for _, c in watch_runs],
        "watch_copy_seconds": [round(x, 2) for x in copy_seconds],
        "watch_batch_files": batch_files,
        "plain_files_per_s": round(n / statistics.median(plain_wall), 2),
        "watch_files_per_s": round(n / statistics.median(watch_wall), 2),
        "round_ratios": [round(x, 3) for x in ratios],
        "ratio": round(statistics.median(ratios), 3),
        "cpu_ratio": round(sum(c for _, c in plain_runs) / sum(c for _, c in watch_runs), 3),
        # This machine may be shared: a load average well above the core count means the rounds were contended.
        "load_average_1min": [round(x, 2) for x in loads],
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"drop -> queryable (settle {settle:g} s, {len(latencies)} drops): median {result['latency_median_s']} s "
          f"(min {result['latency_min_s']}, max {result['latency_max_s']}); "
          f"to the ingested event {result['latency_to_event_median_s']} s")
    print(f"{n} files, {passages} passages, {args.rounds} rounds")
    print(f"{'':22}{'files/s':>9}  {'wall s per round':<24}{'CPU s per round':<24}")
    for label, runs, rate in (("plain Engine.ingest", plain_runs, result["plain_files_per_s"]),
                              ("watched folder", watch_runs, result["watch_files_per_s"])):
        walls = " ".join(f"{w:.1f}" for w, _ in runs)
        cpus = " ".join(f"{c:.1f}" for _, c in runs)
        print(f"{label:22}{rate:>9}  {walls:<24}{cpus:<24}")
    print(f"ratio (plain / watched wall seconds, median of rounds): {result['ratio']}   target >= 0.9   "
          f"rounds {result['round_ratios']}; CPU ratio {result['cpu_ratio']}")
    print(f"watcher batches {batch_files}; load average {result['load_average_1min']} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
