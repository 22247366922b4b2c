"""TUI responsiveness: app start to first paint, and keystroke to results on SciFact.

    python benchmarks/tui.py [--starts 5] [--queries 50]

Drives the real app headless through Textual's Pilot (App.run_test) over the
SciFact dataset in benchmarks/out/home (ingested once by the other
benchmarks, or here). "First paint" is the time from creating the app to its
first screen showing the datasets sidebar filled; "keystroke to results" is
the time from pressing Enter in the query box to the results list holding
that query's answer, after one warm-up query (which loads the model).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from common import DATA, HOME, REPO, ensure_dataset, percentile


async def first_paint(starts: int) -> list[float]:
    from engine import Engine, load_settings
    from kx_tui.app import KxApp
    from kx_tui.widgets.datasets import DatasetList

    times = []
    for _ in range(starts):
        started = time.perf_counter()
        app = KxApp(Engine(load_settings({"home": str(HOME)})), samples=None)
        async with app.run_test(size=(120, 40)) as pilot:
            while not app.query_one(DatasetList).summaries:
                await pilot.pause(0.005)
            times.append((time.perf_counter() - started) * 1000)
        app.backend.close()
    return times


async def keystroke_to_results(queries: list[str]) -> list[float]:
    from textual.widgets import Input

    from engine import Engine, load_settings
    from kx_tui.app import KxApp
    from kx_tui.widgets.datasets import DatasetList

    app = KxApp(Engine(load_settings({"home": str(HOME)})), samples=None)
    times = []
    async with app.run_test(size=(120, 40)) as pilot:
        while not app.query_one(DatasetList).summaries:
            await pilot.pause(0.005)
        app.query_one(DatasetList).select_name("scifact")
        await pilot.pause()
        box = app.query_one("#query", Input)
        for i, text in enumerate(queries):
            box.focus()
            box.value = text
            await pilot.pause()
            started = time.perf_counter()
            await pilot.press("enter")
            while app.result is None or app.result.query != text:
                await pilot.pause(0.001)
            await pilot.pause()  # the results list has been redrawn
            assert app.result.dataset == "scifact", app.result.dataset
            if i > 0:  # the first one loads the model
                times.append((time.perf_counter() - started) * 1000)
    app.backend.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()

    from engine.evaluation import read_queries

    ensure_dataset("scifact")
    queries = list(read_queries(DATA / "scifact" / "queries.jsonl").values())[: args.queries + 1]
    paint = asyncio.run(first_paint(args.starts))
    keys = asyncio.run(keystroke_to_results(queries))
    result = {
        "first_paint_ms": {"p50": round(percentile(paint, 50), 1), "p95": round(percentile(paint, 95), 1),
                           "runs": len(paint)},
        "keystroke_to_results_ms": {"p50": round(percentile(keys, 50), 1), "p95": round(percentile(keys, 95), 1),
                                    "queries": len(keys)},
    }
    (REPO / "benchmarks" / "out" / "tui.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
