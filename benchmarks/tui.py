"""TUI responsiveness: app start to first paint, keystroke to results, the first query after start, and a
real first run in a terminal.

    python benchmarks/tui.py [--starts 5] [--queries 50] [--collection scifact] [--home DIR]
    python benchmarks/tui.py --handbook [--queries 30]   # no BEIR data needed: the shipped samples
    python benchmarks/tui.py --tmux-runs 3 [--fresh-model] --starts 0 --queries 0 --first-queries 0

"First run in tmux" launches the real `kx` command in a tmux pane (80x24) on
an empty, fresh KX_HOME, types a query the moment the query box is on screen
and reads the pane every 50 ms: when the model is ready, when the sample
dataset is ready, when the answer (the status line's "N hits in") shows. The
target: the answer no later than 1 s after the dataset it asks is ready. The
export of the model's ONNX graph is shared between runs (KX_MODEL_CACHE)
unless --fresh-model, which pays it in every run as a brand-new machine does.

Drives the real app headless through Textual's Pilot (App.run_test) over a
BEIR collection's dataset in benchmarks/out/home (ingested once by the other
benchmarks, or here). "First paint" is the time from creating the app to its
first screen showing the datasets sidebar filled. "Keystroke to results" is
the time from pressing Enter in the query box to the results list holding
that query's answer, with the model already warm (the app loads it at start)
and one query discarded (it opens the dataset's readers). "First query after
start" types a query the moment the sidebar is filled, while the model is
still loading, and measures from creating the app to its answer showing; the
target is the model's load time (as the app's warm-up measured it) + 150 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from common import DATA, HOME, REPO, ensure_dataset, percentile

SAMPLES = REPO / "samples" / "handbook"
HANDBOOK_QUERIES = [
    "how long do customers have to ask for a refund", "annual leave days", "who approves travel expenses",
    "laptop encryption", "home office stipend", "first week onboarding", "store credit limit",
    "lost device report", "working from abroad", "public holidays", "economy class flights",
    "password manager", "equipment return", "core hours", "refund to the original payment method",
]


def _app(home: Path):
    from engine import Engine, load_settings
    from kx_tui.tui.app import KxApp

    engine = Engine(load_settings({"home": str(home)}))
    return KxApp(engine, settings=engine.settings, samples=None)


async def _sidebar_filled(app, pilot) -> None:
    from kx_tui.tui.widgets.datasets import DatasetList

    while not app.query_one(DatasetList).summaries:
        await pilot.pause(0.005)


async def _answered(app, pilot, text: str) -> None:
    main = app.screen_stack[0]
    while main.result is None or main.result.query != text:
        await pilot.pause(0.001)
    await pilot.pause()  # the results list has been redrawn


async def first_paint(home: Path, starts: int) -> list[float]:
    times = []
    for _ in range(starts):
        started = time.perf_counter()
        app = _app(home)
        async with app.run_test(size=(120, 40)) as pilot:
            await _sidebar_filled(app, pilot)
            times.append((time.perf_counter() - started) * 1000)
        app.backend.close()
    return times


async def keystroke_to_results(home: Path, collection: str, queries: list[str]) -> list[float]:
    from textual.widgets import Input

    from kx_tui.tui.widgets.datasets import DatasetList

    app = _app(home)
    times = []
    async with app.run_test(size=(120, 40)) as pilot:
        await _sidebar_filled(app, pilot)
        app.query_one(DatasetList).select_name(collection)
        while not app.warmup.ready:
            await pilot.pause(0.01)
        await pilot.pause()
        box = app.query_one("#query", Input)
        for i, text in enumerate(queries):
            box.focus()
            box.value = text
            await pilot.pause()
            started = time.perf_counter()
            await pilot.press("enter")
            await _answered(app, pilot, text)
            assert app.screen_stack[0].result.dataset == collection
            if i > 0:  # the first one opens the dataset's readers
                times.append((time.perf_counter() - started) * 1000)
    app.backend.close()
    return times


async def first_query(home: Path, collection: str, text: str) -> dict[str, float]:
    """From creating the app to the answer of a query typed at once, against the model's own load time."""
    from textual.widgets import Input

    from kx_tui.tui.widgets.datasets import DatasetList

    started = time.perf_counter()
    app = _app(home)
    async with app.run_test(size=(120, 40)) as pilot:
        await _sidebar_filled(app, pilot)
        app.query_one(DatasetList).select_name(collection)
        await pilot.pause()
        box = app.query_one("#query", Input)
        box.focus()
        box.value = text
        submitted = time.perf_counter()
        await pilot.press("enter")
        await _answered(app, pilot, text)
        answered = time.perf_counter()
        warmup = app.warmup
        assert warmup.finished_at is not None and warmup.loaded, "the model did not load"
        result = {
            "query_submitted_ms": (submitted - started) * 1000,
            "model_ready_ms": (warmup.finished_at - started) * 1000,
            "model_load_ms": warmup.seconds * 1000,
            "first_answer_ms": (answered - started) * 1000,
        }
    app.backend.close()
    result["answer_after_model_ready_ms"] = result["first_answer_ms"] - result["model_ready_ms"]
    return {k: round(v, 1) for k, v in result.items()}


BENCH_MODELS = HOME.parent / "models"   # the ONNX export shared by the tmux runs (unless --fresh-model)


def _pane(session: str) -> str:
    import subprocess

    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout


