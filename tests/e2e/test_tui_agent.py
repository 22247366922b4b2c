"""The TUI's "ask the agent" action, driven through App.run_test() and Pilot on the real handbook."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, OptionList, Static

from engine import Engine, load_settings
from kx_tui.tui.app import KxApp
from kx_tui.tui.screens.agent import AgentScreen
from kx_tui.tui.screens.hit_detail import PassageDetailScreen

from ..helpers import settle

pytestmark = pytest.mark.slow
SIZE = (140, 45)


@pytest.fixture
def engine(handbook_home: Path, real_embedder, monkeypatch: pytest.MonkeyPatch) -> Engine:
    monkeypatch.setenv("KX_HOME", str(handbook_home))
    engine = Engine(load_settings({}), embedder=real_embedder)
    yield engine
    engine.close()


async def test_ask_the_agent_shows_steps_and_an_answer_whose_citations_open(engine: Engine) -> None:
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        await pilot.press("escape", "a")  # leave the query box, then ask the agent
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, AgentScreen) and screen.dataset == "handbook"
        assert app.focused is screen.query_one("#agent-goal", Input)
        await pilot.press(*"summarise our refund policy", "enter")
        await settle(app, pilot, rounds=3)

        lines = screen.steps
        assert lines and lines[0].startswith("step 1: searched 'summarise our refund policy'")
        assert len(lines) == len(screen.run_result.steps)  # one line per step, as they came
        answer = str(screen.query_one("#agent-answer", Static).render())
        assert "From refunds-and-returns:" in answer and "RMA-7" in answer
        assert str(screen.query_one("#agent-status", Static).render()).startswith("stopped: ")

        citations = screen.query_one("#agent-citations", OptionList)
        assert citations.option_count == len(screen.run_result.citations) > 0
        assert app.focused is citations
        await pilot.press("enter")
        await settle(app, pilot, rounds=3)
        detail = app.screen
        assert isinstance(detail, PassageDetailScreen)
        first = screen.run_result.citations[0]
        assert detail.hit.passage_ref == first.ref and detail.highlighted_range is not None
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, AgentScreen)


async def test_an_empty_goal_is_a_warning_not_a_run(engine: Engine) -> None:
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, rounds=3)
        await pilot.press("escape", "a")
        await pilot.pause()
        await pilot.press("enter")
        await settle(app, pilot, rounds=3)
        screen = app.screen
        assert isinstance(screen, AgentScreen) and screen.run_result is None
        assert screen.steps == []
