"""The Textual workbench, driven through App.run_test() and Pilot key presses."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, Static

from engine import Engine, load_settings
from engine.text.inputs import from_file, from_text
from kx_tui.tui.app import SAMPLES, KxApp
from kx_tui.tui.screens.compare import CompareScreen
from kx_tui.tui.screens.help import HelpScreen
from kx_tui.tui.screens.hit_detail import PassageDetailScreen
from kx_tui.tui.widgets.activity import ActivityLog
from kx_tui.tui.widgets.datasets import DatasetDetails, DatasetList
from kx_tui.tui.widgets.results import ResultsList
from kx_tui.tui.widgets.watch import WatchPanel

from .helpers import HashEmbedder, ask, ingest_handbook, main_screen, plain_text, recording_notify, settle, small_engine

pytestmark = pytest.mark.slow  # every test here drives the whole Textual app: seconds each

SIZE = (140, 45)
QUERY = "how many days of annual leave"


def _hash_engine() -> Engine:
    return Engine(load_settings({}), embedder=HashEmbedder())


def _results_text(app: KxApp) -> list[str]:
    results = app.query_one(ResultsList)
    return [plain_text(results.get_option_at_index(i).prompt, keep_lines=True) for i in range(results.option_count)]


@pytest.fixture
def handbook_engine(kx_home: Path) -> Engine:
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    ingest_handbook(engine)
    return engine


async def test_query_shows_explained_hits_from_the_real_model(kx_home: Path, real_embedder) -> None:
    engine = Engine(load_settings({}), embedder=real_embedder)
    ingest_handbook(engine)
    app = KxApp(engine, settings=engine.settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        assert main_screen(app).dataset == "handbook"
        await ask(app, pilot, QUERY)
        expected = engine.query("handbook", QUERY, k=app.k, mode="hybrid", rerank=True)
        assert main_screen(app).result is not None
        assert [h.passage_ref for h in main_screen(app).result.hits] == [h.passage_ref for h in expected.hits]
        shown = _results_text(app)
        assert len(shown) == len(expected.hits) > 0
        for text, hit in zip(shown, expected.hits):
            assert hit.document_name in text and hit.label in text
            dense = f"dense #{hit.dense_rank}" if hit.dense_rank is not None else "dense —"
            sparse = f"sparse #{hit.sparse_rank}" if hit.sparse_rank is not None else "sparse —"
            assert dense in text and sparse in text
        assert "leave-and-holidays" in shown[0]
        assert "hybrid" in plain_text(app.query_one("#query-status", Static).content)


async def test_mode_rerank_and_k_keys_rerun_the_query(handbook_engine: Engine) -> None:
    app = KxApp(handbook_engine, settings=handbook_engine.settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        await ask(app, pilot, "refund")
        assert main_screen(app).result.mode == "hybrid"
        await pilot.press("m")  # still in the query box: the key is typed, not a command
        assert app.query_one("#query", Input).value == "refundm" and app.mode == "hybrid"
        await pilot.press("backspace", "escape", "m")
        await settle(app, pilot, rounds=3)
        expected = handbook_engine.query("handbook", "refund", k=app.k, mode="dense", rerank=True)
        assert app.mode == "dense" and main_screen(app).result.mode == expected.mode == "dense"
        assert [h.passage_ref for h in main_screen(app).result.hits] == [h.passage_ref for h in expected.hits]
        await pilot.press("m")
        await settle(app, pilot, rounds=3)
        assert main_screen(app).result.mode == "sparse"
        await pilot.press("r")
        await settle(app, pilot, rounds=3)
        assert main_screen(app).result.rerank is False
        k = app.k
        await pilot.press("minus")
        await settle(app, pilot, rounds=3)
        assert app.k == k - 1 and len(main_screen(app).result.hits) <= k - 1
        assert "sparse · MMR off" in plain_text(app.query_one("#query-status", Static).content)


async def test_a_stale_answer_is_dropped(handbook_engine: Engine) -> None:
    app = KxApp(handbook_engine, settings=handbook_engine.settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        await ask(app, pilot, "refund")
        before = main_screen(app).result
        answered = handbook_engine.query("handbook", "travel", k=3)
        from kx_tui.tui.messages import QueryAnswered

        main_screen(app).post_message(QueryAnswered("travel", answered, {}))  # the box still says "refund"
        await pilot.pause()
        assert main_screen(app).result is before


async def test_opening_a_hit_shows_its_range_in_the_document(handbook_engine: Engine) -> None:
    app = KxApp(handbook_engine, settings=handbook_engine.settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        await ask(app, pilot, "expenses receipts")
        await pilot.press("escape", "down", "enter")
        await settle(app, pilot, rounds=3)
        screen = app.screen
        assert isinstance(screen, PassageDetailScreen)
        hit = main_screen(app).result.hits[1]
        assert screen.hit == hit
        assert screen.highlighted_range == (hit.char_start, hit.char_end)
        document = handbook_engine.document_text("handbook", hit.document_ref)
        assert screen.document_text == document
        shown = str(screen.query_one("#detail-hit", Static).content)
        # the range's own words in order, its Markdown markup (the samples are .md files) left out
        words, ranged = re.findall(r"\w+", shown), iter(re.findall(r"\w+", document[hit.char_start:hit.char_end]))
        assert words and all(word in ranged for word in words)
        assert "**" not in shown and not re.search(r"^#+ ", shown, re.M)
        body, shown_hit = screen.query_one("#detail-body"), screen.query_one("#detail-hit")
        assert body.scroll_y == min(shown_hit.virtual_region.y, body.max_scroll_y)  # scrolled to the hit
        await pilot.press("escape")
        assert not isinstance(app.screen, PassageDetailScreen)


async def test_hits_and_the_passage_view_show_pages_section_and_title(kx_home: Path, monkeypatch) -> None:
    from engine.text.inputs import from_bytes

    from .data.paper import PAPER_BYTES, PAPER_TEXT, expected_section, paper_extractor
    from .helpers import inject_extraction

    inject_extraction(monkeypatch, paper_extractor)
    engine = small_engine()
    engine.ingest("papers", [from_bytes(PAPER_BYTES, "cold-chains", "application/pdf"),
                             from_text("Shipments are insured by the carriers.", "insurance")])
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        await ask(app, pilot, "forty shipments two carriers")
        hits = main_screen(app).result.hits
        shown = _results_text(app)
        paper = next(i for i, h in enumerate(hits) if h.section == "3 Model › 3.2 Validation")
        header, where = shown[paper].splitlines()[:2]
        # the pages beside the chunk label, as a citation says them; the title and section on a line of their
        # own: neither pushes the ranks off the first
        assert f"cold-chains  {hits[paper].label} p. 3  dense" in header
        assert where.strip() == "Cold chains, watched · 3 Model › 3.2 Validation"
        plain = next(i for i, h in enumerate(hits) if h.document_name == "insurance")
        assert "insurance  [chunk 1/1]  dense" in shown[plain]  # nothing to say: nothing shown
        await pilot.press("escape", *["down"] * paper, "enter")
        await settle(app, pilot, rounds=3)
        screen = app.screen
        assert isinstance(screen, PassageDetailScreen) and screen.hit == hits[paper]
        title = plain_text(screen.query_one("#detail-title", Static).content, keep_lines=True).splitlines()
        assert title[0].startswith(f"cold-chains  {hits[paper].label} p. 3  chars {hits[paper].char_start}")
        assert title[1].strip() == f"Cold chains, watched · {expected_section(hits[paper].char_start)}"
        assert screen.document_text == PAPER_TEXT  # the stored extracted text, not the bytes
        assert str(screen.query_one("#detail-hit", Static).content) == hits[paper].text
    engine.close()


async def test_compare_shows_hybrid_and_dense_side_by_side(handbook_engine: Engine) -> None:
    app = KxApp(handbook_engine, settings=handbook_engine.settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        await ask(app, pilot, "working from home equipment")
        await pilot.press("escape", "c")
        await settle(app, pilot, rounds=3)
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        hybrid = handbook_engine.query("handbook", "working from home equipment", k=app.k, mode="hybrid")
        dense = handbook_engine.query("handbook", "working from home equipment", k=app.k, mode="dense")
        for table_id, result, other in (("#compare-hybrid", hybrid, dense), ("#compare-dense", dense, hybrid)):
            table = screen.query_one(table_id, DataTable)
            keys = [row.key.value for row in table.ordered_rows]
            assert keys == [h.passage_ref for h in result.hits]
            other_rank = {h.passage_ref: h.rank for h in other.hits}
            for i, hit in enumerate(result.hits):
                rank, there, marker = table.get_row_at(i)[:3]
                assert rank == str(hit.rank)
                assert there == str(other_rank.get(hit.passage_ref, "—"))
                if hit.passage_ref not in other_rank:
                    assert marker == ("new" if table_id == "#compare-hybrid" else "missing")
        await pilot.press("escape")
        assert not isinstance(app.screen, CompareScreen)


async def test_a_stale_fingerprint_is_an_error_notification_not_a_crash(
        kx_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = small_engine()
    old.ingest("notes", [from_text("The quick brown fox jumps over the lazy dog. " * 20, name="fox")])
    # a dataset answers with the settings it was built with unless one is set for this command: the
    # operator's KX_CHUNK_SIZE names another chunking, which the dataset's fingerprint refuses
    monkeypatch.setenv("KX_CHUNK_SIZE", "1000")
    app = KxApp(_hash_engine(), settings=load_settings({}))
    async with app.run_test(size=SIZE) as pilot:
        seen = recording_notify(app)
        await settle(app, pilot, rounds=3)
        assert main_screen(app).dataset == "notes"
        assert app.query_one(DatasetDetails).content  # the details still show
        await ask(app, pilot, "fox")
        errors = [m for m, severity in seen if severity == "error"]
        assert errors and "chunk_size" in errors[0]
        assert app.is_running and main_screen(app).result is None


async def test_an_empty_home_without_samples_shows_how_to_start(kx_home: Path) -> None:
    app = KxApp(_hash_engine(), samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        assert app.query_one("#first-run").display
        assert main_screen(app).dataset is None
        await pilot.press("enter")  # nothing to query: still alive
        await pilot.press("escape", "question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.press("q")
    assert app.return_code in (0, None)


async def test_an_empty_home_gets_the_sample_handbook(kx_home: Path, tmp_path: Path) -> None:
    samples = tmp_path / "samples"
    samples.mkdir()
    for name in ("remote-work.md", "onboarding.md"):
        shutil.copy(SAMPLES / name, samples / name)
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    app = KxApp(engine, settings=engine.settings, samples=samples)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        listed = app.query_one(DatasetList).summaries
        assert list(listed) == ["handbook"] and listed["handbook"].documents == 2
        assert main_screen(app).dataset == "handbook"
        assert not app.query_one("#first-run").display


async def test_watching_the_inbox_shows_activity(handbook_engine: Engine) -> None:
    app = KxApp(handbook_engine, settings=handbook_engine.settings, watch_settle_seconds=0.0)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        await pilot.press("escape", "w")
        assert app.query_one(WatchPanel).watching
        inbox = handbook_engine.settings.home / "inbox" / "handbook"
        (inbox / "parking.md").write_text("Staff parking is free in the north lot after six.\n")
        (inbox / "sites" / "north").mkdir(parents=True)
        (inbox / "sites" / "north" / "index.md").write_text("The north site has forty desks.\n")
        (inbox / "blob.bin").write_bytes(b"\x00\x01binary")
        log = app.query_one(ActivityLog)
        for _ in range(200):  # the watcher's own thread; poll the UI until it has reported both
            await pilot.pause(0.05)
            written = log.lines_written
            if sum(line.startswith("[green]added") for line in written) == 2 and any("refused" in line
                                                                                    for line in written):
                break
        text = "\n".join(log.lines_written)
        assert re.search(r"added\s*\[/\] parking.md \(1 passage\)", text), text
        assert re.search(r"added\s*\[/\] sites/north/index.md \(1 passage\)", text), text
        assert "refused" in text
        await settle(app, pilot, rounds=3)
        assert app.query_one(DatasetList).summaries["handbook"].documents == 8
        (inbox / "parking.md").unlink()                                      # a file leaves: retired
        (inbox / "sites" / "north" / "index.md").rename(inbox / "sites" / "north" / "desks.md")   # renamed
        for _ in range(200):
            await pilot.pause(0.05)
            written = "\n".join(log.lines_written)
            if "retired" in written and "renamed" in written:
                break
        text = "\n".join(log.lines_written)
        assert re.search(r"retired\s*\[/\] parking.md: no longer answers", text), text
        assert re.search(r"renamed\s*\[/\] sites/north/desks.md: was sites/north/index", text), text
        await settle(app, pilot, rounds=3)
        assert app.query_one(DatasetList).summaries["handbook"].documents == 7   # the counts followed
        await pilot.press("w")
        assert not app.query_one(WatchPanel).watching


async def test_watching_an_empty_inbox_keeps_what_came_from_it_and_says_so(handbook_engine: Engine) -> None:
    inbox = handbook_engine.settings.home / "inbox" / "handbook"
    inbox.mkdir(parents=True)
    for name, text in (("parking.md", "Staff parking is free after six.\n"), ("desks.md", "Forty desks.\n")):
        (inbox / name).write_text(text)
        handbook_engine.ingest("handbook", [from_file(inbox / name, 1 << 20)])
        (inbox / name).unlink()   # gone before the watch starts: the inbox is empty then
    app = KxApp(handbook_engine, settings=handbook_engine.settings, watch_settle_seconds=0.0)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        notes = recording_notify(app)
        await pilot.press("escape", "w")
        assert app.query_one(WatchPanel).watching
        log = app.query_one(ActivityLog)
        for _ in range(200):  # the watcher's own thread; poll the UI until it has reported
            await pilot.pause(0.05)
            if any("kept" in line for line in log.lines_written):
                break
        text = "\n".join(log.lines_written)
        assert re.search(r"kept\s*\[/\] handbook is empty, but the dataset holds 2 documents from it: kept, "
                         r"none retired", text), text
        assert "retired  " not in text
        assert ("the watched folder is empty; the dataset's 2 document(s) from it were kept, not retired",
                "warning") in notes
        assert app.query_one(WatchPanel).watching
        assert handbook_engine.dataset_summary("handbook").documents == 8


async def test_the_watch_panel_shows_a_file_names_escapes_and_obeys_none(handbook_engine: Engine) -> None:
    """A file name is the folder's, not kx's: one holding an escape sequence is refused, and its line shows it."""
    obeyed = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
    app = KxApp(handbook_engine, settings=handbook_engine.settings, watch_settle_seconds=0.0)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        await pilot.press("escape", "w")
        inbox = handbook_engine.settings.home / "inbox" / "handbook"
        (inbox / "evil\x1b]0;pwned\x07\u202etxt.md").write_text("A name that retitles the terminal.\n")
        log = app.query_one(ActivityLog)
        for _ in range(200):  # the watcher's own thread; poll the UI until it has reported
            await pilot.pause(0.05)
            if any("refused" in line for line in log.lines_written):
                break
        await pilot.pause()
        drawn = "\n".join(strip.text for strip in log.lines)   # what the log draws, line by line
        assert "refused" in drawn and "evil␛]0;pwned␇\ufffdtxt.md" in drawn, drawn
        assert not obeyed.search(drawn), drawn


async def test_a_notification_quoting_stored_text_obeys_none_of_its_escapes(kx_home: Path) -> None:
    """Toasts quote paths, document names and errors (a watch that stopped, a file that is gone): whoever raises
    one, the app cleans it, as it cleans the views."""
    obeyed = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.screen.query_one(ActivityLog).notify("/mnt/evil\x1b]0;pwned\x07\u202etxt is no longer there",
                                                 title="watch\x9b2J stopped", severity="error")
        await pilot.pause()
        shown = [(n.title, n.message) for n in app._notifications]
    assert shown[-1] == ("watch\ufffd2J stopped", "/mnt/evil␛]0;pwned␇\ufffdtxt is no longer there")
    assert not any(obeyed.search(title + message) for title, message in shown), shown


async def test_engine_advisories_are_shown_as_notifications(kx_home, monkeypatch) -> None:
    from engine import Engine, load_settings
    from kx_tui.tui.app import KxApp

    monkeypatch.setenv("KX_SERVE_EMBED_MODEL", "none")
    engine = Engine(load_settings({}))
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(4):
            await pilot.pause()
            await app.workers.wait_for_complete()
        messages = [n.message for n in app._notifications]
    assert any("no embedding model" in m for m in messages)


async def test_a_near_duplicate_hit_says_which_hit_it_repeats(kx_home: Path) -> None:
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    note = "Parcels ship from the Leeds warehouse every weekday morning by courier."
    # the same words (so the same vector) in three different byte strings: three documents
    copies = [from_text(note), from_text(note + " "), from_text(" " + note)]
    others = [from_text(t) for t in ("Parcels lost in transit are claimed from the courier after ten days.",
                                     "The warehouse counts its stock every quarter.",
                                     "Annual leave is booked in the HR portal.")]
    engine.ingest("shipping", copies + others)
    app = KxApp(engine, settings=engine.settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        await ask(app, pilot, "when do parcels ship from the warehouse")
        shown = _results_text(app)
        hits = main_screen(app).result.hits
        marked = [i for i, text in enumerate(shown) if "≈ near-duplicate of #1" in text]
        assert len(marked) == 2
        assert all(hits[i].duplicate_of == hits[0].passage_ref for i in marked)
        assert marked == [len(hits) - 2, len(hits) - 1]  # after every distinct passage


async def test_selecting_a_dataset_with_a_backlog_finishes_its_embedding(kx_home: Path) -> None:
    engine = _hash_engine()
    files = sorted(SAMPLES.glob("*.md"))
    engine.ingest("handbook", [from_file(f, engine.settings.max_document_bytes) for f in files],
                  should_stop=lambda: True)  # stage 1 only: keyword-searchable, nothing embedded
    assert engine.dataset_summary("handbook").backlog > 0
    app = KxApp(engine, settings=engine.settings)
    notes = recording_notify(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        await settle(app, pilot, rounds=3)
        assert engine.dataset_summary("handbook").backlog == 0
        assert any("an earlier ingest of 'handbook' left" in text for text, _ in notes)
        assert any("passages embedded; dense search covers the whole dataset" in text for text, _ in notes)
        await ask(app, pilot, "refund")
        assert main_screen(app).result.dense_coverage == 1.0
        assert "dense covers" not in plain_text(app.query_one("#query-status", Static).content)


async def test_the_status_line_says_how_much_dense_covered(kx_home: Path) -> None:
    engine = _hash_engine()
    engine.ingest("handbook", [from_text("refunds are paid within fourteen days")])
    engine.ingest("handbook", [from_text("refunds for damaged loggers need a photo")], should_stop=lambda: True)
    result = engine.query("handbook", "refunds", mode="hybrid")  # before the workbench finishes the backlog
    assert result.dense_coverage == 0.5
    app = KxApp(engine, settings=engine.settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        screen = main_screen(app)
        screen.result = result
        assert "dense covers 50%" in plain_text(screen.status_text())
