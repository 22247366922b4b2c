"""The workbench's structure as a user meets it: warm start, the document browser, compare's passage pane, help.

Driven through App.run_test() and Pilot key presses over a real engine (the
tiny HashEmbedder for speed; a stand-in that blocks until released, to catch
a query typed while the model is still loading).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest
from rich.console import Console
from textual.widgets import Input, Static

from engine import Engine, load_settings
from engine.text.inputs import from_file
from kx_tui.tui.app import SAMPLES, KxApp
from kx_tui.tui.screens.document_text import blocks
from kx_tui.tui.screens.main import MainScreen

from ..helpers import HashEmbedder, settle

SIZE = (120, 40)


class BlockingEmbedder(HashEmbedder):
    """HashEmbedder whose every encode waits until the test calls `release()` (a model still loading)."""

    def __init__(self) -> None:
        super().__init__()
        self.released = threading.Event()
        self.waiting = threading.Event()   # set once something is stuck in encode

    def release(self) -> None:
        self.released.set()

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress=None) -> np.ndarray:
        self.waiting.set()
        assert self.released.wait(30), "the test never released the embedder"
        return super().encode(texts, batch_size, progress)


def _plain(renderable) -> str:
    console = Console(record=True, width=400, color_system=None)
    console.print(renderable)
    return " ".join(console.export_text().split())


def _status(app: KxApp) -> str:
    return _plain(app.screen_stack[0].query_one("#query-status", Static).content)


def _main(app: KxApp) -> MainScreen:
    screen = app.screen_stack[0]
    assert isinstance(screen, MainScreen)
    return screen


async def _ask(app: KxApp, pilot, text: str) -> None:
    app.query_one("#query", Input).focus()
    await pilot.press(*text, "enter")
    await settle(app, pilot)


async def _until(pilot, condition, what: str, seconds: float = 20.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _handbook(engine: Engine) -> None:
    engine.ingest("handbook", [from_file(f, engine.settings.max_document_bytes) for f in sorted(SAMPLES.glob("*.md"))])


@pytest.fixture
def handbook_home(kx_home: Path) -> Path:
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    _handbook(engine)
    engine.close()
    return kx_home


def test_the_first_runs_progress_line_gives_an_eta_only_from_something_measured() -> None:
    from kx_tui.tui.warmup import BuildProgress

    now = [100.0]
    build = BuildProgress("handbook", 6, clock=lambda: now[0])
    assert build.line() == "first run: building 'handbook' from 6 samples · 1/4 loading the model · 0 s"
    build.noted("exporting all-MiniLM-L6-v2 to ONNX for fast embedding (once, about 10 s) into /x")
    now[0] += 4
    assert build.eta() == 6.0
    assert "exporting it to ONNX, once" in build.line() and "about 6 s left" in build.line()
    build.model_ready()
    now[0] += 2
    assert build.eta() is None and "2/4 reading the documents · 6 s" in build.line()
    build.progressed("embedding", 0, 40)
    assert build.eta() is None  # no rate yet: no ETA
    now[0] += 2
    build.progressed("embedding", 10, 40)
    assert build.eta() == 6.0  # 10 passages in 2 s, 30 to go
    assert "3/4 embedding passages 10/40" in build.line() and "about 6 s left" in build.line()
    build.progressed("indexing dense", 0, 1)
    assert "4/4 indexing (dense)" in build.line() and "left" not in build.line()


def test_passage_blocks_cover_the_text_once_and_mark_the_overlap() -> None:
    from engine.records import PassageSpan

    text = "abcdefghijklmnopqrstuvwxyz"
    spans = [PassageSpan("p0", 0, 3, 0, 10), PassageSpan("p1", 1, 3, 7, 18), PassageSpan("p2", 2, 3, 20, 26)]
    out = blocks(text, spans)
    assert "".join(t.plain for _s, t in out) == text          # every character once, in order
    assert [s.ref if s else None for s, _t in out] == ["p0", "p1", "p2"]
    second = out[1][1]
    underlined = "".join(second.plain[span.start:span.end] for span in second.spans if "underline" in str(span.style))
    assert underlined == "hij"                                # p1's start overlaps p0's end: 7..10
    dim = "".join(second.plain[span.start:span.end] for span in second.spans if str(span.style) == "dim")
    assert dim == "st"                                        # 18..20 is in no passage


def test_a_markdown_documents_blocks_show_its_text_and_still_start_at_their_passages() -> None:
    from engine.records import PassageSpan

    text = "# Refunds\n\nAsk within **30 days**.\n\n## RMA-7\n\nSee [the form](http://x/f) first."
    second = text.index("## RMA-7")
    spans = [PassageSpan("p0", 0, 2, 0, second), PassageSpan("p1", 1, 2, second, len(text))]
    out = blocks(text, spans, markdown=True)
    assert [t.plain for _s, t in out] == ["Refunds\n\nAsk within 30 days.\n\n", "RMA-7\n\nSee the form first."]
    bold = "".join(out[0][1].plain[span.start:span.end] for span in out[0][1].spans if "bold" in str(span.style))
    assert "30 days" in bold                                  # the emphasis kept as a style, its marks gone
    assert [t.plain for _s, t in blocks(text, spans)][1].startswith("## RMA-7")   # raw unless asked


def test_a_newer_queued_message_replaces_an_older_one_and_nothing_else_does() -> None:
    from engine.watch.events import Ingested
    from kx_tui.tui.messages import WatchFileDone, WatchQueued

    older, newer = WatchQueued("/in/a.md", 1), WatchQueued("/in/b.md", 2)
    assert older.can_replace(newer)           # the newer count says everything the older one did
    done = WatchFileDone(Ingested("/in/a.md", "a", "ref", 1, 1), 1)
    assert not older.can_replace(done) and not done.can_replace(newer) and not done.can_replace(done)


def test_the_sidebar_marks_an_unreadable_dataset_and_shows_why() -> None:
    """A dataset listed with an error (a damaged catalogue) reads as unreadable, not as an empty dataset, and
    its error's control characters are shown, not sent to the terminal."""
    import asyncio

    from textual.app import App, ComposeResult

    from engine.records import DatasetSummary
    from kx_tui.tui.widgets.datasets import DatasetList

    class Probe(App):
        def compose(self) -> ComposeResult:
            yield DatasetList()

    bad = DatasetSummary(name="e1", documents=0, passages=0, embed_model=None, created_at=0.0, fingerprint=None,
                         path="/h/e1", error="DATA_LOSS: the fingerprint stored in /h/e1 is damaged \x1b[31m")
    good = DatasetSummary(name="ok", documents=1, passages=1, embed_model="m", created_at=0.0, fingerprint=None,
                          path="/h/ok")

    async def shown() -> dict[str, str]:
        app = Probe()
        async with app.run_test() as pilot:
            listed = app.query_one(DatasetList)
            listed.show([bad, good])
            await pilot.pause()
            return {name: " ".join(line.plain for line in listed.get_option(name).prompt.renderables)
                    for name in ("e1", "ok")}

    lines = asyncio.run(shown())
    assert "unreadable" in lines["e1"] and "DATA_LOSS" in lines["e1"] and "\x1b" not in lines["e1"]
    assert "0 docs" not in lines["e1"] and "1 docs · 1 passages" in lines["ok"]
