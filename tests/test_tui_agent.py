"""The TUI's "ask the agent" action, driven through App.run_test() and Pilot on the real handbook."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.widgets import Input, OptionList, Static

from engine import Engine, load_settings
from engine.text.inputs import from_file
from kx_tui.tui.app import KxApp
from kx_tui.tui.screens.agent import AgentScreen
from kx_tui.tui.screens.hit_detail import PassageDetailScreen

from .helpers import settle

pytestmark = pytest.mark.slow
SIZE = (140, 45)


@pytest.fixture
def engine(handbook_home: Path, real_embedder, monkeypatch: pytest.MonkeyPatch) -> Engine:
    monkeypatch.setenv("KX_HOME", str(handbook_home))
    engine = Engine(load_settings({}), embedder=real_embedder)
    yield engine
    engine.close()


async def open_agent(app: KxApp, pilot) -> None:
    """Wait for the app to settle, leave the query box and open the agent screen (key a)."""
    await settle(app, pilot, rounds=3)
    await pilot.press("escape", "a")
    await pilot.pause()


async def test_ask_the_agent_shows_steps_and_an_answer_whose_citations_open(engine: Engine) -> None:
    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await open_agent(app, pilot)
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
        await open_agent(app, pilot)
        await pilot.press("enter")
        await settle(app, pilot, rounds=3)
        screen = app.screen
        assert isinstance(screen, AgentScreen) and screen.run_result is None
        assert screen.steps == []


# what a terminal obeys rather than shows: C0 but newline and tab, DEL, C1, the bidi overrides and isolates
# (the same class as tests/test_terminal_safe.py's)
OBEYED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture
def hostile(kx_home: Path, tmp_path: Path, real_embedder) -> Engine:
    """Dataset 'hostile': documents whose stored text (and title) hold a retitling escape, a C1 CSI and a bidi
    override; built with the real model, as the agent's own searches need."""
    engine = Engine(load_settings({}), embedder=real_embedder)
    texts = {
        "refunds": "# Refunds \x1b]0;pwned\x07 policy\n\nRefunds are paid within 30 days of purchase \x1b]0;pwned\x07 "
                   "with the RMA-7 form.\u202e A refund needs the receipt \x9b2J and the original box.\n",
        "returns": "# Returns\n\nReturned goods \u202egpj.exe are inspected\x1b[2J within five days; refunds "
                   "follow the inspection.\x1b]0;pwned\x07\n",
    }
    for name, text in texts.items():
        (tmp_path / f"{name}.md").write_text(text)
    engine.ingest("hostile", [from_file(tmp_path / f"{name}.md", 1 << 20) for name in texts])
    yield engine
    engine.close()


def _shown(screen: AgentScreen) -> dict[str, str]:
    """Everything the agent screen draws, as the widgets render it."""
    shown = {name: str(screen.query_one(f"#agent-{name}", Static).render()) for name in ("title", "status", "answer")}
    shown["steps"] = "\n".join(str(step.render()) for step in screen.query(".agent-step").results(Static))
    citations = screen.query_one("#agent-citations", OptionList)
    shown["citations"] = "\n".join(str(citations.get_option_at_index(i).prompt) for i in range(citations.option_count))
    return shown


async def test_the_agent_screen_shows_stored_escapes_and_obeys_none(hostile: Engine) -> None:
    app = KxApp(hostile, settings=hostile.settings, samples=None)
    async with app.run_test(size=SIZE) as pilot:
        await open_agent(app, pilot)
        screen = app.screen
        assert isinstance(screen, AgentScreen) and screen.dataset == "hostile"
        goal = screen.query_one("#agent-goal", Input)
        goal.value = "refund \u202epolicy\x1b]0;pwned\x07 with the RMA-7 form"   # pasted: a goal is text like any
        screen.research = lambda goal: None   # held at "researching ...", which shows the goal as typed
        await pilot.press("enter")
        await pilot.pause()
        researching = str(screen.query_one("#agent-status", Static).render())
        assert not OBEYED.search(researching), researching
        assert researching.startswith("researching 'refund \ufffdpolicy␛]0;pwned␇ with the RMA-7 form' in hostile")
        del screen.research   # and now the real run
        await pilot.press("enter")
        await settle(app, pilot, rounds=3)
        assert screen.run_result is not None and screen.run_result.citations
        read = "".join(hit.text for hit in screen.run_result.read.values())
        assert "\x1b]0;pwned\x07" in read and "\u202e" in read   # the run did read the hostile text

        shown = _shown(screen)
        for where, text in shown.items():
            assert not OBEYED.search(text), (where, text)
        assert "␛]0;pwned␇" in shown["answer"] and "RMA-7" in shown["answer"]   # shown, visibly: not dropped
        assert shown["citations"].count("[") == len(screen.run_result.citations)   # labels as they are, no markup


async def test_at_80x24_the_agents_whole_answer_is_reachable(engine: Engine) -> None:
    """The real handbook's refund answer is ten cited sentences, longer than an 80x24 screen: Tab reaches the
    answer, and its first and last lines are each on screen at one end of its scroll."""
    from textual.containers import VerticalScroll

    app = KxApp(engine, settings=engine.settings, samples=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_agent(app, pilot)
        screen = app.screen
        assert isinstance(screen, AgentScreen)
        await pilot.press(*"how long do customers have to ask for a refund", "enter")
        await settle(app, pilot, rounds=3)
        assert screen.run_result is not None
        lines = [" ".join(line.split()) for line in screen.run_result.answer.splitlines() if line.strip()]
        box = screen.query_one("#agent-answer-box", VerticalScroll)
        assert box.max_scroll_y > 0 and box.size.height >= 6, "the answer is longer than its pane, which has room"
        for _ in range(4):                      # the citations have focus after a run: Tab goes round to the answer
            if app.focused is box:
                break
            await pilot.press("tab")
        assert app.focused is box
        for key, line in (("home", lines[0]), ("end", lines[-1])):
            await pilot.press(key)
            await pilot.pause()
            pane = box.scrollable_content_region   # on screen, less the scrollbar
            screen_rows = app.screen._compositor.render_strips()
            rows = [strip.text[pane.x:pane.right] for strip in screen_rows[pane.y:pane.bottom]]
            shown = " ".join(" ".join(rows).split())   # the pane's rows as one run of words: wrapping undone
            assert line in shown, (key, line, shown)
