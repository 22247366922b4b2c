"""SVG snapshots of the TUI's main screens (pytest-textual-snapshot's `snap_compare`).

Every screen (main, compare, documents, document, detail, agent, help) at
three terminal sizes: 80x24, 120x36 and 200x50; the watch panel at 80x24.

Regenerate after an intended UI change with
    python -m pytest tests/test_tui_snapshots.py --snapshot-update
and review the SVGs under tests/__snapshots__/test_tui_snapshots/.

One document is a paged report (its extraction injected, with two pages and
a heading path), so the hit list and the passage view show "p. 2 · ...".

Everything time-dependent is pinned here: a dataset's "created" stamp, the
status line's "in N ms" timing and the model's load time, and a document's
"ingested" stamp. HashEmbedder's model id is fixed, so the model and
fingerprint shown in the sidebar are stable already.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from engine import Engine, load_settings
from engine.extract import Extracted, Section
from engine.text.inputs import from_bytes, from_text
from kx_tui.tui.app import KxApp
from kx_tui.tui.screens import document_table as documents_module
from kx_tui.tui.screens import document_text as document_module
from kx_tui.tui.screens.main import MainScreen
from kx_tui.tui.warmup import ModelWarmup
from kx_tui.tui.widgets import datasets as datasets_module

from .helpers import HashEmbedder, inject_extraction

pytestmark = pytest.mark.slow  # every test here drives the whole Textual app: seconds each

SIZE = (100, 30)
SIZES = {"80x24": (80, 24), "120x36": (120, 36), "200x50": (200, 50)}
QUERY = "refund days"

TEXTS = {
    "refunds.md": "Customers may ask for a refund within 30 days of purchase. Refunds go back to the "
                  "original payment method within five working days.",
    "leave.md": "Every employee has 25 days of annual leave a year. Unused days carry over until March.",
    "security.md": "Laptops must use full-disk encryption. Report a lost device to the security team "
                   "within one hour.",
    "travel.md": "Book travel through the portal. Economy class for flights under six hours; "
                 "keep receipts for every expense.",
}


REPORT_PAGES = [
    "1 Scope\nThis report covers customer payments in the last quarter.\n",
    "2 Refunds\n2.1 Time limits\nA refund later than 30 days needs a manager's approval. Most refunds took "
    "four days; the slowest took nine, when the card issuer asked for the receipt again.\n",
]
REPORT = Extracted(
    text="".join(REPORT_PAGES), media_type="application/pdf",
    page_starts=(0, len(REPORT_PAGES[0])),
    sections=(Section(0, 1, "1 Scope"), Section(len(REPORT_PAGES[0]), 1, "2 Refunds"),
              Section(len(REPORT_PAGES[0]) + len("2 Refunds\n"), 2, "2.1 Time limits")),
    title="Payments review, Q3", extractor="snapshot/1",
)
REPORT_BYTES = b"%PDF- stand-in for the snapshot's paged report"


@pytest.fixture(autouse=True)
def _deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pin the formatting of everything that depends on the clock."""
    monkeypatch.setattr(datasets_module, "_when", lambda stamp: "2025-01-01 12:00" if stamp else "—")
    monkeypatch.setattr(documents_module, "_when", lambda stamp: "2025-01-01 12:00" if stamp else "—")
    original = MainScreen.status_text

    def status_text(self: MainScreen, width: int = 0):
        real = self.result
        if real is not None:
            self.result = dataclasses.replace(real, timings_ms={"total": 12.0})
        try:
            return original(self, width)
        finally:
            self.result = real

    monkeypatch.setattr(MainScreen, "status_text", status_text)
    describe = ModelWarmup.describe

    def pinned(self: ModelWarmup) -> str:
        seconds, self.seconds = self.seconds, 1.2
        try:
            return describe(self)
        finally:
            self.seconds = seconds

    monkeypatch.setattr(ModelWarmup, "describe", pinned)
    monkeypatch.setattr(document_module, "datetime", _FixedClock)
    from engine.agent_run import AgentRun

    summary = AgentRun.summary

    def pinned_run(self: AgentRun) -> str:
        elapsed, self.elapsed_ms = self.elapsed_ms, 100.0
        try:
            return summary(self)
        finally:
            self.elapsed_ms = elapsed

    monkeypatch.setattr(AgentRun, "summary", pinned_run)


