"""The end-to-end half of tests/unit/test_tui_snippets.py (a model, processes or servers there):
Snippets as a reader sees them: Markdown shown as its text (code kept), the query's words and the hit's
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import Input, Static

from engine import Engine, load_settings
from engine.records import QueryResult
from engine.text.inputs import from_file
from kx_tui.render import ANSWER_STYLE
from kx_tui.tui.app import SAMPLES, KxApp
from kx_tui.tui.screens.hit_detail import PassageDetailScreen
from kx_tui.tui.widgets.results import ResultsList

from .helpers import HashEmbedder
from .unit.test_tui_snippets import _with_answer  # noqa: F401 - helpers and fixtures


@pytest.mark.slow  # drives the whole Textual app: seconds
async def test_the_hit_list_and_passage_view_show_markdown_as_text_and_the_answer(kx_home: Path) -> None:
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    engine.ingest("handbook", [from_file(f, engine.settings.max_document_bytes) for f in sorted(SAMPLES.glob("*.md"))])

    class Answering:
        """The engine, its hits carrying a best-answer span: the passage's first sentence."""

        def __init__(self, inner: Engine) -> None:
            self._inner = inner

        def query(self, *args, **kwargs) -> QueryResult:
            result = self._inner.query(*args, **kwargs)
            hits = []
            for hit in result.hits:
                end = hit.text.find(". ")
                hits.append(_with_answer(hit, (hit.char_start, hit.char_start + end + 1) if end > 0 else None))
            return dataclasses.replace(result, hits=hits)

        def __getattr__(self, name):
            return getattr(self._inner, name)

    app = KxApp(Answering(engine), settings=engine.settings, samples=None)  # type: ignore[arg-type]
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(3):
            await pilot.pause()
            await app.workers.wait_for_complete()
        app.query_one("#query", Input).focus()
        await pilot.press(*"refund policy", "enter")
        for _ in range(3):
            await pilot.pause()
            await app.workers.wait_for_complete()
        results = app.query_one(ResultsList)
        hits = app.screen.result.hits
        assert hits and any("#" in h.text or "**" in h.text for h in hits)   # the raw passages carry markup
        for i in range(len(hits)):
            preview = results.get_option_at_index(i).prompt.renderables[1].renderable
            assert "**" not in preview.plain and "## " not in preview.plain and not preview.plain.startswith("#")
        first = results.get_option_at_index(0).prompt.renderables[1].renderable
        assert any(str(s.style) == ANSWER_STYLE for s in first.spans)
        await pilot.press("escape", "enter")
        for _ in range(3):
            await pilot.pause()
            await app.workers.wait_for_complete()
        screen = app.screen
        assert isinstance(screen, PassageDetailScreen)
        shown = screen.query_one("#detail-hit", Static).content
        assert isinstance(shown, Text) and "**" not in shown.plain
        assert any("dark_green" in str(s.style) for s in shown.spans)
    engine.close()
