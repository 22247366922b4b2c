"""The end-to-end half of tests/unit/test_tui_layout.py (a model, processes or servers there):
80×24 without cut fields: footers that keep Help and Quit, hit headers, compare's chunk column, the documents
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.containers import VerticalScroll
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Input, OptionList, Static

from kx_tui.tui.app import KxApp
from kx_tui.tui.screens.agent import AgentScreen
from kx_tui.tui.screens.compare import CompareScreen
from kx_tui.tui.screens.document_table import DocumentsScreen
from kx_tui.tui.widgets.results import ResultsList

from .helpers import settle
from .test_tui_workbench import BlockingEmbedder, _until
from .unit.test_tui_layout import LONG_NAME, SMALL, TEXTS, _engine, _footer_fits, _screen_text  # noqa: F401 - helpers and fixtures


@pytest.mark.slow  # drives the whole Textual app: seconds
async def test_at_80x24_nothing_the_user_needs_is_cut(kx_home: Path) -> None:
    engine = _engine()
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SMALL) as pilot:
        await settle(app, pilot)
        await pilot.press(*"refund days", "enter")
        await settle(app, pilot)
        await pilot.press("escape")
        await pilot.pause()
        _footer_fits(app, "? Help", "q Quit", "a Agent", "c Compare", "d Documents")
        results = app.query_one(ResultsList)
        width = results.scrollable_content_region.width
        for i, hit in enumerate(app.screen.result.hits):
            header = results.get_option_at_index(i).prompt.renderables[0]
            first = header.plain.splitlines()[0]
            assert len(first) <= width and hit.label in first and f"{hit.score:.4f}" in first, first
            assert first.strip().split()[0] == str(hit.rank)
            # the name whole, or its end when the line is too short for it
            assert hit.document_name in first or ("…" in first and hit.document_name.endswith(
                first.split("…")[1].split("  ")[0])), first
            ranks = r"dense (#\d+|—) · sparse (#\d+|—)"   # on the first line, or moved whole to the second
            assert re.search(ranks, first) or re.match(r"\s+" + ranks, header.plain.splitlines()[1]), header.plain
        sidebar = [line.split("│")[0] for line in _screen_text(app)[8:20]]
        assert any(line.strip().startswith("documents 3") for line in sidebar), sidebar   # labels whole

        await pilot.press("c")
        await settle(app, pilot)
        assert isinstance(app.screen, CompareScreen)
        _footer_fits(app, "? Help", "q Back")
        for table in app.screen.query(DataTable):
            chunks = [str(table.get_cell_at(Coordinate(i, table.get_column_index("chunk"))))
                      for i in range(table.row_count)]
            assert chunks and all(re.fullmatch(r"\[chunk \d+/\d+\]", c) for c in chunks), chunks
            text = "\n".join(_screen_text(app))
            assert all(c in text for c in chunks)
            # the names whole where they fit, else their ends (the file name says more), "other" gone before them
            names = [str(table.get_cell_at(Coordinate(i, table.get_column_index("document"))))
                     for i in range(table.row_count)]
            cut = [name for name in names if name not in TEXTS]
            assert all(name.startswith("…") and LONG_NAME.endswith(name[1:]) for name in cut), names
        await pilot.press("q", "d")
        await settle(app, pilot)
        assert isinstance(app.screen, DocumentsScreen)
        _footer_fits(app, "f1 Help", "esc Back")  # a text box has focus: ? is typed there, F1 is not
        table = app.screen.query_one(DataTable)
        assert table.virtual_size.width <= table.size.width, "the table scrolls sideways"
        names = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert LONG_NAME in names
        shown = [key.value for key in table.columns]
        assert "pages" not in shown and "title" not in shown, shown   # "—" in every row: the first to go
        assert shown[0] == "name" and len(shown) > 1, shown
        assert "columns hidden" in "\n".join(_screen_text(app))
    engine.close()


@pytest.mark.slow  # drives the whole Textual app: seconds
async def test_agent_steps_wrap_and_focus_stays_where_the_user_left_it(kx_home: Path) -> None:
    embedder = BlockingEmbedder()
    embedder.release()
    engine = _engine(embedder)
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SMALL) as pilot:
        await settle(app, pilot)
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
        await settle(app, pilot)
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
        await settle(app, pilot)
        assert app.focused is screen.query_one("#agent-citations", OptionList)
    engine.close()


@pytest.mark.slow  # drives the whole Textual app: seconds
async def test_at_80x24_a_toast_never_covers_the_focused_table(kx_home: Path) -> None:
    """A toast takes its rows from the layout: the documents table shrinks above it, and the row the cursor is
    on scrolls back into view."""
    from textual.widgets._toast import Toast

    from engine import Engine, load_settings
    from engine.text.inputs import from_text

    from .helpers import HashEmbedder

    engine = Engine(load_settings({"chunk_size": 200, "chunk_overlap": 40}), embedder=HashEmbedder())
    engine.ingest("notes", [from_text(f"note {i} about refunds", f"n{i:02}") for i in range(30)])
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SMALL, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("escape", "d")
        await settle(app, pilot)
        table = app.screen.query_one(DataTable)
        table.focus()
        await pilot.press(*["down"] * 14)
        await pilot.pause()
        tall = table.region
        app.notify("a warning long enough to wrap onto three lines of a toast at eighty columns",
                   severity="warning", timeout=30)
        for _ in range(10):
            await pilot.pause(0.05)
        toast = app.screen.query_one(Toast)
        assert toast.region.height >= 3 and not table.region.overlaps(toast.region), (table.region, toast.region)
        assert table.region.height < tall.height and app.focused is table
        row = table.cursor_row - int(table.scroll_y) + 1   # under the header row
        assert 1 <= row < table.scrollable_content_region.height, (table.cursor_row, table.scroll_y)
        assert f"n{table.cursor_row:02}" in _screen_text(app)[table.region.y + row]
    engine.close()
