"""The workbench's default screen: datasets on the left, a query box and its explained answer on the right.

It holds the layout, the query (run in an exclusive worker; a stale answer is
dropped), the first run (ingesting the shipped samples into an empty home),
the status line and the keys that act on the query. Its bindings live here,
so a pushed screen (a passage, compare, documents) hides them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.keys import key_to_character
from textual.timer import Timer
from textual.widgets import Header, Input, OptionList, Static
from textual.worker import Worker, WorkerState, get_current_worker

from engine.errors import KxError
from engine.records import QueryResult, RetrievalMode

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
from ..widgets.footer import KeysFooter
from ..widgets.query import QueryBox
from ..widgets.results import ResultsList
from ..widgets.watch import WatchPanel
from .compare import CompareScreen
from .document_table import DocumentsScreen
from .hit_actions import copy_citation, open_source
from .hit_detail import PassageDetailScreen
from .keys import HELP, HELP_F1, KeysScreen

SAMPLE_DATASET = "handbook"
MODES = tuple(RetrievalMode)

FIRST_RUN = """[b]No datasets yet.[/b]

Add documents from a shell, then come back:

  kx datasets ingest NAME --file notes.md --file more/*.txt
  kx datasets watch NAME          (ingests what lands in $KX_HOME/inbox/NAME)

Press [b]q[/b] to quit, [b]?[/b] for the keys."""


def error_text(error: BaseException) -> str:
    return error.message if isinstance(error, KxError) else f"unexpected {type(error).__name__}: {error}"


def _typed(key: str) -> bool:
    """True for a key that types a character (m, +, ?), which belongs to the query box while it has focus."""
    character = key_to_character(key)
    return character is not None and character.isprintable()


class MainScreen(KeysScreen):
    # Inline, not CSS_PATH: Textual 8 loads a screen's CSS_PATH when it is pushed, never for the default screen.
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

    #query-status {
        /* wraps rather than cutting the model's state or the timings off */
        height: auto;
        max-height: 3;
        padding: 0 1;
        color: $text-muted;
    }

    #build-progress {
        /* the first run's one progress line: what is happening, how long, what is left */
        height: auto;
        padding: 0 1;
        color: $warning;
    }

    #first-run {
        padding: 1 2;
        border: round $warning;
        height: auto;
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
    # The one-letter keys type into the query box while it has focus.
    _TYPED_ACTIONS = frozenset(b.action for b in BINDINGS if any(_typed(k) for k in b.key.split(",")))

    def __init__(self) -> None:
        super().__init__()
        self.dataset: str | None = None
        self.result: QueryResult | None = None
        self.pending: str | None = None     # "searching…" or "waiting for the model…" while a query runs
        self.listed = False                 # the datasets have been listed once (until then a query is kept)
        self.build: BuildProgress | None = None   # the first run's sample build, while it runs
        self.held: str | None = None        # a query submitted before there was a dataset to ask
        self._build_timer: Timer | None = None

    # -- layout -------------------------------------------------------------------

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
                yield Static("", id="query-status")
                yield Static("", id="build-progress")
                yield Static(FIRST_RUN, id="first-run")
                yield ResultsList(id="results")
                yield WatchPanel(kx.backend, kx.settings, settle_seconds=kx.watch_settle_seconds, id="watch")
        yield KeysFooter(self.FOOTER_PRIORITY)

    def on_mount(self) -> None:
        self.query_one("#build-progress").display = False
        self.query_one("#first-run").display = False
        self.update_status()
        self.warm_up()
        self.load_datasets()
        self.show_advisories()
        self.query_one("#query", Input).focus()

    @work(thread=True, group="warm-up", exit_on_error=False)
    def warm_up(self) -> None:
        """Load the model now, not at the first query (over a gateway there is nothing to load)."""
        self.kx.warmup.run(lambda line: self.post_message(WarmupNoted(line)))  # e.g. a first use's ONNX export
        self.post_message(ModelWarmed())

    def on_warmup_noted(self, message: WarmupNoted) -> None:
        if self.build is not None:
            self.build.noted(message.line)    # the first run's progress line says it
            self.show_build()
        else:
            self.notify(message.line, title="embedding model", timeout=10)

    def on_model_warmed(self, _message: ModelWarmed) -> None:
        error = self.kx.warmup.error
        if error is not None:
            self.notify(error.message, title="embedding model", severity="error", timeout=15)
        if self.build is not None:
            self.build.model_ready()
            self.show_build()
        self.update_status()

    @work(thread=True, group="advisories", exit_on_error=False)
    def show_advisories(self) -> None:
        """Say once, at start, what the engine warns about (a chat model, no model, a gateway's broken model)."""
        info = self.kx.backend.info()
        model = info.get("embed_model") or {}
        if isinstance(model, dict) and "error" in model and self.kx.settings is None:
            # locally the warm-up reports it; a gateway's model is loaded over there
            self.app.call_from_thread(self.notify, model["error"]["message"], title="embedding model",
                                      severity="error", timeout=15)
        for advisory in info.get("advisories", []):
            self.app.call_from_thread(self.notify, advisory, title="advisory", severity="warning", timeout=15)

    # -- datasets -----------------------------------------------------------------

    @work(thread=True, exclusive=True, group="datasets", exit_on_error=False)
    def load_datasets(self, select: str | None = None, first_run: bool = True) -> None:
        summaries = self.kx.backend.list_datasets()
        if not summaries and first_run:
            self.app.call_from_thread(self.first_run)
            return
        self.post_message(DatasetsLoaded(summaries, select))

    def on_datasets_loaded(self, message: DatasetsLoaded) -> None:
        self.listed = True
        datasets = self.query_one(DatasetList)
        datasets.show(message.summaries)
        self.query_one("#first-run").display = not message.summaries
        wanted = message.select or self.dataset
        if wanted not in datasets.summaries and message.summaries:
            wanted = message.summaries[0].name
        if wanted:
            datasets.select_name(wanted)
            self.select_dataset(wanted)
        held, self.held = self.held, None
        if held is not None and self.dataset is not None and self._current(held):
            self.run_query(held)   # asked before there was a dataset: answered now
        elif held is not None:
            self.pending = None
            self.update_status()

    def select_dataset(self, name: str) -> None:
        summaries = self.query_one(DatasetList).summaries
        if name not in summaries:
            return
        watch = self.query_one(WatchPanel)
        if watch.watching and watch.dataset != name:
            watch.stop()
        self.dataset = name
        self.query_one(DatasetDetails).show(summaries[name])
        self.sub_title = name
        self.update_status()
        self.warm_dataset(name)

    @work(thread=True, exclusive=True, group="warm-dataset", exit_on_error=False)
    def warm_dataset(self, name: str) -> None:
        """Open the dataset's indexes now, so the first query finds them ready."""
        try:
            self.kx.backend.warm_up(name)
        except KxError:
            pass  # e.g. a stale fingerprint: the query says so, with what to do
        summary = self.query_one(DatasetList).summaries.get(name)
        if summary is not None and summary.backlog:
            self.app.call_from_thread(self.finish_backlog, name, summary.backlog)

    @work(thread=True, exclusive=True, group="embed-backlog", exit_on_error=False)
    def finish_backlog(self, name: str, waiting: int) -> None:
        """Embed what an earlier ingest of the selected dataset left (a stop, a crash); queries go on meanwhile."""
        worker = get_current_worker()

        def on_event(_event: object) -> None:
            if worker.is_cancelled:  # the app is leaving: stop between two batches, nothing committed is lost
                raise KeyboardInterrupt

        self.app.call_from_thread(self.notify, f"embedding the {waiting:,} passages an earlier ingest of '{name}' "
                                               "left; keyword search covers them already", title=name)
        try:
            report = self.kx.backend.embed(name, on_event=on_event)
        except (KxError, KeyboardInterrupt):
            return
        self.app.call_from_thread(self.notify, f"'{name}': {report.embedded:,} passages embedded; dense search "
                                               "covers the whole dataset", title=name)
        self.app.call_from_thread(self.load_datasets, first_run=False)
        self.app.call_from_thread(self.rerun)

    @on(OptionList.OptionHighlighted, "#datasets")
    def _dataset_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id and event.option.id != self.dataset:
            self.select_dataset(event.option.id)
            self.rerun()

    def on_watch_batch_done(self, _message: WatchBatchDone) -> None:
        self.load_datasets(first_run=False)  # an exclusive worker: a burst of batches reloads once

    def on_watch_lineage_changed(self, _message: WatchLineageChanged) -> None:
        self.load_datasets(first_run=False)  # a retirement changes the counts without a batch

    # -- first run ----------------------------------------------------------------

    def first_run(self) -> None:
        """No datasets: ingest the shipped handbook samples, or say how to add documents."""
        samples = self.kx.samples
        files = sorted(samples.glob("*.md")) if samples and samples.is_dir() else []
        if not files or self.kx.settings is None:  # over a gateway, its datasets are its operator's
            self.listed = True
            self.query_one("#first-run").display = True
            self._drop_held("there is no dataset to ask yet")
            self.update_status()   # "no dataset", no longer "…"
            return
        self.build = BuildProgress(SAMPLE_DATASET, len(files))
        if self.kx.warmup.ready:
            self.build.model_ready()
        self.query_one("#build-progress").display = True
        self.show_build()
        self._build_timer = self.set_interval(1.0, self.show_build)  # the seconds and the ETA move on
        self.update_status()
        self.ingest_samples(files)

    def show_build(self) -> None:
        if self.build is not None:
            self.query_one("#build-progress", Static).update(self.build.line())

    def _end_build(self) -> None:
        self.build = None
        if self._build_timer is not None:
            self._build_timer.stop()
            self._build_timer = None
        self.query_one("#build-progress").display = False

    def _drop_held(self, why: str) -> None:
        if self.held is not None:
            self.held = None
            self.pending = None
            self.notify(f"your query was not run: {why}", severity="warning")
            self.update_status()

    @work(thread=True, exclusive=True, group="ingest", exit_on_error=False)
    def ingest_samples(self, files: list[Path]) -> None:
        from engine.text.inputs import from_file

        settings = self.kx.settings
        assert settings is not None  # first_run() checked

        def on_event(event: object) -> None:
            if hasattr(event, "stage"):
                self.post_message(IngestProgressed(event.stage, event.done, event.total))

        self.kx.warmup.wait()  # one model load, not two side by side
        documents = [from_file(f, settings.max_document_bytes) for f in files]
        report = self.kx.backend.ingest(SAMPLE_DATASET, documents, on_event=on_event)
        self.post_message(IngestFinished(report))

    def on_ingest_progressed(self, message: IngestProgressed) -> None:
        if self.build is not None:
            self.build.progressed(message.stage, message.done, message.total)
            self.show_build()

    def on_ingest_finished(self, message: IngestFinished) -> None:
        seconds = None if self.build is None else self.build.clock() - self.build.started
        self._end_build()
        report = message.report
        took = "" if seconds is None else f" in {seconds:.0f} s"
        then = "Answering your query." if self.held else "Ask it something."
        self.notify(f"'{report.dataset}' is ready{took}: {report.documents} documents, {report.passages} passages. "
                    f"{then}", title="sample dataset")
        self.update_status()
        self.load_datasets(select=report.dataset, first_run=False)

    # -- query --------------------------------------------------------------------

    @on(Input.Submitted, "#query")
    def _submitted(self, event: Input.Submitted) -> None:
        self.run_query(event.value)

    def rerun(self) -> None:
        text = self.query_one("#query", Input).value
        if text.strip():
            self.run_query(text)

    def run_query(self, text: str) -> None:
        if not text.strip():
            return
        if self.dataset is None:
            if self.build is not None or not self.listed:
                self.held = text  # kept, and run once the dataset is there (the newest submission wins)
                self.pending = (f"your query runs once '{SAMPLE_DATASET}' is built" if self.build is not None
                                else "your query runs once the datasets are listed")
                self.update_status()
            else:
                self.notify("no dataset selected; ingest one first", severity="warning")
            return
        self.pending = "searching…"
        self.update_status()
        self.query_worker(self.dataset, text, self.kx.mode, self.kx.rerank, self.kx.k)

    @work(thread=True, exclusive=True, group="query", exit_on_error=False)
    def query_worker(self, dataset: str, text: str, mode: str, rerank: bool, k: int) -> None:
        worker = get_current_worker()
        warmup = self.kx.warmup
        if mode != RetrievalMode.SPARSE and not warmup.ready:  # a sparse query needs no model: it never waits
            self.post_message(QueryWaiting(text))
            while not warmup.wait(0.05):
                if worker.is_cancelled:
                    return  # a newer query took over; it waits in its own turn
        try:
            result = self.kx.backend.query(dataset, text, k=k, mode=mode, rerank=rerank)
        except KxError as exc:
            self.post_message(QueryFailed(text, exc.message))
            return
        if worker.is_cancelled:
            return
        self.post_message(QueryAnswered(text, result, self._spans(dataset, text, result)))

    def _spans(self, dataset: str, text: str, result: QueryResult) -> dict[str, list[tuple[int, int]]]:
        """Where each hit's words match the query, with the dataset's own analyzer (its fingerprint names it:
        kx's stemming one or Milvus's, on this machine or behind a gateway)."""
        from engine.text.analysis import highlighter

        summary = self.query_one(DatasetList).summaries.get(dataset)
        spans = highlighter(summary.fingerprint if summary else None, text)
        return {hit.passage_ref: spans(hit.text) for hit in result}

    def _current(self, query: str) -> bool:
        return query == self.query_one("#query", Input).value

    def on_query_waiting(self, message: QueryWaiting) -> None:
        if self._current(message.query):
            self.pending = "waiting for the model…"
            self.update_status()

    def on_query_answered(self, message: QueryAnswered) -> None:
        if not self._current(message.query):
            return  # stale: the box says something else now
        self.pending = None
        self.result = message.result
        self.query_one(ResultsList).show(message.result, message.spans)
        self.update_status()
        for note in message.result.notes:
            self.notify(note, severity="warning")

    def on_query_failed(self, message: QueryFailed) -> None:
        if self._current(message.query):
            self.pending = None
            self.notify(message.message, title="query failed", severity="error", timeout=10)
        self.update_status()

    def status_text(self, width: int = 0) -> Text:
        """dataset · mode · MMR · k · the model's state · the query's state, in lines of `width` (0: one line).

        It breaks between parts, never inside one, so nothing is cut off at any width.
        """
        kx = self.kx
        name = self.dataset or (f"{SAMPLE_DATASET} (building)" if self.build is not None else
                                "…" if not self.listed else "no dataset")
        parts: list[tuple[str, str]] = [(name, "bold"), (kx.mode, ""),
                                        (f"MMR {'on' if kx.rerank else 'off'}", ""), (f"k={kx.k}", ""),
                                        (kx.warmup.describe(), "dim")]
        if self.pending:
            parts.append((self.pending, "italic"))
        elif self.result is not None:
            r = self.result
            parts.append((f"{len(r)} hit{'' if len(r) == 1 else 's'} in {r.timings_ms.get('total', 0):.0f} ms", "dim"))
            coverage = r.dense_coverage   # below 1 while an ingest still embeds its backlog
            if r.mode != RetrievalMode.SPARSE and coverage < 1.0:
                parts.append((f"dense covers {coverage:.0%} of passages (still embedding)", "yellow"))
        line = Text()
        column = 0
        for i, (words, style) in enumerate(parts):
            if i and width and column + 3 + len(words) > width:
                line.append("\n")
                column = 0
            elif i:
                line.append(" · ")
                column += 3
            line.append(words, style=style)
            column += len(words)
        return line

    def update_status(self) -> None:
        status = self.query_one("#query-status", Static)
        status.update(self.status_text(status.content_region.width))

    def on_resize(self) -> None:
        self.call_after_refresh(self.update_status)  # the status line's width is known once laid out

    @on(OptionList.OptionSelected, "#results")
    def _open_hit(self, event: OptionList.OptionSelected) -> None:
        hit = self.query_one(ResultsList).hit_at(event.option_index)
        if hit is not None and self.result is not None:
            self.app.push_screen(PassageDetailScreen(self.kx.backend, self.result.dataset, hit))

    # -- actions ------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self._TYPED_ACTIONS and isinstance(self.focused, Input):
            return None   # shown dimmed in the footer; the key is typed into the box
        return True

    def action_focus_query(self) -> None:
        self.query_one("#query", Input).focus()

    def action_cycle_mode(self) -> None:
        kx = self.kx
        kx.mode = MODES[(MODES.index(kx.mode) + 1) % len(MODES)] if kx.mode in MODES else MODES[0]
        self.update_status()
        self.rerun()

    def action_toggle_rerank(self) -> None:
        self.kx.rerank = not self.kx.rerank
        self.update_status()
        self.rerun()

    def action_more(self) -> None:
        self._set_k(self.kx.k + 1)

    def action_fewer(self) -> None:
        self._set_k(self.kx.k - 1)

    def _set_k(self, k: int) -> None:
        k = max(1, min(self.kx.max_k, k))
        if k != self.kx.k:
            self.kx.k = k
            self.update_status()
            self.rerun()

    def action_compare(self) -> None:
        text = self.query_one("#query", Input).value
        if not text.strip() or self.dataset is None:
            self.notify("type a query first; compare shows it as hybrid and as dense", severity="warning")
            return
        self.app.push_screen(CompareScreen(self.kx.backend, self.kx.warmup, self.dataset, text, self.kx.k,
                                           self.kx.rerank))

    def action_documents(self) -> None:
        if self.dataset is None:
            self.notify("no dataset selected; ingest one first", severity="warning")
            return
        self.app.push_screen(DocumentsScreen(self.kx.backend, self.dataset))

    def action_toggle_watch(self) -> None:
        watch = self.query_one(WatchPanel)
        if watch.watching:
            watch.stop()
        elif self.dataset is None:
            self.notify("select a dataset first", severity="warning")
        else:
            watch.start(self.dataset)

    def action_ask_agent(self) -> None:
        if self.dataset is None:
            self.notify("select a dataset first; the agent researches the current one", severity="warning")
            return
        from .agent import AgentScreen

        self.app.push_screen(AgentScreen(self.kx.backend, self.dataset, self.query_one("#query", Input).value))

    def _hit(self):
        results = self.query_one(ResultsList)
        return None if results.highlighted is None else results.hit_at(results.highlighted)

    def action_copy_citation(self) -> None:
        copy_citation(self.app, self.result.dataset if self.result else "", self._hit())

    def action_open_source(self) -> None:
        open_source(self.app, self._hit())

    def help_sections(self) -> list[tuple[str, list[Binding]]]:
        """The keys of this screen and of the widgets on it, from their bindings (the help shows these)."""
        return [("workbench", list(self.BINDINGS)),
                ("query box and results", [*QueryBox.BINDINGS, *ResultsList.BINDINGS]),
                ("anywhere", [HELP_F1, *self.kx.help_bindings()])]

    def system_commands(self) -> Iterable[SystemCommand]:
        yield SystemCommand("Focus query", "Jump to the query box", self.action_focus_query)
        yield SystemCommand("Cycle mode", "hybrid → dense → sparse", self.action_cycle_mode)
        yield SystemCommand("Toggle MMR rerank", "Keep near-duplicates apart, or not", self.action_toggle_rerank)
        yield SystemCommand("Compare hybrid vs dense", "Side by side for the current query", self.action_compare)
        yield SystemCommand("Browse documents", "The selected dataset's documents", self.action_documents)
        yield SystemCommand("Watch inbox", "Start/stop ingesting the dataset's inbox folder", self.action_toggle_watch)
        yield SystemCommand("Ask the agent", "A bounded research run over the dataset", self.action_ask_agent)
        yield SystemCommand("Reload datasets", "List KX_HOME's datasets again", lambda: self.load_datasets())

    # -- errors -------------------------------------------------------------------

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            if event.worker.group == "ingest":
                self._end_build()
                self._drop_held("the sample dataset could not be built")
                self.load_datasets(first_run=False)
            elif event.worker.group == "datasets":
                self.listed = True
                self._drop_held("the datasets could not be listed")
            self.pending = None
            self.update_status()
            self.notify(error_text(event.worker.error), severity="error", timeout=10)
