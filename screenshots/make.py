"""Regenerate the SVG screenshots of the TUI's main screens into this folder.

    python screenshots/make.py            # the bundled model, as a user sees it
    python screenshots/make.py --hash     # the tests' tiny embedder: fast, no torch
    python screenshots/make.py --size 80x24   # a small terminal, into screenshots/80x24/

Runs the real app headless (App.run_test) over a throwaway KX_HOME holding the
shipped handbook samples, drives it with key presses, and saves one SVG per
screen: first-run (empty home), main (a query's answer), detail, compare,
documents (the dataset's documents), document (one, its passages marked), help, agent, and watch (the
inbox panel after a file dropped into it was added).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SIZE = (140, 45)
QUERY = "how long do customers have to ask for a refund"


async def _settle(app, pilot) -> None:
    for _ in range(4):
        await pilot.pause()
        await app.workers.wait_for_complete()
    await pilot.pause()


async def _until_batch(app, pilot) -> None:
    from kx_tui.tui.widgets.activity import ActivityLog

    log = app.screen.query_one(ActivityLog)
    for _ in range(600):   # the watcher's own threads, and the model embedding the file: up to a minute
        if any(line.startswith("[bold]batch") for line in log.lines_written):
            break
        await pilot.pause(0.1)
    await _settle(app, pilot)


async def make(use_hash: bool, out: Path, size: tuple[int, int] = SIZE) -> list[Path]:
    from engine import Engine, load_settings
    from kx_tui.tui.app import KxApp

    embedder = None
    if use_hash:
        sys.path.insert(0, str(REPO))
        from tests.helpers import HashEmbedder

        embedder = HashEmbedder()
    saved: list[Path] = []

    def engine() -> Engine:
        return Engine(load_settings({}), embedder=embedder) if embedder else Engine(load_settings({}))

    def shot(app, name: str) -> None:
        saved.append(Path(app.save_screenshot(filename=f"{name}.svg", path=str(out))))

    with tempfile.TemporaryDirectory() as home:
        os.environ["KX_HOME"] = str(Path(home) / "empty")
        backend = engine()
        app = KxApp(backend, settings=backend.settings, samples=None)
        async with app.run_test(size=size) as pilot:
            await _settle(app, pilot)
            shot(app, "first-run")
        app.backend.close()

        os.environ["KX_HOME"] = str(Path(home) / "kx")
        backend = engine()
        app = KxApp(backend, settings=backend.settings)  # first run: ingests samples/handbook
        async with app.run_test(size=size) as pilot:
            await _settle(app, pilot)
            await pilot.press(*QUERY)
            await pilot.press("enter")
            await _settle(app, pilot)
            await pilot.press("escape")
            await pilot.pause()
            shot(app, "main")
            await pilot.press("down", "enter")
            await _settle(app, pilot)
            shot(app, "detail")
            await pilot.press("escape", "c")
            await _settle(app, pilot)
            shot(app, "compare")
            await pilot.press("escape", "escape", "d")
            await _settle(app, pilot)
            shot(app, "documents")
            await pilot.press(*"refunds", "enter")
            await _settle(app, pilot)
            await pilot.press("n", "n")
            await pilot.pause()
            shot(app, "document")
            await pilot.press("escape", "escape", "escape", "question_mark")
            await pilot.pause()
            shot(app, "help")
            await pilot.press("escape", "a", "enter")   # the agent, on the query's words as its goal
            await _settle(app, pilot)
            shot(app, "agent")
            await pilot.press("escape", "escape", "w")   # watch the inbox, and drop a file into it
            await _settle(app, pilot)
            inbox = Path(os.environ["KX_HOME"]) / "inbox" / "handbook"
            text = (REPO / "samples" / "handbook" / "remote-work.md").read_text(encoding="utf-8")
            (inbox / "working-from-home.md").write_text(text.replace("# Remote Work", "# Working from home", 1),
                                                        encoding="utf-8")
            await _until_batch(app, pilot)
            shot(app, "watch")
            await pilot.press("w")
            await _settle(app, pilot)
        app.backend.close()
    return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hash", action="store_true", help="use the tests' tiny embedder instead of the model")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the SVGs (default: this one; screenshots/COLSxROWS/ for another --size)")
    parser.add_argument("--size", default=f"{SIZE[0]}x{SIZE[1]}", help="terminal columns x rows, e.g. 80x24")
    args = parser.parse_args()
    columns, rows = (int(n) for n in args.size.lower().split("x"))
    out = args.out or (HERE if (columns, rows) == SIZE else HERE / f"{columns}x{rows}")
    sys.path.insert(0, str(REPO))
    out.mkdir(parents=True, exist_ok=True)
    for path in asyncio.run(make(args.hash, out, (columns, rows))):
        print(path)


if __name__ == "__main__":
    main()
