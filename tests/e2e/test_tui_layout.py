"""80×24 without cut fields: footers that keep Help and Quit, hit headers, compare's chunk column, the documents
table, and the agent's steps (wrapped, with focus left where the user put it). Pilot over a real engine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Input, OptionList, Static

from engine import Engine, load_settings
from engine.text.inputs import from_text
from kx_tui.tui.app import KxApp
from kx_tui.tui.screens.agent import AgentScreen
from kx_tui.tui.screens.compare import CompareScreen
from kx_tui.tui.screens.document_table import DocumentsScreen
from kx_tui.tui.widgets.footer import KeysFooter
from kx_tui.tui.widgets.results import ResultsList

from .test_tui_workbench import BlockingEmbedder, _until

SMALL = (80, 24)
LONG_NAME = "policies/customer-service/refunds-and-returns-for-enterprise-customers"
TEXTS = {
    LONG_NAME: "Customers may ask for a refund within 30 days of purchase. Refunds go back to the original "
               "payment method within five working days.",
    "leave": "Every employee has 25 days of annual leave a year. Unused days carry over until March.",
    "security": "Laptops must use full-disk encryption. Report a lost device within one hour.",
}


def _engine(embedder=None) -> Engine:
    from ..helpers import HashEmbedder

    engine = Engine(load_settings({"chunk_size": 200, "chunk_overlap": 40}), embedder=embedder or HashEmbedder())
    engine.ingest("policies", [from_text(text, name) for name, text in TEXTS.items()])
    return engine


async def _settle(app: KxApp, pilot) -> None:
    for _ in range(4):
        await pilot.pause()
        await app.workers.wait_for_complete()
    await pilot.pause()


def _screen_text(app: KxApp) -> list[str]:
    return [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]


def _footer_fits(app: KxApp, *keys: str) -> None:
    footer = app.screen.query_one(KeysFooter)
    assert footer.virtual_size.width <= footer.size.width == SMALL[0], "the footer runs off the edge"
    last = _screen_text(app)[-1]
    for key in keys:
        assert key in last, (key, last)


@pytest.mark.slow  # drives the whole Textual app: seconds
async def test_at_80x24_nothing_the_user_needs_is_cut(kx_home: Path) -> None:
    engine = _engine()
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SMALL) as pilot:
        await _settle(app, pilot)
        await pilot.press(*"refund days", "enter")
        await _settle(app, pilot)
        await pilot.press("escape")
        await pilot.pause()
        _footer_fits(app, "? Help", "q Quit", "a Agent", "c Compare", "d Documents")
        results = app.query_one(ResultsList)
        width = results.scrollable_content_region.width
        for i, hit in enumerate(app.screen.result.hits):
            header = results.get_option_at_index(i).prompt.renderables[0]
            first = header.plain.splitlines()[0]
            assert len(first) <= width and hit.label in first, first
            if hit.document_name == LONG_NAME:
                assert "dense #" in header.plain.splitlines()[1]   # moved whole to the next line, not cut
            else:
                assert re.search(r"dense (#\d+|—) · sparse (#\d+|—)", first), first
        sidebar = [line.split("│")[0] for line in _screen_text(app)[8:20]]
        assert any(line.strip().startswith("documents 3") for line in sidebar), sidebar   # labels whole

        await pilot.press("c")
        await _settle(app, pilot)
        assert isinstance(app.screen, CompareScreen)
        _footer_fits(app, "? Help", "q Back")
        for table in app.screen.query(DataTable):
            chunks = [str(table.get_row_at(i)[3]) for i in range(table.row_count)]
            assert chunks and all(re.fullmatch(r"\[chunk \d+/\d+\]", c) for c in chunks), chunks
            text = "\n".join(_screen_text(app))
            assert all(c in text for c in chunks)
        await pilot.press("q", "d")
        await _settle(app, pilot)
        assert isinstance(app.screen, DocumentsScreen)
        _footer_fits(app, "f1 Help", "esc Back")  # a text box has focus: ? is typed there, F1 is not
        table = app.screen.query_one(DataTable)
        assert table.virtual_size.width <= table.size.width, "the table scrolls sideways"
        names = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert LONG_NAME in names
        assert "columns hidden" in "\n".join(_screen_text(app))
    engine.close()


@pytest.mark.slow  # drives the whole Textual app: seconds
async def test_agent_steps_wrap_and_focus_stays_where_the_user_left_it(kx_home: Path) -> None:
    embedder = BlockingEmbedder()
    embedder.release()
    engine = _engine(embedder)
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SMALL) as pilot:
        await _settle(app, pilot)
        await pilot.press("escape", "a")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, AgentScreen)
        embedder.released.clear()          # the run's searches wait until the user has moved on
        embedder.waiting.clear()
        await pilot.press(*"how long do refunds take", "enter")
        await _until(pilot, lambda: embedder.waiting.is_set(), "the run to search")
        await pilot.press("tab")           # the user moves to the steps while the run goes on
        steps = screen.query_one("#agent-steps", VerticalScroll)
        assert app.focused is steps
        embedder.release()
        await _until(pilot, lambda: screen.run_result is not None, "the run to finish")
        await _settle(app, pilot)
        assert app.focused is steps        # not pulled away to the citations
        assert screen.query_one("#agent-citations", OptionList).option_count > 0
        shown = [w for w in steps.query(Static)]
        assert [str(w.content) for w in shown] == screen.steps    # one block per step, each whole
        for widget in shown:                                       # wrapped inside the pane, never past its edge
            assert widget.size.width <= steps.scrollable_content_region.width
            lines = [s.text for s in widget.render_lines(widget.region.reset_offset)]
            assert " ".join(" ".join(lines).split()) == " ".join(str(widget.content).split())
        _footer_fits(app, "? Help", "Back")
        screen.query_one(Input).focus()
        await pilot.press("enter")         # a run from the goal box ends in the citations, as before
        await _settle(app, pilot)
        assert app.focused is screen.query_one("#agent-citations", OptionList)
    engine.close()


@pytest.mark.parametrize("width", [80, 200])
def test_a_hit_header_never_cuts_a_field(width: int) -> None:
    from engine.records import Hit
    from kx_tui.tui.widgets.results import hit_header

    hit = Hit(rank=3, score=0.0317, text="x", passage_ref="p", document_ref="d", document_name="reports/payments",
              chunk_index=0, chunk_count=12, char_start=0, char_end=1, dense_rank=3, dense_score=0.5,
              sparse_rank=None, sparse_score=None, fused_score=0.03, fused_rank=4, mmr_moved=1,
              page_start=1, page_end=2, section="1 Scope", document_title="Payments review, Q3")
    lines = hit_header(hit, [hit], width=width - 30).plain.splitlines()
    assert all(len(line) <= width - 30 for line in lines)
    text = " ".join(lines)
    assert "[chunk 1/12]" in lines[0] and "dense #3 · sparse —" in text and "MMR ▲1" in text
    assert ("0.0317" in lines[0]) == (width == 200)   # the score is what a narrow line drops
