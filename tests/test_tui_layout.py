"""80×24 without cut fields: footers that keep Help and Quit, hit headers, compare's chunk column, the documents
table, and the agent's steps (wrapped, with focus left where the user put it). Pilot over a real engine.

The tests marked slow drive the whole Textual app (seconds each); the others check its parts.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.containers import VerticalScroll
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Input, OptionList, Static

from engine import Engine
from engine.text.inputs import from_text
from kx_tui.tui.app import KxApp
from kx_tui.tui.screens.agent import AgentScreen
from kx_tui.tui.screens.compare import CompareScreen
from kx_tui.tui.screens.document_table import DocumentsScreen
from kx_tui.tui.widgets.footer import KeysFooter
from kx_tui.tui.widgets.results import ResultsList

from .helpers import BlockingEmbedder, settle, small_engine, until

SMALL = (80, 24)


LONG_NAME = "policies/customer-service/refunds-and-returns-for-enterprise-customers"


TEXTS = {
    LONG_NAME: "Customers may ask for a refund within 30 days of purchase. Refunds go back to the original "
               "payment method within five working days.",
    "leave": "Every employee has 25 days of annual leave a year. Unused days carry over until March.",
    "security": "Laptops must use full-disk encryption. Report a lost device within one hour.",
}


def _policies(embedder=None) -> Engine:
    """The policy texts as dataset "policies", small passages."""
    engine = small_engine(embedder)
    engine.ingest("policies", [from_text(text, name) for name, text in TEXTS.items()])
    return engine


def _screen_text(app: KxApp) -> list[str]:
    return [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]


def _footer_fits(app: KxApp, *keys: str) -> None:
    footer = app.screen.query_one(KeysFooter)
    assert footer.virtual_size.width <= footer.size.width == SMALL[0], "the footer runs off the edge"
    last = _screen_text(app)[-1]
    for key in keys:
        assert key in last, (key, last)


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
    # what says which passage it is and how well it matched is on the first line at any width: rank, score,
    # document, chunk label and pages; the retrievers' ranks and the markers move to the second when they must
    assert lines[0].startswith(" 3 0.0317  reports/payments  [chunk 1/12] p. 1–2"), lines[0]
    assert "dense #3 · sparse —" in text and "MMR ▲1" in text
    assert ("dense #3" in lines[0]) == (width == 200)


@pytest.mark.parametrize("name", ["报告/数据集文件名称很长的文档报告第一季度总结", "party/" + "🎉" * 25, "tab\there"])
def test_a_hit_header_cuts_a_wide_name_by_its_cells_never_the_chunk_label(name: str) -> None:
    from rich.cells import cell_len

    from engine.records import Hit
    from kx_tui.tui.widgets.results import hit_header

    hit = Hit(rank=3, score=0.0317, text="x", passage_ref="p", document_ref="d", document_name=name,
              chunk_index=0, chunk_count=12, char_start=0, char_end=1, dense_rank=3, dense_score=0.5,
              sparse_rank=None, sparse_score=None, fused_score=0.03, fused_rank=4, mmr_moved=1)
    first = hit_header(hit, [hit], width=40).plain.splitlines()[0]
    assert cell_len(first) <= 40 and first.endswith("  [chunk 1/12]"), first   # CJK and emoji take two cells


async def test_the_watch_log_wraps_at_its_own_width_and_again_when_it_changes() -> None:
    """RichLog wraps at 78 columns unless told otherwise, and a line once written keeps its wrapping: at 80
    columns a batch's line lost its middle to a sideways scroll."""
    from textual.app import App, ComposeResult

    from kx_tui.tui.widgets.activity import ActivityLog

    class Probe(App):
        def compose(self) -> ComposeResult:
            yield ActivityLog()

    line = ("[bold]batch 1[/]: 1 added (3 passages), 0 unchanged, 1 refused in 0.25 s; the dataset holds 6 documents, "
            "35 passages")
    app = Probe()
    async with app.run_test(size=(120, 24)) as pilot:
        log = app.query_one(ActivityLog)
        log.add(line)
        await pilot.pause()
        for width in (50, 90):
            await pilot.resize_terminal(width, 24)
            await pilot.pause()
            assert log.virtual_size.width <= log.scrollable_content_region.width, width   # nothing off to the side
            shown = " ".join(strip.text.strip() for strip in log.lines)
            assert "in 0.25 s; the dataset holds 6 documents, 35 passages" in shown, shown


@pytest.mark.parametrize("name, title, shown", [
    ("refunds-and-returns", "Refunds and Returns", False), ("guide/install.md", "Install", False),
    ("notes_2024.txt", "Notes 2024", False), ("reports/payments", "Payments review, Q3", True),
    ("v1.2", "V1.2", False), ("a.b", "Something else", True)])
def test_a_title_is_shown_only_when_it_says_more_than_the_name(name: str, title: str, shown: bool) -> None:
    from kx_tui.render import shown_title

    assert (shown_title(name, title) == title) is shown


def test_a_hit_names_its_title_once_when_the_section_starts_with_it() -> None:
    import dataclasses

    from engine.records import Hit
    from kx_tui.tui.widgets.results import hit_header

    hit = Hit(rank=1, score=0.05, text="x", passage_ref="p", document_ref="d", document_name="handbook/refunds",
              chunk_index=5, chunk_count=6, char_start=0, char_end=1, dense_rank=1, dense_score=0.5,
              sparse_rank=1, sparse_score=1.0, fused_score=0.05, fused_rank=1, mmr_moved=0,
              section="Refunds and Returns › Store credit", document_title="Refunds and Returns")
    second = hit_header(hit, [hit], width=120).plain.splitlines()[1]
    assert second.strip() == "Refunds and Returns › Store credit"
    other = dataclasses.replace(hit, section="Store credit")
    assert hit_header(other, [other], width=120).plain.splitlines()[1].strip() == "Refunds and Returns · Store credit"


@pytest.mark.slow
async def test_at_80x24_nothing_the_user_needs_is_cut(kx_home: Path) -> None:
    engine = _policies()
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


@pytest.mark.slow
async def test_agent_steps_wrap_and_focus_stays_where_the_user_left_it(kx_home: Path) -> None:
    embedder = BlockingEmbedder()
    embedder.release()
    engine = _policies(embedder)
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
        await until(pilot, lambda: embedder.waiting.is_set(), "the run to search")
        await pilot.press("tab")           # the user moves to the steps while the run goes on
        steps = screen.query_one("#agent-steps", VerticalScroll)
        assert app.focused is steps
        embedder.release()
        await until(pilot, lambda: screen.run_result is not None, "the run to finish")
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


@pytest.mark.slow
async def test_at_80x24_a_toast_never_covers_the_focused_table(kx_home: Path) -> None:
    """A toast takes its rows from the layout: the documents table shrinks above it, and the row the cursor is
    on scrolls back into view."""
    from textual.widgets._toast import Toast

    from engine.text.inputs import from_text


    engine = small_engine()
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
