"""The workbench when something fails, arrives late or holds odd text: a clear message, never a stale answer or a crash.

Driven through App.run_test() and Pilot key presses over a real engine (the
tiny HashEmbedder for speed); a query that must arrive late is held at a gate
the test opens.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from textual.widgets import Input, Static

from engine import Engine, load_settings
from engine.text.inputs import from_text
from kx_tui.tui.app import KxApp
from kx_tui.tui.screens.compare import CompareScreen
from kx_tui.tui.screens.document_table import DocumentsScreen

from ..helpers import HashEmbedder, settle
from .test_tui import _recording_notify, _text_of

SIZE = (120, 40)


def _engine() -> Engine:
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    engine.ingest("alpha", [from_text("the red fox jumps over the lazy dog " * 10, "fox"),
                            from_text("blue whales swim in the cold sea", "whale")])
    return engine


def _gated(engine: Engine, gates: dict[str, threading.Event]) -> None:
    """Each query whose text has a gate waits for it to open (at most 10 s) before it runs."""
    query = engine.query

    def waiting(dataset, text, *args, **kwargs):
        if text in gates:
            gates[text].wait(10)
        return query(dataset, text, *args, **kwargs)

    engine.query = waiting  # type: ignore[method-assign]


def _status(app: KxApp) -> str:
    return _text_of(app.query_one("#query-status", Static).content)


@pytest.mark.slow  # drives the whole Textual app: seconds
async def test_compare_shows_a_query_with_brackets_and_escapes_as_typed(kx_home: Path) -> None:
    query = "[/] [bold]fox[/bold] \x1b[31mred"
    app = KxApp(_engine(), settings=load_settings({}), samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        app.query_one("#query", Input).value = query
        await pilot.press("enter")
        await settle(app, pilot, rounds=3)
        await pilot.press("escape", "c")
        await settle(app, pilot, rounds=3)
        assert isinstance(app.screen, CompareScreen) and app.is_running
        title = _text_of(app.screen.query_one("#compare-title", Static).content)
        assert "“[/] [bold]fox[/bold] ␛[31mred”" in title   # the words as typed: not markup, not an escape


@pytest.mark.slow  # drives the whole Textual app: seconds
async def test_documents_of_a_dataset_deleted_on_disk_say_why_they_cannot_be_listed(kx_home: Path) -> None:
    app = KxApp(_engine(), settings=load_settings({}), samples=None)
    seen = _recording_notify(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        shutil.rmtree(kx_home / "datasets" / "alpha")
        await pilot.press("escape", "d")
        await settle(app, pilot, rounds=3)
        assert isinstance(app.screen, DocumentsScreen) and app.is_running
        errors = [m for m, severity in seen if severity == "error"]
        assert errors and "'alpha' does not exist" in errors[-1]
        count = _text_of(app.screen.query_one("#documents-count", Static).content)
        assert "loading" not in count and "could not be listed" in count
