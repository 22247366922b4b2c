"""Listing a big dataset's documents: the engine call behind `kx documents`, and the TUI's document browser.

    python benchmarks/scaling_browse.py --home DIR --dataset corpus   # prints one JSON line

Run by scaling.py in a fresh process (its peak RSS is reported too):

- `list_documents`: the first page (100, what `kx documents` shows), a page
  at the end (offset = documents - 100) and every document a page of 1,000
  at a time (`kx documents --versions all`, `kx retire`'s walk).
- The browser (kx_tui/tui/screens/document_table.py) under Textual's
  run_test: from pushing the screen to its first screen filled (the first
  page of 1,000 documents in the table and the count line), to every
  document loaded (a page of 1,000 at a time, behind the first screen),
  then one character typed into its filter (the table refilled), then
  PageDown in the table (the median of five).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from common import percentile
from scaling_floor import peak_rss_mb


def listing(home: Path, dataset: str) -> dict:
    from engine import load_settings
    from engine.backend import every_document
    from engine.open_backend import open_backend

    backend = open_backend(load_settings({"home": str(home), "embed_model": "none"}, env={}), embedder=None)
    started = time.perf_counter()
    first = backend.list_documents(dataset, 0, 100)
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    count = sum(1 for _ in every_document(backend, dataset))
    walk_s = time.perf_counter() - started
    pages = []
    for _ in range(5):
        started = time.perf_counter()
        backend.list_documents(dataset, max(0, count - 100), 100)
        pages.append(time.perf_counter() - started)
    backend.close()
    assert len(first) == min(100, count)
    return {"documents": count, "list_first_page_s": round(first_s, 3), "list_last_page_s": round(
        statistics.median(pages), 3), "list_every_document_s": round(walk_s, 2)}


async def browser(home: Path, dataset: str) -> dict:
    from textual.widgets import DataTable, Static

    from engine import Engine, load_settings
    from kx_tui.tui.app import KxApp
    from kx_tui.tui.screens.document_table import DocumentsScreen

    engine = Engine(load_settings({"home": str(home), "embed_model": "none"}, env={}))
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = DocumentsScreen(app.backend, dataset)
        started = time.perf_counter()
        await app.push_screen(screen)
        count = screen.query_one("#documents-count", Static)
        while screen.documents is None or str(count.render()).startswith("loading"):
            await pilot.pause(0.01)
        await pilot.pause()
        first_screen = time.perf_counter() - started
        while not screen.complete:   # the first page shows while the rest is read
            await pilot.pause(0.01)
        await pilot.pause()
        every_page = time.perf_counter() - started
        table = screen.query_one(DataTable)
        rows = table.row_count
        started = time.perf_counter()
        await pilot.press("7")   # the filter has focus: names with a 7
        await pilot.pause()
        filtered = time.perf_counter() - started
        table.focus()
        await pilot.pause()
        paging = []
        for _ in range(5):
            started = time.perf_counter()
            await pilot.press("pagedown")
            await pilot.pause()
            paging.append((time.perf_counter() - started) * 1000)
        shown = len(screen.shown)
    app.backend.close()
    return {"browser_first_screen_s": round(first_screen, 2), "browser_every_page_s": round(every_page, 2),
            "browser_rows": rows,
            "browser_filter_key_s": round(filtered, 2), "browser_filter_matches": shown,
            "browser_pagedown_ms": round(percentile(paging, 50), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", required=True)
    args = parser.parse_args()
    out = listing(args.home, args.dataset)
    out.update(asyncio.run(browser(args.home, args.dataset)))
    out["browse_peak_rss_mb"] = round(peak_rss_mb())
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
