"""The workbench's structure as a user meets it: warm start, the document browser, compare's passage pane, help.

Driven through App.run_test() and Pilot key presses over a real engine (the
tiny HashEmbedder for speed; a stand-in that blocks until released, to catch
a query typed while the model is still loading).

The tests marked slow drive the whole Textual app (seconds each); the others check its parts.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import DataTable, Input, Static

from engine import Engine, load_settings
from engine.text.inputs import from_text
from kx_tui.markdown_text import styled_text
from kx_tui.tui.app import SAMPLES, KxApp
from kx_tui.tui.screens.compare import CompareScreen
from kx_tui.tui.screens.document_table import DocumentsScreen
from kx_tui.tui.screens.document_text import DocumentScreen, blocks, shared_starts
from kx_tui.tui.screens.help import HelpScreen
from kx_tui.tui.screens.main import MainScreen
from kx_tui.tui.widgets.results import ResultsList

from .helpers import (
    BlockingEmbedder,
    HashEmbedder,
    ask,
    ingest_handbook,
    main_screen,
    plain_text,
    settle,
    small_engine,
    status_line,
    until,
)

SIZE = (120, 40)


def _folded(renderable) -> str:
    """The renderable's text with its whitespace folded (wrapping may fall anywhere)."""
    return " ".join(plain_text(renderable).split())


@pytest.fixture
def handbook_home(kx_home: Path) -> Path:
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    ingest_handbook(engine)
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


@pytest.mark.slow
async def test_a_query_typed_while_the_model_loads_waits_and_is_answered_once_it_is_ready(handbook_home) -> None:
    embedder = BlockingEmbedder()
    engine = Engine(load_settings({}), embedder=embedder)
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: embedder.waiting.is_set(), "the warm-up to start encoding")
        await until(pilot, lambda: main_screen(app).dataset == "handbook", "the datasets to load")
        assert "loading model…" in status_line(app)
        app.query_one("#query", Input).focus()
        await pilot.press(*"annual leave days", "enter")
        await until(pilot, lambda: "waiting for the model…" in status_line(app), "the query to say it waits")
        await pilot.pause(0.3)
        assert main_screen(app).result is None  # held, not answered and not failed
        embedder.release()
        await until(pilot, lambda: main_screen(app).result is not None, "the held query's answer")
        result = main_screen(app).result
        assert result.query == "annual leave days" and result.mode == "hybrid" and len(result) > 0
        expected = engine.query("handbook", "annual leave days", k=app.k, mode="hybrid", rerank=app.rerank)
        assert [h.passage_ref for h in result] == [h.passage_ref for h in expected]
        status = status_line(app)
        assert "model ready in" in status and "waiting" not in status and f"{len(result)} hits" in status


@pytest.mark.slow
async def test_a_query_typed_during_the_first_run_is_kept_and_answered_once_the_sample_is_built(
        kx_home: Path, tmp_path: Path) -> None:
    samples = tmp_path / "samples"
    samples.mkdir()
    for name in ("leave-and-holidays.md", "refunds-and-returns.md"):
        (samples / name).write_text((SAMPLES / name).read_text())
    embedder = BlockingEmbedder()
    engine = Engine(load_settings({}), embedder=embedder)
    app = KxApp(engine, settings=engine.settings, samples=samples)
    async with app.run_test(size=SIZE) as pilot:
        seen = []
        original = app.notify
        app.notify = lambda message, *a, **kw: (seen.append((str(message), kw.get("severity"))),  # type: ignore
                                                original(message, *a, **kw))[1]
        await until(pilot, lambda: main_screen(app).build is not None, "the first run to start")
        await until(pilot, lambda: embedder.waiting.is_set(), "the warm-up to start encoding")
        progress = app.query_one("#build-progress", Static)
        assert progress.display
        line = _folded(progress.content)
        assert "first run: building 'handbook' from 2 samples" in line
        assert "1/4 loading the model" in line and re.search(r"· \d+ s", line)
        app.query_one("#query", Input).focus()
        await pilot.press(*"annual leave days", "enter")
        await pilot.pause(0.2)
        assert "your query runs once 'handbook' is built" in status_line(app)
        assert "handbook (building)" in status_line(app)
        assert main_screen(app).held == "annual leave days" and main_screen(app).result is None
        assert not [m for m, severity in seen if severity in ("warning", "error")], seen
        embedder.release()
        await until(pilot, lambda: main_screen(app).result is not None, "the kept query's answer", seconds=60)
        result = main_screen(app).result
        assert result.dataset == "handbook" and result.query == "annual leave days" and len(result) > 0
        assert not progress.display and main_screen(app).build is None and main_screen(app).held is None
        status = status_line(app)
        assert f"{len(result)} hits" in status and "runs once" not in status
        assert not [m for m, severity in seen if severity in ("warning", "error")], seen
        assert any("'handbook' is ready" in m and "Answering your query" in m for m, _s in seen)