def first_run_in_tmux(fresh_model: bool, model_cache: Path, query: str, timeout: float = 600) -> dict:
    """`kx` on an empty KX_HOME in an 80x24 tmux pane; the query typed as soon as the box shows."""
    import os
    import shutil
    import subprocess
    import tempfile
    import uuid

    if shutil.which("tmux") is None:
        raise SystemExit("tmux is not installed (apt-get install -y tmux)")
    home = Path(tempfile.mkdtemp(prefix="kx-tui-bench-"))
    session = f"kxbench-{uuid.uuid4().hex[:8]}"
    env = {"KX_HOME": str(home / "kx"), "KX_MODEL_CACHE": str(home / "models" if fresh_model else model_cache),
           "PYTHONPATH": str(REPO), "TERM": "xterm-256color"}
    command = " ".join(f"{k}={v}" for k, v in env.items()) + f" {sys.executable} -m kx_tui"
    seen: dict[str, float] = {}
    lines: list[str] = []
    started = time.perf_counter()
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24", command], check=True,
                   env={**os.environ, "TMUX": ""})
    try:
        while time.perf_counter() - started < timeout:
            pane = _pane(session)
            now = (time.perf_counter() - started) * 1000
            if "box_shown_ms" not in seen and "Ask a question" in pane:
                seen["box_shown_ms"] = now
                subprocess.run(["tmux", "send-keys", "-t", session, "-l", query], check=True)
                subprocess.run(["tmux", "send-keys", "-t", session, "Enter"], check=True)
                seen["query_sent_ms"] = (time.perf_counter() - started) * 1000
            for line in pane.splitlines():
                if "first run: building" in line or "/4 " in line:
                    lines.append(line.strip())   # the progress line as the user saw it
            if "model_ready_ms" not in seen and "model ready in" in pane:
                seen["model_ready_ms"] = now
            if "dataset_ready_ms" not in seen and "'handbook' is ready" in pane:
                seen["dataset_ready_ms"] = now
            if "hits in" in pane or " hit in " in pane:
                seen["answer_ms"] = now
                break
            if "no dataset selected" in pane:
                seen["dropped"] = now   # the bug this measures against: the query was thrown away
            time.sleep(0.05)
        seen["answer_after_dataset_ready_ms"] = seen.get("answer_ms", float("nan")) - seen.get("dataset_ready_ms",
                                                                                               float("nan"))
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
    result: dict = {k: round(v, 1) for k, v in seen.items()}
    result["progress_lines_seen"] = list(dict.fromkeys(lines))[:12]
    return result


def handbook_home() -> Path:
    """A throwaway KX_HOME holding the shipped samples as dataset "handbook" (the bundled model)."""
    import tempfile

    from engine import Engine, load_settings
    from engine.text.inputs import from_file

    home = Path(tempfile.mkdtemp(prefix="kx-tui-handbook-"))
    engine = Engine(load_settings({"home": str(home)}))
    engine.ingest("handbook", [from_file(f, engine.settings.max_document_bytes) for f in sorted(SAMPLES.glob("*.md"))])
    engine.close()
    return home


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--first-queries", type=int, default=3, help="fresh app starts for the first-query figure")
    parser.add_argument("--collection", default="scifact", help="BEIR collection under shared/data")
    parser.add_argument("--home", type=Path, default=HOME, help="KX_HOME holding (or to hold) the dataset")
    parser.add_argument("--handbook", action="store_true",
                        help="measure over the shipped handbook samples (a throwaway home) instead of a BEIR set")
    parser.add_argument("--tmux-runs", type=int, default=0, help="real first runs of `kx` in tmux (0: none)")
    parser.add_argument("--fresh-model", action="store_true",
                        help="in tmux, export the model's ONNX graph in every run (as on a new machine)")
    args = parser.parse_args()

    from engine.evaluation import read_queries

    if args.handbook:
        args.home, args.collection = handbook_home(), "handbook"
        pool = HANDBOOK_QUERIES * (args.queries // len(HANDBOOK_QUERIES) + 2)
        queries = pool[: args.queries + 1]
    elif args.starts or args.queries or args.first_queries:
        ensure_dataset(args.collection, args.home)
        queries = list(read_queries(DATA / args.collection / "queries.jsonl").values())[: args.queries + 1]
    result: dict = {"collection": args.collection} if (args.starts or args.queries or args.first_queries) else {}
    if args.starts:
        paint = asyncio.run(first_paint(args.home, args.starts))
        result["first_paint_ms"] = {"p50": round(percentile(paint, 50), 1), "p95": round(percentile(paint, 95), 1),
                                    "runs": len(paint)}
    if args.queries:
        keys = asyncio.run(keystroke_to_results(args.home, args.collection, queries))
        result["keystroke_to_results_ms"] = {"p50": round(percentile(keys, 50), 1),
                                             "p95": round(percentile(keys, 95), 1), "queries": len(keys)}
    if args.first_queries:
        firsts = [asyncio.run(first_query(args.home, args.collection, queries[i % len(queries)]))
                  for i in range(args.first_queries)]
        after = [f["answer_after_model_ready_ms"] for f in firsts]
        result["first_query_after_start"] = {"answer_after_model_ready_ms_p50": round(percentile(after, 50), 1),
                                             "target_ms": 150, "runs": firsts}
    if args.tmux_runs:
        cache = BENCH_MODELS
        runs = [first_run_in_tmux(args.fresh_model, cache, HANDBOOK_QUERIES[0]) for _ in range(args.tmux_runs)]
        after = [r["answer_after_dataset_ready_ms"] for r in runs]
        result["first_run_in_tmux"] = {
            "fresh_model_export": args.fresh_model,
            "answer_ms_p50": round(percentile([r.get("answer_ms", float("nan")) for r in runs], 50), 1),
            "answer_after_dataset_ready_ms_p50": round(percentile(after, 50), 1), "target_ms": 1000,
            "dropped_queries": sum("dropped" in r for r in runs), "runs": runs}
    out = REPO / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "tui.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