class _FixedClock:
    @staticmethod
    def fromtimestamp(_stamp: float):
        import datetime

        return datetime.datetime(2025, 1, 1, 12, 0, 0)


def _app(engine: Engine, **kwargs) -> KxApp:
    return KxApp(engine, settings=engine.settings, samples=None, **kwargs)


@pytest.fixture
def small_engine(kx_home: Path, monkeypatch: pytest.MonkeyPatch) -> Engine:
    inject_extraction(monkeypatch, lambda doc: REPORT if doc.data == REPORT_BYTES else None)
    engine = Engine(load_settings({"chunk_size": 200, "chunk_overlap": 40}), embedder=HashEmbedder())
    engine.ingest("policies", [from_text(text, name) for name, text in TEXTS.items()]
                  + [from_bytes(REPORT_BYTES, "reports/payments", "application/pdf")])
    yield engine
    engine.close()


async def _settle(pilot) -> None:
    """Let workers finish and their messages land (a handler may start another worker); stop the text boxes'
    cursors blinking, so a snapshot never catches one half-way."""
    from textual.widgets import Input

    for _ in range(4):
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
    for box in pilot.app.screen.query(Input):
        box.cursor_blink = False
    await pilot.pause()


async def _type_and_send(pilot, text: str = QUERY) -> None:
    await _settle(pilot)          # datasets loaded and selected
    await pilot.press(*text)
    await pilot.press("enter")
    await _settle(pilot)


def test_first_run_panel(snap_compare, kx_home: Path) -> None:
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    try:
        assert snap_compare(_app(engine), terminal_size=SIZE, run_before=_settle)
    finally:
        engine.close()


# what leads to each screen, after the datasets are listed (keys as Pilot presses them; "ask" runs QUERY)
SCREENS = {
    "main": ["ask", "escape"],                              # the answer, the first hit highlighted
    "detail": ["ask", "escape", "down", "enter"],           # the second hit: a passage of the paged report
    "compare": ["ask", "escape", "c"],
    "documents": ["escape", "d", *"re"],                    # filter as you type: "re" in refunds, reports
    "document": ["escape", "d", *"payments", "enter"],      # the paged report, its passages marked
    "agent": ["ask", "escape", "a", "enter"],               # a run of the offline brain, its citations
    "help": ["ask", "escape", "question_mark"],
}


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("screen", list(SCREENS))
def test_screen(snap_compare, small_engine: Engine, screen: str, size: str) -> None:
    async def run_before(pilot) -> None:
        await _settle(pilot)
        for key in SCREENS[screen]:
            if key == "ask":
                await pilot.press(*QUERY, "enter")
            else:
                await pilot.press(key)
            await _settle(pilot)

    assert snap_compare(_app(small_engine), terminal_size=SIZES[size], run_before=run_before)


def test_watch_panel_at_80x24(snap_compare, small_engine: Engine, kx_home: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The watch panel under an answer, after a batch (a file waiting in the inbox when w is pressed): its counts
    and time whole."""
    from engine.watch.events import BatchDone
    from kx_tui.tui.widgets import watch as watch_module
    from kx_tui.tui.widgets.activity import ActivityLog

    describe = watch_module.describe_watch_event
    monkeypatch.setattr(watch_module, "describe_watch_event", lambda event, where: describe(
        dataclasses.replace(event, seconds=0.25) if isinstance(event, BatchDone) else event, where))
    monkeypatch.setattr(watch_module, "_shown_folder", lambda folder: f"$KX_HOME/inbox/{folder.name}")
    inbox = kx_home / "inbox" / "policies"
    inbox.mkdir(parents=True)
    (inbox / "expenses.md").write_text("Expenses are paid back within 14 days of the claim, with receipts.")

    async def run_before(pilot) -> None:
        await _type_and_send(pilot)
        await pilot.press("escape", "w")
        log = pilot.app.screen.query_one(ActivityLog)
        for _ in range(200):   # the watcher's own threads: up to 20 s on a loaded machine
            if any(line.startswith("[bold]batch") for line in log.lines_written):
                break
            await pilot.pause(0.1)
        await _settle(pilot)

    app = _app(small_engine, watch_settle_seconds=0.1)
    assert snap_compare(app, terminal_size=SIZES["80x24"], run_before=run_before)
