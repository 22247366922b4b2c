"""Ask the agent: a goal for the current dataset, its steps live, the cited answer, citations that open.

The run (engine/agent/) happens in a worker; each step arrives as an
`AgentStepped` message and is added to the log as it happens. Enter on a
citation opens the passage inside its document (PassageDetailScreen).

Everything drawn here but the screen's own words is stored or model-derived (the goal, a step's query and
reason, the answer quoting passages, citation labels naming documents, an error naming a path): it goes
through render.terminal_safe, shown and never obeyed, and as plain text, never read as markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Input, OptionList, Static
from textual.worker import get_current_worker

from engine.backend import Backend
from engine.errors import KxError

from ...render import terminal_safe
from ..messages import AgentFailed, AgentFinished, AgentStepped
from ..widgets.footer import KeysFooter
from .keys import HELP, KeysScreen, back_keys

if TYPE_CHECKING:
    from engine.agent_run import AgentRun, Step


class AgentScreen(KeysScreen):
    """A bounded research run over `dataset`; Escape goes back."""

    BINDINGS = [*back_keys(q_shown=False),
                Binding("tab", "app.focus_next", "Next pane", tooltip="the next pane: goal, steps, answer, citations "
                        "(↑↓ PgUp PgDn scroll it)"),
                HELP]
    HELP_TITLE = "agent"
    DEFAULT_CSS = """
    AgentScreen #agent-title { padding: 0 1; background: $primary-darken-2; text-style: bold; }
    AgentScreen #agent-steps { height: 10; border: round $primary-darken-2; scrollbar-gutter: stable; }
    AgentScreen #agent-answer-box { height: 1fr; }
    AgentScreen #agent-answer { padding: 0 1; }
    AgentScreen #agent-status { height: auto; padding: 0 1; color: $text-muted; }
    AgentScreen #agent-citations { height: auto; max-height: 10; }
    /* below 30 rows (80x24) the answer is what the screen is for: the steps and the citations shrink to a few
       lines each (both still scroll), and the answer takes the rest, scrolled by Tab to it then ↑↓ PgUp PgDn */
    AgentScreen.-short #agent-steps { height: 4; }
    AgentScreen.-short #agent-citations { max-height: 5; }
    AgentScreen #agent-answer-box:focus { background: $boost; }
    """

    def __init__(self, backend: Backend, dataset: str, goal: str = "") -> None:
        super().__init__()
        self.backend = backend
        self.dataset = dataset
        self.goal = goal
        self.run_result: AgentRun | None = None
        self.steps: list[str] = []
        self._focus_at_start: Widget | None = None   # where focus was when the run started

    def compose(self) -> ComposeResult:
        yield Static(Text(f"Ask the agent · dataset {terminal_safe(self.dataset)}"), id="agent-title")
        yield Input(value=self.goal, placeholder="A goal, e.g. summarise our refund policy (Enter starts the run)",
                    id="agent-goal")
        yield Static("", id="agent-status", markup=False)
        # one Static per step: wrapped at the pane's width whenever it is drawn, never cut; the pane scrolls
        yield VerticalScroll(id="agent-steps")
        with VerticalScroll(id="agent-answer-box"):
            yield Static("", id="agent-answer", markup=False)
        yield OptionList(id="agent-citations")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#agent-citations").display = False
        self.query_one("#agent-goal", Input).focus()

    @on(Input.Submitted, "#agent-goal")
    def _start(self, event: Input.Submitted) -> None:
        goal = event.value.strip()
        if not goal:
            self.app.notify("type a goal for the agent first", severity="warning")
            return
        self.goal = goal
        self.run_result = None
        self.steps = []
        self.query_one("#agent-steps").remove_children()
        self._focus_at_start = self.focused
        self.query_one("#agent-answer", Static).update("")
        self.query_one("#agent-citations", OptionList).clear_options()
        self.query_one("#agent-citations").display = False
        self.query_one("#agent-status", Static).update(f"researching '{terminal_safe(goal)}' in "
                                                       f"{terminal_safe(self.dataset)}…")
        self.research(goal)

    @work(thread=True, exclusive=True, group="agent", exit_on_error=False)
    def research(self, goal: str) -> None:
        # A new goal cancels this worker, but its thread runs on to the end of its run: from then on it says
        # nothing, or its steps and answer would land in the new goal's log.
        worker = get_current_worker()

        def stepped(step: Step) -> None:
            if not worker.is_cancelled:
                self.post_message(AgentStepped(step))   # from the worker's thread: post_message is thread-safe

        try:
            run = self.backend.run_agent(goal, self.dataset, on_step=stepped)
        except KxError as exc:
            if not worker.is_cancelled:
                self.post_message(AgentFailed(exc.message))
            return
        if not worker.is_cancelled:
            self.post_message(AgentFinished(run))

    def on_agent_stepped(self, message: AgentStepped) -> None:
        line = terminal_safe(message.step.summary())   # its query and reason may quote what it read
        self.steps.append(line)
        steps = self.query_one("#agent-steps", VerticalScroll)
        steps.mount(Static(line, markup=False, classes="agent-step"))
        steps.scroll_end(animate=False)

    def on_agent_finished(self, message: AgentFinished) -> None:
        run = message.run
        self.run_result = run
        notes = "".join(f"note: {terminal_safe(n)}\n" for n in run.notes)
        # the answer quotes passages: their lines are layout, their escapes are not (one for one, keep_layout)
        self.query_one("#agent-answer", Static).update(notes + terminal_safe(run.answer, keep_layout=True))
        self.query_one("#agent-status", Static).update(terminal_safe(run.summary()))
        citations = self.query_one("#agent-citations", OptionList)
        citations.clear_options()
        citations.add_options([Text(terminal_safe(c.label)) for c in run.citations])   # Text: "[" is not markup
        citations.display = bool(run.citations)
        if run.citations:
            citations.highlighted = 0
            if self.focused is self._focus_at_start:   # the user stayed put: take them to the citations
                citations.focus()                      # (one who moved meanwhile keeps their place)

    def on_agent_failed(self, message: AgentFailed) -> None:
        self.query_one("#agent-status", Static).update("the run failed")
        # KxApp.notify cleans every toast's text; markup off: the error may quote a "[" of stored text
        self.app.notify(message.message, title="agent", severity="error", timeout=10, markup=False)

    @on(OptionList.OptionSelected, "#agent-citations")
    def _open(self, event: OptionList.OptionSelected) -> None:
        from .hit_detail import PassageDetailScreen

        if self.run_result is None:
            return
        citation = self.run_result.citations[event.option_index]
        hit = self.run_result.read[citation.ref]
        self.app.push_screen(PassageDetailScreen(self.backend, self.dataset, hit))
