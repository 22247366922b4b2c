"""The keys a daily user reaches for, on every screen: `?`, `q`, the palette, n / p, `y` and `o`.

Driven through App.run_test() and Pilot over a real engine (HashEmbedder for
speed) whose documents were read from real files, so hits carry a source path.

The tests marked slow drive the whole Textual app (seconds each); the others check its parts.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import Input

from engine import Engine
from engine.text.inputs import from_file
from kx_tui.render import citation
from kx_tui.tui.app import SAMPLES, KxApp
from kx_tui.tui.screens.compare import CompareScreen
from kx_tui.tui.screens.document_table import DocumentsScreen
from kx_tui.tui.screens.document_text import DocumentScreen
from kx_tui.tui.screens.help import HelpScreen
from kx_tui.tui.screens.hit_detail import PassageDetailScreen
from kx_tui.tui.screens.main import MainScreen

from .helpers import ask, settle, small_engine

SIZE = (120, 40)


@pytest.fixture
def engine(kx_home: Path, tmp_path: Path) -> Engine:
    folder = tmp_path / "handbook"
    folder.mkdir()
    for source in sorted(SAMPLES.glob("*.md")):
        (folder / source.name).write_text(source.read_text())
    engine = small_engine()
    engine.ingest("handbook", [from_file(f, engine.settings.max_document_bytes) for f in sorted(folder.iterdir())])
    yield engine
    engine.close()


async def _ask_then_browse(app: KxApp, pilot, text: str = "refund days") -> None:
    """The query asked and answered, then focus left the box for the results: the letters are keys now."""
    await settle(app, pilot)
    await ask(app, pilot, text)
    await pilot.press("escape")
    await pilot.pause()


def _help_text(app: KxApp) -> str:
    screen = app.screen
    assert isinstance(screen, HelpScreen)
    return "\n".join(" | ".join(row) for row in screen.rows())


def _notes(app: KxApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


def test_the_footer_drops_the_least_important_keys_first() -> None:
    """The footer's fitting drops the least important keys first and never Help or Quit."""
    from textual.binding import Binding

    from kx_tui.tui.widgets.footer import fit, key_width

    items = [(Binding(k, a, d), k) for k, a, d in (("m", "mode", "Mode"), ("c", "compare", "Compare"),
                                                  ("?", "show_keys", "Help"), ("q", "app.quit", "Quit"))]
    total = sum(key_width(d, b.description) for b, d in items)
    assert fit(items, total, ()) == items
    assert [b.action for b, _ in fit(items, total - 1, ())] == ["mode", "show_keys", "app.quit"]
    assert [b.action for b, _ in fit(items, total - 1, ("compare",))] == ["compare", "show_keys", "app.quit"]
    assert [b.action for b, _ in fit(items, 3, ())] == ["show_keys", "app.quit"]


@pytest.mark.slow
async def test_help_shows_the_current_screens_keys(engine: Engine) -> None:
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await _ask_then_browse(app, pilot)
        await pilot.press("question_mark")
        text = _help_text(app)
        assert "compare hybrid and dense" in text and "copy its citation" in text
        await pilot.press("question_mark")        # ? closes it again
        assert isinstance(app.screen, MainScreen)
        await pilot.press("enter")                # the passage view
        await settle(app, pilot)
        assert isinstance(app.screen, PassageDetailScreen)
        await pilot.press("question_mark")
        text = _help_text(app)
        assert "copy the passage's citation" in text and "open the source file" in text
        assert "compare hybrid and dense" not in text   # the main screen's keys are not this screen's
        await pilot.press("escape")
        await pilot.press("escape", "d")
        await settle(app, pilot)
        await pilot.press("down")                  # from the filter into the table: ? is a key again
        await pilot.press("question_mark")
        assert "sort by the next column" in _help_text(app)