@pytest.mark.slow
async def test_a_sparse_query_never_waits_for_the_model(handbook_home) -> None:
    embedder = BlockingEmbedder()
    engine = Engine(load_settings({"default_mode": "sparse"}), embedder=embedder)
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: main_screen(app).dataset == "handbook", "the datasets to load")
        app.query_one("#query", Input).focus()
        await pilot.press(*"annual leave", "enter")
        await until(pilot, lambda: main_screen(app).result is not None, "the sparse answer")
        assert not app.warmup.ready and "loading model…" in status_line(app)
        assert main_screen(app).result.mode == "sparse" and len(main_screen(app).result) > 0
        embedder.release()


@pytest.mark.slow
async def test_over_a_gateway_the_status_says_gateway_not_loading(handbook_home) -> None:
    class Remote:  # what KxClient does: nothing to warm here, no local settings
        def __init__(self, engine: Engine) -> None:
            self._engine = engine

        def warm_up(self) -> bool:
            return False

        def __getattr__(self, name):
            return getattr(self._engine, name)

    engine = Engine(load_settings({}), embedder=HashEmbedder())
    app = KxApp(Remote(engine), settings=None, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert "gateway" in status_line(app) and "loading" not in status_line(app)
        await ask(app, pilot, "refund")
        assert len(main_screen(app).result) > 0


@pytest.mark.slow
async def test_the_document_browser_filters_sorts_and_opens_a_document(kx_home) -> None:
    engine = small_engine()
    ingest_handbook(engine)
    engine.ingest("handbook", [from_text("A short note about parking.", name="zz-parking-note")])
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("escape", "d")
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, DocumentsScreen)
        table = screen.query_one(DataTable)
        listed = engine.list_documents("handbook")
        assert [r.key.value for r in table.ordered_rows] == [d.ref for d in listed]  # ingest order
        assert len(listed) == 7

        await pilot.press(*"travel")                      # the filter has focus: typed, narrowed
        await pilot.pause()
        names = [table.get_row_at(i)[0].plain for i in range(table.row_count)]
        assert names == ["travel-and-expenses"]
        await pilot.press(*(["backspace"] * 6))
        await pilot.pause()
        assert table.row_count == 7

        by_passages = sorted(listed, key=lambda d: d.passages)
        await pilot.click("#documents-table", offset=(2, 0))   # nothing breaks on a click in the body
        screen.sort_key, screen.reverse = "passages", False
        screen.refresh_rows()
        assert [r.key.value for r in table.ordered_rows][0] == by_passages[0].ref
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert [r.key.value for r in table.ordered_rows][0] == by_passages[-1].ref
        await pilot.press("ctrl+s")                       # the next column: passages -> type
        await pilot.pause()
        assert screen.sort_key == "type" and not screen.reverse

        screen.query_one(Input).focus()
        await pilot.press(*"parking", "enter")
        await settle(app, pilot)
        document = app.screen
        assert isinstance(document, DocumentScreen)
        assert document.document.name == "zz-parking-note"
        assert document.text == engine.document_text("handbook", document.document.ref)
        provenance = _folded(document.query_one("#document-provenance", Static).content)
        assert document.document.ref in provenance and "text/plain" in provenance
        await pilot.press("escape")
        assert isinstance(app.screen, DocumentsScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


@pytest.mark.slow
async def test_the_document_browser_toggles_between_current_and_every_version(kx_home) -> None:
    engine = small_engine()
    for hour in ("eight", "nine"):
        engine.ingest("notes", [from_text(f"The office opens at {hour}.", name="hours")])
    engine.ingest("notes", [from_text("Bikes go in the yard.", name="bikes")])
    engine.retire("notes", ["bikes"])
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("escape", "d")
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, DocumentsScreen)
        table = screen.query_one(DataTable)
        rows = lambda: [table.get_row_at(i)[0].plain for i in range(table.row_count)]  # noqa: E731
        assert rows() == ["hours (v2)"]
        await pilot.press("ctrl+t")                        # every stored version, marked
        await settle(app, pilot)
        assert rows() == ["hours (v1, superseded)", "hours (v2)", "bikes (v1, retired)"]
        count = _folded(screen.query_one("#documents-count", Static).content)
        assert count.startswith("3 of 3 stored versions")
        assert "every stored version" in _folded(screen.query_one("#documents-title", Static).content)
        await pilot.press(*"bikes")                        # the filter still narrows
        await pilot.pause()
        assert rows() == ["bikes (v1, retired)"]
        await pilot.press(*(["backspace"] * 5), "ctrl+t")  # back to the current versions
        await settle(app, pilot)
        assert rows() == ["hours (v2)"]
        assert _folded(screen.query_one("#documents-count", Static).content).startswith("1 of 1 documents")
    engine.close()


