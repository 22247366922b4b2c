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
from engine.errors import KxError, Status
from engine.text.inputs import from_text
from kx_tui.tui.app import KxApp
from kx_tui.tui.screens.compare import CompareScreen
from kx_tui.tui.screens.document_table import DocumentsScreen
from kx_tui.tui.widgets.datasets import DatasetList
from kx_tui.tui.widgets.results import ResultsList

from .helpers import HashEmbedder, main_screen, plain_text, recording_notify, settle, small_engine, status_line

pytestmark = pytest.mark.slow  # every test here drives the whole Textual app: seconds each

SIZE = (120, 40)


def _fox_and_whale() -> Engine:
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


async def _asked(app: KxApp, pilot, text: str) -> None:
    """The app started, `text` typed in the query box and sent, and its answer waited for."""
    await settle(app, pilot, rounds=3)
    app.query_one("#query", Input).value = text
    await pilot.press("enter")
    await settle(app, pilot, rounds=3)


async def test_compare_shows_a_query_with_brackets_and_escapes_as_typed(kx_home: Path) -> None:
    query = "[/] [bold]fox[/bold] \x1b[31mred"
    app = KxApp(_fox_and_whale(), settings=load_settings({}), samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await _asked(app, pilot, query)
        await pilot.press("escape", "c")
        await settle(app, pilot, rounds=3)
        assert isinstance(app.screen, CompareScreen) and app.is_running
        title = plain_text(app.screen.query_one("#compare-title", Static).content)
        assert "“[/] [bold]fox[/bold] ␛[31mred”" in title   # the words as typed: not markup, not an escape


async def test_documents_of_a_dataset_deleted_on_disk_say_why_they_cannot_be_listed(kx_home: Path) -> None:
    app = KxApp(_fox_and_whale(), settings=load_settings({}), samples=None)
    seen = recording_notify(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        shutil.rmtree(kx_home / "datasets" / "alpha")
        await pilot.press("escape", "d")
        await settle(app, pilot, rounds=3)
        assert isinstance(app.screen, DocumentsScreen) and app.is_running
        errors = [m for m, severity in seen if severity == "error"]
        assert errors and "'alpha' does not exist" in errors[-1]
        count = plain_text(app.screen.query_one("#documents-count", Static).content)
        assert "loading" not in count and "could not be listed" in count


async def test_an_answer_made_stale_by_typing_on_does_not_leave_searching_on_show(kx_home: Path) -> None:
    engine = _fox_and_whale()
    gate = threading.Event()
    _gated(engine, {"fox": gate})
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        app.query_one("#query", Input).focus()
        await pilot.press(*"fox", "enter")
        await pilot.pause()
        assert "searching…" in status_line(app)
        await pilot.press(*" whale")   # typed on, not submitted: fox's answer is stale when it comes
        gate.set()
        await settle(app, pilot, rounds=3)
        assert main_screen(app).result is None                       # not shown for "fox whale"
        assert "searching" not in status_line(app)                # and nothing is searching any more


async def test_a_failed_query_leaves_no_answer_of_another_dataset_on_show(
        kx_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = small_engine()
    old.ingest("zold", [from_text("The quick brown fox jumps over the lazy dog. " * 20, name="fox")])
    monkeypatch.setenv("KX_CHUNK_SIZE", "1000")  # set for this app: zold's chunking (200) is refused
    app = KxApp(_fox_and_whale(), settings=load_settings({}), samples=None)
    seen = recording_notify(app)
    async with app.run_test(size=SIZE) as pilot:
        await _asked(app, pilot, "fox")
        assert main_screen(app).result.dataset == "alpha" and "hits in" in status_line(app)
        app.query_one(DatasetList).focus()
        await pilot.press("down")   # zold: built with another chunk size, so its query fails
        await settle(app, pilot, rounds=3)
        assert main_screen(app).dataset == "zold"
        assert any(severity == "error" and "chunk_size" in m for m, severity in seen)
        assert main_screen(app).result is None and app.query_one(ResultsList).option_count == 0
        assert "hits in" not in status_line(app)   # alpha's answer is not passed off as zold's


async def test_a_failure_of_a_query_a_newer_one_replaced_is_not_shown(kx_home: Path) -> None:
    engine = _fox_and_whale()
    gate = threading.Event()
    query = engine.query

    def failing(dataset, text, *args, mode="hybrid", **kwargs):
        if mode == "hybrid":
            gate.wait(10)
            raise KxError(Status.FAILED_PRECONDITION, "the hybrid query failed")
        return query(dataset, text, *args, mode=mode, **kwargs)

    engine.query = failing  # type: ignore[method-assign]
    app = KxApp(engine, settings=engine.settings, samples=None)
    seen = recording_notify(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        app.query_one("#query", Input).value = "fox"
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("escape", "m")   # dense now: the hybrid query is replaced while it still runs
        await pilot.pause()
        gate.set()
        await settle(app, pilot, rounds=3)
        assert not [m for m, severity in seen if severity == "error"]
        assert main_screen(app).result is not None and main_screen(app).result.mode == "dense"
        assert "searching" not in status_line(app)


async def test_a_toast_quoting_a_name_with_brackets_shows_it_as_written(kx_home: Path) -> None:
    from textual.widgets._toast import Toast

    engine = Engine(load_settings({}), embedder=HashEmbedder())
    engine.ingest("alpha", [from_text("the red fox jumps", "notes [/] [draft] [bold]v2")])
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE, notifications=True) as pilot:   # toasts drawn, as in a terminal
        await _asked(app, pilot, "fox")
        await pilot.press("escape", "y")   # the citation names the document
        await settle(app, pilot)
        assert app.is_running
        toasts = [str(toast.render()) for toast in app.screen.query(Toast)]
        assert any("notes [/] [draft] [bold]v2, [chunk 1/1]" in toast for toast in toasts), toasts


@pytest.mark.parametrize("keys, shown", [(("enter",), "#detail-before"), (("c",), "#compare-passage-text"),
                                         (("d", "down", "enter"), "#document-loading")])
async def test_a_view_of_a_dataset_deleted_on_disk_says_it_could_not_load(kx_home: Path, keys, shown) -> None:
    app = KxApp(_fox_and_whale(), settings=load_settings({}), samples=None)
    seen = recording_notify(app)
    async with app.run_test(size=SIZE) as pilot:
        await _asked(app, pilot, "fox")
        await pilot.press("escape")
        if keys[0] == "d":   # the list is read first; the document is gone when it is opened
            await pilot.press("d")
            await settle(app, pilot, rounds=3)
        shutil.rmtree(kx_home / "datasets" / "alpha")
        for key in keys[1:] if keys[0] == "d" else keys:
            await pilot.press(key)
        await settle(app, pilot, rounds=3)
        assert app.is_running
        assert any(severity == "error" and "'alpha' does not exist" in m for m, severity in seen)
        text = plain_text(app.screen.query_one(shown, Static).content)
        assert "loading" not in text and "could not be" in text


async def test_stopping_a_watch_mid_batch_never_freezes_the_screen(kx_home: Path) -> None:
    import time

    from kx_tui.tui.widgets.activity import ActivityLog
    from kx_tui.tui.widgets.watch import WatchPanel

    engine = _fox_and_whale()
    started, release = threading.Event(), threading.Event()
    ingest = engine.ingest

    def slow_ingest(*args, **kwargs):   # a batch whose embedding takes a while
        started.set()
        release.wait(20)
        return ingest(*args, **kwargs)

    engine.ingest = slow_ingest  # type: ignore[method-assign]
    app = KxApp(engine, settings=engine.settings, samples=None, watch_settle_seconds=0.0)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        await pilot.press("escape", "w")
        (kx_home / "inbox" / "alpha" / "otters.md").write_text("Otters hold hands while they sleep.\n")
        for _ in range(200):
            if started.is_set():
                break
            await pilot.pause(0.05)
        assert started.is_set()
        began = time.monotonic()
        await pilot.press("w")
        took = time.monotonic() - began
        release.set()
        assert took < 2, f"w took {took:.1f} s: the UI waited for the batch in hand"
        assert not app.query_one(WatchPanel).watching
        log = app.query_one(ActivityLog)
        for _ in range(200):   # the batch in hand still finishes, and says so
            if any("otters.md" in line for line in log.lines_written):
                break
            await pilot.pause(0.05)
        assert any("added" in line and "otters.md" in line for line in log.lines_written), log.lines_written
        await settle(app, pilot)


async def test_a_replaced_agent_run_adds_no_step_and_no_answer_to_the_new_one(kx_home: Path) -> None:
    from kx_tui.tui.screens.agent import AgentScreen

    engine = _fox_and_whale()
    gate = threading.Event()
    run_agent = engine.run_agent

    def slow_first(goal, dataset=None, max_steps=None, on_step=None):
        if goal == "foxes":   # the first goal's run is slow (a chat model thinking)
            gate.wait(10)
        return run_agent(goal, dataset, max_steps=max_steps, on_step=on_step)

    engine.run_agent = slow_first  # type: ignore[method-assign]
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        await pilot.press("escape", "a")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, AgentScreen)
        await pilot.press(*"foxes", "enter")
        await pilot.pause()
        goal = screen.query_one("#agent-goal", Input)
        goal.value = ""
        await pilot.press(*"whales", "enter")   # a new goal replaces the run under way
        for _ in range(100):
            if screen.run_result is not None:
                break
            await pilot.pause(0.05)
        assert screen.run_result is not None and screen.run_result.goal == "whales"
        steps = list(screen.steps)
        gate.set()   # the replaced run ends now
        await settle(app, pilot, rounds=3)
        assert screen.run_result.goal == "whales"   # its answer is not replaced by the old goal's
        assert screen.steps == steps and not any("foxes" in step for step in steps)


async def test_the_keys_the_first_run_note_names_do_what_it_says(kx_home: Path) -> None:
    import re

    from kx_tui.tui.screens.help import HelpScreen

    app = KxApp(Engine(load_settings({}), embedder=HashEmbedder()), samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        note = plain_text(app.query_one("#first-run", Static).content)
        said = re.search(r"Press (\S+) to quit, (\S+) for the keys", note)
        assert said, note
        quit_key, help_key = said.groups()
        keys = {"F1": "f1", "Ctrl+Q": "ctrl+q", "?": "question_mark"}
        await pilot.press(keys.get(help_key, help_key))   # as the app opens: the query box has focus
        assert isinstance(app.screen, HelpScreen), f"{help_key} did not show the keys"
        await pilot.press("escape")
        await pilot.press(keys.get(quit_key, quit_key))
        await pilot.pause()
        assert not app.is_running, f"{quit_key} did not quit"


@pytest.mark.parametrize("reload", ["palette", "watch batch"])
async def test_datasets_all_deleted_on_disk_leave_none_listed_or_selected(kx_home: Path, reload: str) -> None:
    app = KxApp(_fox_and_whale(), settings=load_settings({}), samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        assert main_screen(app).dataset == "alpha"
        shutil.rmtree(kx_home / "datasets" / "alpha")
        if reload == "palette":
            await pilot.press("ctrl+p")
            await pilot.pause()
            await pilot.press(*"Reload datasets")
            await pilot.pause(0.3)
            await pilot.press("enter")
        else:
            main_screen(app).datasets.load(first_run=False)   # what a watch batch or a retirement does
        await settle(app, pilot, rounds=3)
        assert app.query_one(DatasetList).option_count == 0 and main_screen(app).dataset is None
        assert status_line(app).startswith("no dataset")
        assert app.query_one("#first-run").display


async def test_a_gateway_that_is_down_is_said_once_and_each_action_says_so_not_ingest_one(kx_home: Path) -> None:
    import socket

    from engine.server.client import KxClient

    with socket.socket() as probe:   # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = KxApp(KxClient(f"http://127.0.0.1:{port}", "token", timeout=5), settings=None, samples=None)
    seen = recording_notify(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        errors = [m for m, severity in seen if severity == "error"]
        assert len(errors) == 1 and "cannot reach the gateway" in errors[0]   # once, not once per worker
        assert "not listed" in status_line(app)
        app.query_one("#query", Input).value = "fox"
        await pilot.press("enter")
        await settle(app, pilot)
        for key in ("c", "d", "a"):
            await pilot.press("escape", key)
            await settle(app, pilot)
        said = [m for m, severity in seen if severity == "warning"]
        assert len(said) == 4 and all("could not be listed" in m and "Reload datasets" in m for m in said), said


async def test_a_very_long_query_keeps_compares_title_to_one_line(kx_home: Path) -> None:
    app = KxApp(_fox_and_whale(), settings=load_settings({}), samples=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await _asked(app, pilot, "where does the red fox sleep " * 40)
        await pilot.press("escape", "c")
        await settle(app, pilot, rounds=3)
        assert isinstance(app.screen, CompareScreen)
        title = app.screen.query_one("#compare-title", Static)
        assert title.region.height == 1   # the tables keep the screen
        assert "k=10 · MMR on" in plain_text(title.content)   # the settings are not what the cut takes


async def test_keys_pressed_while_the_sample_is_built_say_to_wait_not_to_ingest(kx_home: Path, tmp_path: Path) -> None:
    from kx_tui.tui.app import SAMPLES

    samples = tmp_path / "samples"
    samples.mkdir()
    (samples / "refunds-and-returns.md").write_text((SAMPLES / "refunds-and-returns.md").read_text())
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    built = threading.Event()
    ingest = engine.ingest

    def slow_ingest(*args, **kwargs):   # the first run's build, taking its time
        built.wait(10)
        return ingest(*args, **kwargs)

    engine.ingest = slow_ingest  # type: ignore[method-assign]
    app = KxApp(engine, settings=engine.settings, samples=samples)
    seen = recording_notify(app)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(100):
            if main_screen(app).build is not None:
                break
            await pilot.pause(0.05)
        for key in ("d", "w", "a"):
            await pilot.press("escape", key)
            await pilot.pause()
        said = [m for m, severity in seen if severity == "warning"]
        built.set()
        await settle(app, pilot, rounds=3)
        assert len(said) == 3 and not any("ingest one" in m or "select a dataset" in m for m in said), said
        assert all("handbook" in m and "built" in m for m in said), said


async def test_keys_the_query_box_types_are_all_dimmed_in_the_footer_while_it_has_focus(kx_home: Path) -> None:
    from textual.widgets._footer import FooterKey

    app = KxApp(_fox_and_whale(), settings=load_settings({}), samples=None)
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(app, pilot, rounds=3)
        app.query_one("#query", Input).focus()
        await pilot.pause()
        enabled = {key.description for key in app.screen.query(FooterKey) if not key.has_class("-disabled")}
        assert not enabled & {"Query", "k+", "k-"}, enabled   # "/", "+" and "-" are typed into the box
        await pilot.press("slash", "plus", "minus")
        assert app.query_one("#query", Input).value == "/+-" and app.k == 10
        await pilot.press("escape")
        await pilot.pause()
        enabled = {key.description for key in app.screen.query(FooterKey) if not key.has_class("-disabled")}
        assert {"Query", "k+", "k-"} <= enabled


@pytest.mark.parametrize("change", ["dataset", "mode"])
async def test_an_answer_is_not_left_under_options_it_was_not_asked_with(kx_home: Path, change: str) -> None:
    engine = _fox_and_whale()
    engine.ingest("beta", [from_text("green apples and a fox", "apple")])
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await _asked(app, pilot, "fox")
        assert main_screen(app).result.dataset == "alpha"
        app.query_one("#query", Input).value = ""   # the box emptied: nothing to run again
        if change == "dataset":
            app.query_one(DatasetList).focus()
            await pilot.press("down")
        else:
            await pilot.press("escape", "m")
        await settle(app, pilot, rounds=3)
        assert main_screen(app).result is None and app.query_one(ResultsList).option_count == 0
        assert "hits in" not in status_line(app)   # alpha's hybrid answer is not shown as beta's, or as dense


async def test_a_listing_a_newer_one_replaced_does_not_overwrite_the_sidebar(kx_home: Path) -> None:
    engine = _fox_and_whale()
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        gate = threading.Event()
        list_datasets = engine.list_datasets

        def slow_listing():   # read now, reported late (a home of many datasets)
            listed = list_datasets()
            gate.wait(10)
            return listed

        engine.list_datasets = slow_listing  # type: ignore[method-assign]
        main_screen(app).datasets.load(first_run=False)
        await pilot.pause(0.2)
        engine.ingest("beta", [from_text("green apples", "apple")])
        engine.list_datasets = list_datasets  # type: ignore[method-assign]
        main_screen(app).datasets.load(first_run=False)   # a watch batch: the newer listing, with beta
        await pilot.pause(0.2)
        gate.set()
        await settle(app, pilot, rounds=3)
        assert list(app.query_one(DatasetList).summaries) == ["alpha", "beta"]


async def test_a_dataset_of_many_documents_fills_the_browser_a_bounded_table_at_a_time(kx_home: Path) -> None:
    from textual.widgets import DataTable

    from engine.records import DocumentSummary
    from kx_tui.tui.screens.document_table import ROWS

    engine = _fox_and_whale()
    many = [DocumentSummary(name=f"notes/n-{i:05d}", ref=f"{i:064x}", media_type="text/markdown", pages=None,
                            passages=2, ingested_at=1.7e9 + i, source_path=None) for i in range(ROWS * 3)]
    engine.list_documents = lambda name, offset=0, limit=100, versions=None: many[offset:offset + limit]  # type: ignore
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        await pilot.press("escape", "d")
        await settle(app, pilot, rounds=3)
        table = app.screen.query_one(DataTable)
        count = lambda: plain_text(app.screen.query_one("#documents-count", Static).content)  # noqa: E731
        assert table.row_count == ROWS and "3,000 of 3,000 documents" in count() and "type to narrow" in count()
        await pilot.press("ctrl+r")   # the order is the whole list's; the table holds its first rows
        assert str(table.get_row_at(0)[0]) == "notes/n-02999"
        await pilot.press(*"n-0299")   # narrowed: every match listed
        await pilot.pause()
        assert table.row_count == 10 and "type to narrow" not in count()


async def test_an_inbox_that_cannot_be_made_is_a_message_not_a_crash(kx_home: Path) -> None:
    from kx_tui.tui.widgets.watch import WatchPanel

    app = KxApp(_fox_and_whale(), settings=load_settings({}), samples=None)
    seen = recording_notify(app)
    (kx_home / "inbox").mkdir(parents=True, exist_ok=True)
    (kx_home / "inbox" / "alpha").write_text("a file where the inbox folder goes")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        await pilot.press("escape", "w")
        await settle(app, pilot)
        assert app.is_running and not app.query_one(WatchPanel).watching
        errors = [m for m, severity in seen if severity == "error"]
        assert errors and str(kx_home / "inbox" / "alpha") in errors[-1] and "press w again" in errors[-1]


async def test_a_listing_that_works_again_on_an_empty_home_no_longer_says_not_listed(kx_home: Path) -> None:
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    list_datasets = engine.list_datasets

    def unreachable():
        raise KxError(Status.UNAVAILABLE, "the home is on a share that is not mounted")

    engine.list_datasets = unreachable  # type: ignore[method-assign]
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        assert "datasets not listed" in status_line(app)
        engine.list_datasets = list_datasets  # type: ignore[method-assign]
        main_screen(app).datasets.load()   # Reload datasets: it works now, and the home is empty
        await settle(app, pilot, rounds=3)
        assert status_line(app).startswith("no dataset") and app.query_one("#first-run").display


async def test_k_at_either_end_says_so_instead_of_doing_nothing(kx_home: Path, monkeypatch) -> None:
    monkeypatch.setenv("KX_MAX_K", "3")
    engine = _fox_and_whale()
    app = KxApp(engine, settings=load_settings({}), samples=None)
    seen = recording_notify(app)
    async with app.run_test(size=SIZE) as pilot:
        await _asked(app, pilot, "fox")
        await pilot.press("escape")
        for _ in range(4):
            await pilot.press("plus")
        await settle(app, pilot, rounds=3)
        assert app.k == 3 and any("k is 3 already, the most kx returns (KX_MAX_K is 3)" in m for m, _s in seen)
        for _ in range(4):
            await pilot.press("minus")
        await settle(app, pilot, rounds=3)
        assert app.k == 1 and any("k is 1 already, the fewest a query asks for" in m for m, _s in seen)
        assert len(main_screen(app).result.hits) <= 1


async def test_o_over_a_gateway_never_opens_a_clients_path_and_says_where_a_missing_file_is(
        kx_home: Path, tmp_path: Path) -> None:
    from dataclasses import replace

    from engine.text.inputs import CLIENT_PREFIX

    gone = tmp_path / "gone.md"
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    engine.ingest("alpha", [replace(from_text("the red fox sleeps in the barn", "barn"), source_path=str(gone)),
                            replace(from_text("the red fox runs to the wood", "wood"),
                                    source_path=f"{CLIENT_PREFIX}/home/someone/wood.md")])
    for settings, missing in ((None, "is not on this machine: the dataset lives behind the gateway"),
                              (load_settings({}), "is no longer there")):
        app = KxApp(engine, settings=settings, samples=None)
        seen = recording_notify(app)
        async with app.run_test(size=SIZE) as pilot:
            await _asked(app, pilot, "red fox")
            await pilot.press("escape")
            names = [h.document_name for h in main_screen(app).result.hits]
            results = main_screen(app).query_one(ResultsList)
            for name in ("barn", "wood"):
                results.focus()
                results.highlighted = names.index(name)
                await pilot.press("o")
                await pilot.pause()
            assert any(str(gone) in m and missing in m for m, _s in seen), (names, seen)
            assert any("was sent through a gateway by a client, from /home/someone/wood.md" in m
                       and "kx opens no path a client sent" in m for m, _s in seen), seen
