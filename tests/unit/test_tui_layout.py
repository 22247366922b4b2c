"""80×24 without cut fields: footers that keep Help and Quit, hit headers, compare's chunk column, the documents
table, and the agent's steps (wrapped, with focus left where the user put it). Pilot over a real engine."""

from __future__ import annotations

import pytest

from engine import Engine, load_settings
from engine.text.inputs import from_text
from kx_tui.tui.app import KxApp
from kx_tui.tui.widgets.footer import KeysFooter

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
