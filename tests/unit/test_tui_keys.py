"""The keys a daily user reaches for, on every screen: `?`, `q`, the palette, n / p, `y` and `o`.

Driven through App.run_test() and Pilot over a real engine (HashEmbedder for
speed) whose documents were read from real files, so hits carry a source path.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input

from engine import Engine, load_settings
from engine.text.inputs import from_file
from kx_tui.tui.app import SAMPLES, KxApp
from kx_tui.tui.screens.help import HelpScreen

from ..helpers import HashEmbedder, settle

SIZE = (120, 40)


@pytest.fixture
def engine(kx_home: Path, tmp_path: Path) -> Engine:
    folder = tmp_path / "handbook"
    folder.mkdir()
    for source in sorted(SAMPLES.glob("*.md")):
        (folder / source.name).write_text(source.read_text())
    engine = Engine(load_settings({"chunk_size": 200, "chunk_overlap": 40}), embedder=HashEmbedder())
    engine.ingest("handbook", [from_file(f, engine.settings.max_document_bytes) for f in sorted(folder.iterdir())])
    yield engine
    engine.close()


async def _ask(app: KxApp, pilot, text: str = "refund days") -> None:
    await settle(app, pilot)
    app.query_one("#query", Input).focus()
    await pilot.press(*text, "enter")
    await settle(app, pilot)
    await pilot.press("escape")   # focus leaves the box for the results: the letters are keys now
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