@pytest.mark.slow
async def test_q_closes_every_pushed_screen_and_quits_from_the_main_one(engine: Engine) -> None:
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await _ask_then_browse(app, pilot)
        for key, kind in (("enter", PassageDetailScreen), ("c", CompareScreen), ("question_mark", HelpScreen)):
            await pilot.press(key)
            await settle(app, pilot)
            assert isinstance(app.screen, kind)
            await pilot.press("q")
            await pilot.pause()
            assert isinstance(app.screen, MainScreen), kind
        await pilot.press("d")
        await settle(app, pilot)
        assert isinstance(app.screen, DocumentsScreen)
        await pilot.press("q")                    # the filter has focus: q is typed there
        assert app.screen.query_one(Input).value == "q"
        await pilot.press("backspace", "down", "enter")
        await settle(app, pilot)
        assert isinstance(app.screen, DocumentScreen)
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, DocumentsScreen)
        await pilot.press("q")                    # the table has focus now
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code in (0, None) and not app.is_running


@pytest.mark.slow
async def test_the_palette_lists_each_command_once(engine: Engine) -> None:
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await _ask_then_browse(app, pilot)
        for _ in range(2):
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert len(titles) == len(set(titles)) and "Keys" in titles, titles
            await pilot.press("enter")            # and on a pushed screen
            await settle(app, pilot)
        keys = next(c for c in app.get_system_commands(app.screen) if c.title == "Keys")
        keys.callback()
        await pilot.pause()
        assert "copy the passage's citation" in _help_text(app)


@pytest.mark.slow
async def test_n_and_p_start_from_the_first_passage(engine: Engine) -> None:
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=(100, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("escape", "d")
        await settle(app, pilot)
        await pilot.press("down", "enter")
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, DocumentScreen) and len(screen.passages) >= 3
        body = screen.query_one("#document-body")
        assert body.scroll_y == 0
        rows = screen._heading_rows()
        await pilot.press("n")                    # the first passage is on screen already: on to the second
        await pilot.pause()
        assert screen.current == 1 and 0 < rows[1] - 1 <= body.scroll_y <= rows[1]  # its heading (and margin) on top
        await pilot.press("n")
        await pilot.pause()
        assert screen.current == 2
        await pilot.press("p", "p")
        await pilot.pause()
        assert screen.current == 0 and body.scroll_y <= rows[0]
        heading = Console(width=300, record=True, color_system=None)
        heading.print(screen.query_one("#passage-1").content)
        assert "shared)" in heading.export_text()


@pytest.mark.slow
async def test_y_copies_the_hits_citation(engine: Engine) -> None:
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await _ask_then_browse(app, pilot)
        await pilot.press("down", "y")
        await pilot.pause()
        hit = app.screen_stack[0].result.hits[1]
        assert app.clipboard == citation(hit, "handbook")
        assert hit.document_name in app.clipboard and hit.label in app.clipboard
        assert f"chars {hit.char_start}–{hit.char_end}" in app.clipboard
        await pilot.press("enter")
        await settle(app, pilot)
        app.copy_to_clipboard("")
        await pilot.press("y")                    # and from the passage view
        assert app.clipboard == citation(hit, "handbook")


@pytest.mark.slow
async def test_o_opens_the_source_file_with_the_desktop_opener_or_says_why_not(
        engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    opened = tmp_path / "opened.txt"
    opener = bin_dir / "xdg-open"
    opener.write_text(f"#!/bin/sh\necho \"$1\" >> {opened}\n")
    opener.chmod(opener.stat().st_mode | stat.S_IXUSR)
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await _ask_then_browse(app, pilot)
        hit = app.screen_stack[0].result.hits[0]
        assert hit.source_path and Path(hit.source_path).exists()
        await pilot.press("o")                    # no display: nothing to open it on
        await pilot.pause()
        assert any("no desktop opener" in n and hit.source_path in n for n in _notes(app)), _notes(app)
        monkeypatch.setenv("DISPLAY", ":0")
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        await pilot.press("o")
        for _ in range(100):
            if opened.exists():
                break
            await pilot.pause(0.05)
        assert opened.read_text().strip() == hit.source_path
        assert any(n.startswith(f"opening {hit.source_path}") for n in _notes(app))
        Path(hit.source_path).unlink()
        await pilot.press("o")
        await pilot.pause()
        assert any("is no longer there" in n for n in _notes(app))
