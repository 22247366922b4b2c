"""The workbench's default screen: datasets on the left, a query box and its explained answer on the right.

The screen holds the layout, the bindings (here, so a pushed screen such as
a passage, compare or documents hides them) and the status line. The work
is done by the parts it holds, each in its own module, whose workers run on
this screen and post their messages here; the handlers below hand each
message to its part:

- `DatasetLoader` (dataset_loader.py): the sidebar's list, the selected
  dataset, its indexes opened and its backlog embedded;
- `QueryRunner` (query_runner.py): the query in an exclusive worker, a stale
  answer dropped, a query held until there is a dataset to ask;
- `FirstRun` (first_run.py): the shipped samples built into an empty home;
- `ModelStart` (model_start.py): the model's warm-up and the advisories;
- `MainKeys` (main_keys.py): what the keys and the commands do.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.keys import REPLACED_KEYS, key_to_character
from textual.widgets import Header, Input, OptionList, Static
from textual.worker import Worker, WorkerState

from engine.errors import KxError
from engine.records import QueryResult

from ..messages import (
    DatasetsLoaded,
    IngestFinished,
    IngestProgressed,
    ModelWarmed,
    QueryAnswered,
    QueryFailed,
    QueryWaiting,
    WarmupNoted,
    WatchBatchDone,
    WatchLineageChanged,
)
from ..warmup import BuildProgress
from ..widgets.datasets import DatasetDetails, DatasetList
from ..widgets.first_run import BuildProgressLine, FirstRunNote
from ..widgets.footer import KeysFooter
from ..widgets.query import QueryBox
from ..widgets.results import ResultsList
from ..widgets.status import StatusLine, flow
from ..widgets.watch import WatchPanel
from .dataset_loader import DatasetLoader
from .first_run import SAMPLE_DATASET, FirstRun
from .keys import HELP, HELP_F1, KeysScreen, key_bindings
from .main_keys import MainKeys
from .model_start import ModelStart
from .query_runner import QueryRunner


def error_text(error: BaseException) -> str:
    return error.message if isinstance(error, KxError) else f"unexpected {type(error).__name__}: {error}"


def _typed(key: str) -> bool:
    """True for a key that types a character (m, +, ?), which belongs to the query box while it has focus."""
    # Textual's short names ("plus", "minus", "slash") are not ones key_to_character knows: ask with its long one
    character = key_to_character(REPLACED_KEYS.get(key, key))
    return character is not None and character.isprintable()


class MainScreen(KeysScreen):
    # Inline, not CSS_PATH: Textual 8 loads a screen's CSS_PATH when it is pushed, never for the default screen.
    # The status line and the first run's widgets carry their own (widgets/status.py, widgets/first_run.py).
    DEFAULT_CSS = """
    #body {
        height: 1fr;
    }

    #sidebar {
        /* a third of a wide terminal, but never so wide that an 80-column one
           leaves the results too narrow for their header line */
        width: 28%;
        min-width: 24;
        max-width: 44;
        border-right: solid $primary-darken-2;
    }

    .panel-title {
        text-style: bold;
        padding: 0 1;
        background: $primary-darken-2;
    }

    #main {
        width: 1fr;
    }

    /* below 30 rows the watch log gives its room to the hits (App.VERTICAL_BREAKPOINTS) */
    MainScreen.-short WatchPanel > ActivityLog {
        height: 4;
    }
    """
    BINDINGS = [
        Binding("slash", "focus_query", "Query", key_display="/", tooltip="focus the query box"),
        Binding("m", "cycle_mode", "Mode", tooltip="cycle the mode: hybrid → dense → sparse"),
        Binding("r", "toggle_rerank", "MMR", tooltip="MMR rerank on/off"),
        Binding("plus,equals_sign", "more", "k+", key_display="+", tooltip="one more hit (k)"),
        Binding("minus", "fewer", "k-", key_display="-", tooltip="one fewer hit (k)"),
        Binding("c", "compare", "Compare", tooltip="compare hybrid and dense for this query"),
        Binding("d", "documents", "Documents", tooltip="browse the selected dataset's documents"),
        Binding("w", "toggle_watch", "Watch", tooltip="watch the dataset's inbox folder (start/stop)"),
        Binding("a", "ask_agent", "Agent",
                tooltip="ask the agent: a bounded research run over the dataset, with citations"),
        Binding("y", "copy_citation", "Cite", tooltip="on a hit: copy its citation (document, pages, chunk, chars)"),
        Binding("o", "open_source", "Open file", tooltip="on a hit: open its source file with the desktop's opener"),
        HELP,
        Binding("q", "app.quit", "Quit", tooltip="quit"),
    ]
    # what the footer keeps when the terminal is narrow, most important first (Help and Quit always stay)
    FOOTER_PRIORITY = ("ask_agent", "compare", "documents", "cycle_mode", "toggle_watch", "toggle_rerank",
                       "copy_citation", "focus_query", "open_source", "more", "fewer")
    # The one-letter keys type into the query box while it has focus. An action with a key that types nothing
    # (Help's F1) stays on: check_action rules on the action, not the key, and that key must still work there.
    _TYPED_ACTIONS = (frozenset(b.action for b in key_bindings(BINDINGS) if any(_typed(k) for k in b.key.split(",")))
                      - {b.action for b in key_bindings([*BINDINGS, HELP_F1])
                         if not any(_typed(k) for k in b.key.split(","))})

    def __init__(self) -> None:
        super().__init__()
        self.queries = QueryRunner(self, target=self._target, on_change=self.update_status,
                                   no_dataset=lambda: self.no_dataset("no dataset selected; ingest one first"))
        self.datasets = DatasetLoader(self, on_change=self.update_status, on_empty=self.first_run,
                                      on_embedded=self.queries.rerun)
        self.samples = FirstRun(self)
        self.model = ModelStart(self, self.samples, on_change=self.update_status)
        self.keys = MainKeys(self, self.queries, self.datasets, on_change=self.update_status,
                             no_dataset=self.no_dataset)

    # what the status line and the tests read: the selected dataset, the answer shown, the first run's build
    @property
    def dataset(self) -> str | None:
        return self.datasets.selected

    @property
    def result(self) -> QueryResult | None:
        return self.queries.result

    @result.setter
    def result(self, result: QueryResult | None) -> None:
        self.queries.result = result

    @property
    def held(self) -> str | None:
        return self.queries.held

    @property
    def build(self) -> BuildProgress | None:
        return self.samples.build

    def compose(self) -> ComposeResult:
        kx = self.kx
        yield Header()
        with Horizontal(id="body"):
            with Vertical(id="sidebar"):
                yield Static("Datasets", classes="panel-title")
                yield DatasetList(id="datasets")
                yield DatasetDetails(id="dataset-details")
            with Vertical(id="main"):
                yield QueryBox(placeholder="Ask a question (Enter runs it; Esc leaves the box)", id="query")
                yield StatusLine("", id="query-status")
                yield BuildProgressLine("", id="build-progress")
                yield FirstRunNote(id="first-run")
                yield ResultsList(id="results")
                yield WatchPanel(kx.backend, kx.settings, settle_seconds=kx.watch_settle_seconds, id="watch")
        yield KeysFooter(self.FOOTER_PRIORITY)

    def on_mount(self) -> None:
        self.query_one(BuildProgressLine).display = False
        self.query_one(FirstRunNote).display = False
        self.update_status()
        self.model.start()
        self.datasets.load()
        self.model.advise()
        self.query_one("#query", Input).focus()

    # -- messages, each handed to its part ------------------------------------------

    def on_warmup_noted(self, message: WarmupNoted) -> None:
        self.model.noted(message)

    def on_model_warmed(self, _message: ModelWarmed) -> None:
        self.model.warmed()

    def on_datasets_loaded(self, message: DatasetsLoaded) -> None:
        self.datasets.loaded(message)
        self.queries.release()

    @on(OptionList.OptionHighlighted, "#datasets")
    def _dataset_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id and event.option.id != self.dataset:
            self.datasets.select(event.option.id)
            self.queries.rerun()

    def on_watch_batch_done(self, _message: WatchBatchDone) -> None:
        self.datasets.load(first_run=False)  # an exclusive worker: a burst of batches reloads once

    def on_watch_lineage_changed(self, _message: WatchLineageChanged) -> None:
        self.datasets.load(first_run=False)  # a retirement changes the counts without a batch

    def first_run(self) -> None:
        """No datasets: ingest the shipped handbook samples, or say how to add documents."""
        if not self.samples.start():
            self.datasets.listed = True
            self.query_one(FirstRunNote).display = True
            self.queries.drop_held("there is no dataset to ask yet")
        self.update_status()   # "handbook (building)", or "no dataset", no longer "…"

    def on_ingest_progressed(self, message: IngestProgressed) -> None:
        self.samples.progressed(message)

    def on_ingest_finished(self, message: IngestFinished) -> None:
        self.samples.finished(message.report, answering=bool(self.queries.held))
        self.update_status()
        self.datasets.load(select=message.report.dataset, first_run=False)

    @on(Input.Submitted, "#query")
    def _submitted(self, event: Input.Submitted) -> None:
        self.queries.run(event.value)

    def on_query_waiting(self, message: QueryWaiting) -> None:
        self.queries.waiting(message)

    def on_query_answered(self, message: QueryAnswered) -> None:
        self.queries.answered(message)

    def on_query_failed(self, message: QueryFailed) -> None:
        self.queries.failed(message)

    @on(OptionList.OptionSelected, "#results")
    def _open_hit(self, event: OptionList.OptionSelected) -> None:
        self.keys.open_hit(event.option_index)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            if event.worker.group == "ingest":
                self.samples.end()
                self.queries.drop_held("the sample dataset could not be built")
                self.datasets.load(first_run=False)
            elif event.worker.group == "datasets":
                self.datasets.listed = True
                self.datasets.list_failed = True
                self.queries.drop_held("the datasets could not be listed")
            self.queries.pending = None
            self.update_status()
            self.notify(error_text(event.worker.error), severity="error", timeout=10)

    # -- the status line ----------------------------------------------------------------

    def _target(self) -> tuple[str | None, str | None]:
        """The dataset a query asks; without one, what a query waits for (None: nothing will bring one)."""
        hold = (f"your query runs once '{SAMPLE_DATASET}' is built" if self.build is not None
                else "your query runs once the datasets are listed" if not self.datasets.listed else None)
        return self.dataset, hold

    def no_dataset(self, otherwise: str) -> str:
        """What an action that needs a dataset says without one: `otherwise` ("ingest one first"), unless one is
        on its way or the datasets could not be listed, where that would send the user the wrong way."""
        if self.build is not None:
            return f"'{SAMPLE_DATASET}' is being built from the samples; it is selected once it is built"
        if self.datasets.list_failed:
            return "the datasets could not be listed (the error said why); Ctrl+P, Reload datasets tries again"
        return otherwise

    def status_text(self, width: int = 0) -> Text:
        """dataset · mode · MMR · k · the model's state · the query's state, in lines of `width` (0: one line)."""
        kx = self.kx
        name = self.dataset or (f"{SAMPLE_DATASET} (building)" if self.build is not None else
                                "…" if not self.datasets.listed else
                                "datasets not listed" if self.datasets.list_failed else "no dataset")
        return flow([(name, "bold"), (kx.mode, ""), (f"MMR {'on' if kx.rerank else 'off'}", ""), (f"k={kx.k}", ""),
                     (kx.warmup.describe(), "dim"), *self.queries.status_parts()], width)

    def update_status(self) -> None:
        status = self.query_one(StatusLine)
        status.update(self.status_text(status.content_region.width))

    def on_resize(self) -> None:
        self.call_after_refresh(self.update_status)  # the status line's width is known once laid out

    # -- keys (main_keys.py does what they say) ---------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self._TYPED_ACTIONS and isinstance(self.focused, Input):
            return None   # shown dimmed in the footer; the key is typed into the box
        return True

    def action_focus_query(self) -> None:
        self.keys.focus_query()

    def action_cycle_mode(self) -> None:
        self.keys.cycle_mode()

    def action_toggle_rerank(self) -> None:
        self.keys.toggle_rerank()

    def action_more(self) -> None:
        self.keys.set_k(self.kx.k + 1)

    def action_fewer(self) -> None:
        self.keys.set_k(self.kx.k - 1)

    def action_compare(self) -> None:
        self.keys.compare()

    def action_documents(self) -> None:
        self.keys.documents()

    def action_toggle_watch(self) -> None:
        self.keys.toggle_watch()

    def action_ask_agent(self) -> None:
        self.keys.ask_agent()

    def action_copy_citation(self) -> None:
        self.keys.copy_citation()

    def action_open_source(self) -> None:
        self.keys.open_source()

    def help_sections(self) -> list[tuple[str, Sequence[Binding]]]:
        """The keys of this screen and of the widgets on it, from their bindings (the help shows these)."""
        return [("workbench", key_bindings(self.BINDINGS)),
                ("query box and results", key_bindings([*QueryBox.BINDINGS, *ResultsList.BINDINGS])),
                ("anywhere", [HELP_F1, *self.kx.help_bindings()])]

    def system_commands(self) -> Iterable[SystemCommand]:
        return self.keys.commands()