@pytest.mark.slow
async def test_a_big_datasets_browser_shows_its_first_page_while_the_rest_loads(kx_home, monkeypatch) -> None:
    import threading

    from kx_tui.tui.screens import document_table

    engine = small_engine()
    engine.ingest("notes", [from_text(f"Note number {i} about the office.", name=f"note-{i}") for i in range(5)])
    monkeypatch.setattr(document_table, "PAGE", 2)     # 5 documents: pages of 2, 2 and 1
    release = threading.Event()
    listed = engine.list_documents

    def slow_after_the_first_page(name, offset=0, limit=100, **options):
        if offset:                                     # the rest of the list waits until the test lets it
            release.wait(10)
        return listed(name, offset, limit, **options)

    monkeypatch.setattr(engine, "list_documents", slow_after_the_first_page)
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("escape", "d")
        screen = app.screen
        assert isinstance(screen, DocumentsScreen)
        table = screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count > 0, "the first page")
        await pilot.pause(0.2)
        assert table.row_count == 2                        # the first page, before the rest is read
        count = _folded(screen.query_one("#documents-count", Static).content)
        assert count.startswith("2 of 2 so far documents") and "loading the rest" in count
        release.set()
        await settle(app, pilot)
        assert table.row_count == 5
        count = _folded(screen.query_one("#documents-count", Static).content)
        assert count.startswith("5 of 5 documents") and "loading" not in count
    engine.close()


@pytest.mark.slow
async def test_a_document_shows_every_passage_where_it_lies(kx_home) -> None:
    engine = small_engine()
    ingest_handbook(engine)
    name = "remote-work"
    summary = next(d for d in engine.list_documents("handbook") if d.name == name)
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("escape", "d")
        await settle(app, pilot)
        await pilot.press(*name, "enter")
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, DocumentScreen)
        spans = engine.document_passages("handbook", summary.ref)
        assert len(spans) == summary.passages > 2
        headings = [_folded(w.content) for w in screen.query(".passage-heading")]
        shared = shared_starts(spans)
        assert shared[spans[0].chunk_index] == 0 and shared[spans[1].chunk_index] > 0  # chunk_overlap 40
        assert headings == [f"{s.label} chars {s.char_start}–{s.char_end}"
                            + (f" (first {shared[s.chunk_index]} shared)" if shared[s.chunk_index] else "")
                            + (f" § {s.section}" if s.section else "")
                            for s in spans]  # a Markdown file has no pages, but its headings are sections
        body = screen.query_one("#document-body")
        await pilot.press("n", "n")
        await pilot.pause()
        assert screen.current == 2 and body.scroll_y > 0  # the first n moves on from the first passage


@pytest.mark.slow
async def test_compare_shows_the_highlighted_rows_passage_with_both_ranks(kx_home) -> None:
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    ingest_handbook(engine)
    app = KxApp(engine, settings=engine.settings, samples=None)
    query = "working from home equipment"
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await ask(app, pilot, query)
        await pilot.press("escape", "c")
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        hybrid = engine.query("handbook", query, k=app.k, mode="hybrid")
        dense = engine.query("handbook", query, k=app.k, mode="dense")
        dense_rank = {h.passage_ref: h.rank for h in dense}

        def pane() -> str:
            return _folded(screen.query_one("#compare-passage-text", Static).content)

        assert screen.shown_ref == hybrid[0].passage_ref
        await pilot.press("down", "down")
        await pilot.pause()
        third = hybrid[2]
        assert screen.shown_ref == third.passage_ref
        shown = pane()
        there = dense_rank.get(third.passage_ref)
        assert f"hybrid #{third.rank}" in shown and (f"dense #{there}" if there else "dense —") in shown
        # Markdown as its text, as the hit list shows it: "**10 weeks**" is "10 weeks"
        as_text = styled_text(third.text, markdown=True)[0].plain
        assert " ".join(as_text.split())[:80] in shown and third.document_name in shown
        assert "**" in third.text and "**" not in shown
        await pilot.press("tab")                          # the dense column: its highlighted row's passage
        await pilot.pause()
        assert screen.shown_ref == dense[0].passage_ref


@pytest.mark.slow
async def test_help_lists_every_binding_of_the_main_screen(kx_home) -> None:
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("escape", "question_mark")
        await pilot.pause()
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        described = {what for _title, _keys, what in help_screen.rows()}
        for binding in MainScreen.BINDINGS:
            assert binding.tooltip in described, binding
        assert "on a hit: open it inside its document" in described


@pytest.mark.slow
async def test_pushed_screens_hide_the_main_screens_keys(handbook_home) -> None:
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await ask(app, pilot, "refund")
        await pilot.press("escape", "enter")               # a hit, in its document
        await settle(app, pilot)
        mode = app.mode
        await pilot.press("m")                             # no effect here: the key belongs to the workbench
        await settle(app, pilot)
        assert app.mode == mode
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
        app.query_one(ResultsList).focus()
        await pilot.press("m")
        await settle(app, pilot)
        assert app.mode != mode


@pytest.mark.slow
async def test_slash_types_into_the_query_box_and_focuses_it_from_the_results(handbook_home) -> None:
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        box = app.query_one("#query", Input)
        app.query_one(ResultsList).focus()
        await pilot.press("slash")
        assert app.focused is box and box.value == ""
        await pilot.press(*"a/b")
        assert box.value == "a/b"


@pytest.mark.slow
async def test_a_long_model_id_loses_its_middle_and_the_status_line_is_never_cut(kx_home) -> None:
    import dataclasses

    from kx_tui.tui.widgets.datasets import DatasetList

    embedder = HashEmbedder()
    embedder._card = dataclasses.replace(embedder.card, model_id="sentence-transformers/all-MiniLM-L6-v2@4a3e3ef67f6b")
    engine = Engine(load_settings({}), embedder=embedder)
    ingest_handbook(engine)
    for size in ((80, 24), (100, 30)):
        app = KxApp(engine, settings=engine.settings, samples=None)
        async with app.run_test(size=size) as pilot:
            await settle(app, pilot)
            await ask(app, pilot, "refund")
            sidebar = app.query_one(DatasetList)
            assert sidebar.size.width <= 44
            console = Console(width=sidebar.content_region.width - 1, record=True, color_system=None)
            console.print(sidebar.get_option_at_index(0).prompt)
            lines = console.export_text().rstrip("\n").split("\n")
            assert len(lines) == 3, lines   # one line each, never wrapped
            start, end = lines[2].rstrip().split("…")   # the model id: its name's start and its revision's end
            assert start and "sentence-transformers/".startswith(start) and end and "@4a3e3ef67f6b".endswith(end)
            assert lines[1].startswith("6 docs")
            assert "@4a3e3ef67f6b" in str(sidebar.tooltip)   # whole on hover
            status = app.query_one("#query-status", Static)
            shown = str(status.content)
            assert all(len(line) <= status.content_region.width for line in shown.split("\n")), (size, shown)
            assert status.size.height == len(shown.split("\n"))              # every line of it on screen
            assert "handbook" in shown and "model ready in" in shown and "hits in" in shown


@pytest.mark.slow
async def test_a_burst_of_files_is_reported_file_by_file_and_counted_once(handbook_home) -> None:
    from kx_tui.tui.widgets.activity import ActivityLog
    from kx_tui.tui.widgets.datasets import DatasetList
    from kx_tui.tui.widgets.watch import WatchPanel

    engine = Engine(load_settings({}), embedder=HashEmbedder())
    app = KxApp(engine, settings=engine.settings, samples=None, watch_settle_seconds=0.0)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("escape", "w")
        panel = app.query_one(WatchPanel)
        assert panel.watching
        inbox = engine.settings.home / "inbox" / "handbook"
        for i in range(25):
            (inbox / f"note-{i:02}.md").write_text(f"Note {i}: the meeting room {i} projector needs a new lamp.\n")
        log = app.query_one(ActivityLog)
        added = lambda: [line for line in log.lines_written if line.startswith("[green]added")]  # noqa: E731
        await until(pilot, lambda: len(added()) == 25, "25 'added' lines", seconds=60)
        await until(pilot, lambda: app.query_one(DatasetList).summaries["handbook"].documents == 31,
                     "the sidebar's count to follow the batches", seconds=30)
        assert sorted(re.search(r"note-\d+\.md", line).group() for line in added()) == \
            [f"note-{i:02}.md" for i in range(25)]
        assert "settling" not in _folded(panel.query_one("#watch-header", Static).content)
        await pilot.press("w")
        assert not panel.watching
    assert panel.watcher is None  # and nothing left running after the app closed


@pytest.mark.slow
async def test_the_status_line_says_when_dense_search_covers_only_part_of_the_dataset(handbook_home) -> None:
    import dataclasses

    from kx_tui.tui.messages import QueryAnswered

    engine = Engine(load_settings({}), embedder=HashEmbedder())
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await ask(app, pilot, "refund")
        assert "covers" not in status_line(app)          # a fully embedded dataset says nothing
        partial = dataclasses.replace(main_screen(app).result, dense_coverage=0.42)
        main_screen(app).post_message(QueryAnswered("refund", partial, {}))
        await pilot.pause()
        assert "dense covers 42% of passages (still embedding)" in status_line(app)
        sparse = dataclasses.replace(partial, mode="sparse")
        main_screen(app).post_message(QueryAnswered("refund", sparse, {}))
        await pilot.pause()
        assert "covers" not in status_line(app)          # sparse covers every committed passage
    engine.close()
