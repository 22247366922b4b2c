"""`kx` with no subcommand: the Textual workbench over KX_HOME.

The app is handed its backend (constructor injection): the CLI passes the
in-process Engine, tests pass an Engine with a test embedder. Everything that
touches the engine runs in a worker thread and answers with a message from
kx_tui/messages.py; a KxError becomes a notification, never a crash.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from rich.markup import escape
from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, OptionList, ProgressBar, Static
from textual.worker import Worker, WorkerState, get_current_worker

from engine.errors import KxError
from engine.records import QueryResult

from .messages import DatasetsLoaded, IngestFinished, IngestProgressed, QueryAnswered, QueryFailed, WatchActivity
from .screens.compare import CompareScreen
from .screens.detail import PassageDetailScreen
from .screens.help import HelpScreen
from .widgets.activity import ActivityLog
from .widgets.datasets import DatasetDetails, DatasetList
from .widgets.results import ResultsList

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "handbook"
SAMPLE_DATASET = "handbook"
MODES = ("hybrid", "dense", "sparse")

FIRST_RUN = """[b]No datasets yet.[/b]

Add documents from a shell, then come back:

  kx datasets ingest NAME --file notes.md --file more/*.txt
  kx datasets watch NAME          (ingests what lands in $KX_HOME/inbox/NAME)

Press [b]q[/b] to quit, [b]?[/b] for the keys."""


def _error_text(error: BaseException) -> str:
    return error.message if isinstance(error, KxError) else f"unexpected {type(error).__name__}: {error}"


class KxApp(App):
    """Datasets on the left, a query box and its explained answer on the right."""

    CSS_PATH = "app.tcss"
    TITLE = "kx"
    BINDINGS = [
        Binding("slash", "focus_query", "Query", key_display="/"),
        Binding("m", "cycle_mode", "Mode"),
        Binding("r", "toggle_rerank", "MMR"),
        Binding("plus,equals_sign", "more", "k+", key_display="+"),
        Binding("minus", "fewer", "k-", key_display="-"),
        Binding("c", "compare", "Compare"),
        Binding("w", "toggle_watch", "Watch"),
        Binding("a", "ask_agent", "Agent"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, backend: Any, *, samples: Path | None = SAMPLES, watch_settle_seconds: float = 1.0) -> None:
        super().__init__()
        self.backend = backend
        self.samples = samples
        self.watch_settle_seconds = watch_settle_seconds
        settings = getattr(backend, "settings", None)
        self.mode: str = getattr(settings, "default_mode", "hybrid")
        self.rerank: bool = getattr(settings, "rerank", True)
        self.k: int = getattr(settings, "default_k", 10)
        self.max_k: int = getattr(settings, "max_k", 64)
        self.dataset: str | None = None
        self.result: QueryResult | None = None
        self._highlighters: dict[tuple[str, bool], Any] = {}
        self.watcher: Any = None
        self._watch_root: Path | None = None
        self._activity_buffer: list[str] = []

    # -- layout -------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="body"):
            with Vertical(id="sidebar"):
                yield Static("Datasets", classes="panel-title")
                yield DatasetList(id="datasets")
                yield DatasetDetails(id="dataset-details")
            with Vertical(id="main"):
                yield Input(placeholder="Ask a question (Enter runs it; Esc leaves the box)", id="query")
                yield Static("", id="query-status")
                yield ProgressBar(id="ingest-progress", show_eta=False)
                yield Static(FIRST_RUN, id="first-run")
                yield ResultsList(id="results")
                yield ActivityLog(id="activity")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#ingest-progress").display = False
        self.query_one("#first-run").display = False
        self.query_one("#activity").display = False
        self.update_status()
        self.set_interval(0.25, self._flush_activity)
        self.load_datasets()
        self.show_advisories()
        self.warm_up()
        self.query_one("#query", Input).focus()

    @work(thread=True, group="advisories", exit_on_error=False)
    def show_advisories(self) -> None:
        """Say once, at start, what the engine warns about: a chat model, no model, a model that won't load."""
        info = self.backend.info()
        model = info.get("embed_model") or {}
        if isinstance(model, dict) and "error" in model:
            self.call_from_thread(self.notify, model["error"]["message"], title="embedding model",
                                  severity="error", timeout=15)
        for advisory in info.get("advisories", []):
            self.call_from_thread(self.notify, advisory, title="advisory", severity="warning", timeout=15)

    @work(thread=True, group="warm-up", exit_on_error=False)
    def warm_up(self) -> None:
        """Load the model now, so the first query does not wait for it (a first use exports its ONNX graph)."""
        prepare = getattr(self.backend, "prepare_model", None)  # the in-process engine; a gateway warms itself
        if callable(prepare):
            prepare(lambda line: self.call_from_thread(self.notify, line, title="embedding model", timeout=10))

    # -- datasets -----------------------------------------------------------------

    @work(thread=True, exclusive=True, group="datasets", exit_on_error=False)
    def load_datasets(self, select: str | None = None, first_run: bool = True) -> None:
        summaries = self.backend.list_datasets()
        if not summaries and first_run:
            self.call_from_thread(self.first_run)
            return
        self.post_message(DatasetsLoaded(summaries, select))

    def on_datasets_loaded(self, message: DatasetsLoaded) -> None:
        datasets = self.query_one(DatasetList)
        datasets.show(message.summaries)
        self.query_one("#first-run").display = not message.summaries
        wanted = message.select or self.dataset
        if wanted not in datasets.summaries and message.summaries:
            wanted = message.summaries[0].name
        if wanted:
            datasets.select_name(wanted)
            self.select_dataset(wanted)

    def select_dataset(self, name: str) -> None:
        summaries = self.query_one(DatasetList).summaries
        if name not in summaries:
            return
        if name != self.dataset and self.watcher is not None:
            self.stop_watch()
        self.dataset = name
        self.query_one(DatasetDetails).show(summaries[name])
        self.sub_title = name
        self.update_status()

    @on(OptionList.OptionHighlighted, "#datasets")
    def _dataset_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id and event.option.id != self.dataset:
            self.select_dataset(event.option.id)
            self.rerun()

    # -- first run ----------------------------------------------------------------

    def first_run(self) -> None:
        """No datasets: ingest the shipped handbook samples, or say how to add documents."""
        files = sorted(self.samples.glob("*.md")) if self.samples and self.samples.is_dir() else []
        if not files:
            self.query_one("#first-run").display = True
            return
        bar = self.query_one("#ingest-progress", ProgressBar)
        bar.display = True
        self.query_one("#query-status", Static).update(f"first run: ingesting the {len(files)} sample documents "
                                                       f"of {self.samples} into '{SAMPLE_DATASET}'…")
        self.ingest_samples(files)

    @work(thread=True, exclusive=True, group="ingest", exit_on_error=False)
    def ingest_samples(self, files: list[Path]) -> None:
        from engine.documents import from_file

        limit = getattr(getattr(self.backend, "settings", None), "max_document_bytes", 16 * 2**20)

        def on_event(event: object) -> None:
            if hasattr(event, "stage"):
                self.post_message(IngestProgressed(event.stage, event.done, event.total))

        report = self.backend.ingest(SAMPLE_DATASET, [from_file(f, limit) for f in files], on_event=on_event)
        self.post_message(IngestFinished(report))

    def on_ingest_progressed(self, message: IngestProgressed) -> None:
        bar = self.query_one("#ingest-progress", ProgressBar)
        bar.update(total=max(message.total, 1), progress=message.done)
        self.query_one("#query-status", Static).update(f"first run: {message.stage} {message.done}/{message.total}")

    def on_ingest_finished(self, message: IngestFinished) -> None:
        self.query_one("#ingest-progress").display = False
        report = message.report
        self.notify(f"'{report.dataset}' is ready: {report.documents} documents, {report.passages} passages. "
                    "Ask it something.", title="sample dataset")
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
            self.notify("no dataset selected; ingest one first", severity="warning")
            return
        self.query_one("#query-status", Static).update(self.status_text(running=True))
        self.query_worker(self.dataset, text, self.mode, self.rerank, self.k)

    @work(thread=True, exclusive=True, group="query", exit_on_error=False)
    def query_worker(self, dataset: str, text: str, mode: str, rerank: bool, k: int) -> None:
        try:
            result = self.backend.query(dataset, text, k=k, mode=mode, rerank=rerank)
        except KxError as exc:
            self.post_message(QueryFailed(text, exc.message))
            return
        if get_current_worker().is_cancelled:
            return
        self.post_message(QueryAnswered(text, result, self._spans(dataset, text, result)))

    def _spans(self, dataset: str, text: str, result: QueryResult) -> dict[str, list[tuple[int, int]]]:
        """Where each hit's words match the query, with the dataset's own analyzer (empty when unknown)."""
        settings = getattr(self.backend, "settings", None)
        if settings is None:
            return {}
        from engine.dataset import Dataset

        summary = self.query_one(DatasetList).summaries.get(dataset)
        stopwords = bool(((summary.fingerprint if summary else None) or {}).get("stopwords", settings.stopwords))
        key = (dataset, stopwords)
        if key not in self._highlighters:  # keeps its analyzer: building one costs more than using it
            self._highlighters[key] = Dataset(settings, dataset).sparse(stopwords)
        sparse = self._highlighters[key]
        return {hit.passage_ref: sparse.matching_spans(hit.text, text) for hit in result.hits}

    def on_query_answered(self, message: QueryAnswered) -> None:
        if message.query != self.query_one("#query", Input).value:
            return  # stale: the box says something else now
        self.result = message.result
        self.query_one(ResultsList).show(message.result, message.spans)
        self.update_status()
        for note in message.result.notes:
            self.notify(note, severity="warning")

    def on_query_failed(self, message: QueryFailed) -> None:
        self.update_status()
        if message.query == self.query_one("#query", Input).value:
            self.notify(message.message, title="query failed", severity="error", timeout=10)

    def status_text(self, running: bool = False) -> Text:
        line = Text()
        line.append(self.dataset or "no dataset", style="bold")
        line.append(f" · mode {self.mode} · MMR {'on' if self.rerank else 'off'} · k={self.k}")
        if running:
            line.append(" · searching…", style="dim")
        elif self.result is not None:
            r = self.result
            line.append(f" · {len(r.hits)} hit(s) ({r.mode}, MMR {'on' if r.rerank else 'off'}) in "
                        f"{r.timings_ms.get('total', 0):.0f} ms", style="dim")
        return line

    def update_status(self) -> None:
        self.query_one("#query-status", Static).update(self.status_text())

    @on(OptionList.OptionSelected, "#results")
    def _open_hit(self, event: OptionList.OptionSelected) -> None:
        hit = self.query_one(ResultsList).hit_at(event.option_index)
        if hit is not None and self.result is not None:
            self.push_screen(PassageDetailScreen(self.backend, self.result.dataset, hit))

    # -- actions ------------------------------------------------------------------

    def on_key(self, event) -> None:
        if event.key == "escape" and self.focused is self.query_one("#query", Input):
            self.query_one(ResultsList).focus()
            event.stop()

    def action_focus_query(self) -> None:
        if len(self.screen_stack) == 1:
            self.query_one("#query", Input).focus()
            return
        while len(self.screen_stack) > 1:
            self.pop_screen()
        self.call_after_refresh(lambda: self.query_one("#query", Input).focus())

    def action_cycle_mode(self) -> None:
        self.mode = MODES[(MODES.index(self.mode) + 1) % len(MODES)] if self.mode in MODES else MODES[0]
        self.update_status()
        self.rerun()

    def action_toggle_rerank(self) -> None:
        self.rerank = not self.rerank
        self.update_status()
        self.rerun()

    def action_more(self) -> None:
        self._set_k(self.k + 1)

    def action_fewer(self) -> None:
        self._set_k(self.k - 1)

    def _set_k(self, k: int) -> None:
        k = max(1, min(self.max_k, k))
        if k != self.k:
            self.k = k
            self.update_status()
            self.rerun()

    def action_compare(self) -> None:
        text = self.query_one("#query", Input).value
        if not text.strip() or self.dataset is None:
            self.notify("type a query first; compare shows it as hybrid and as dense", severity="warning")
            return
        self.push_screen(CompareScreen(self.backend, self.dataset, text, self.k, self.rerank))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_ask_agent(self) -> None:
        if self.dataset is None:
            self.notify("select a dataset first; the agent researches the current one", severity="warning")
            return
        from .screens.agent import AgentScreen

        self.push_screen(AgentScreen(self.backend, self.dataset, self.query_one("#query", Input).value))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("cycle_mode", "toggle_rerank", "more", "fewer", "compare", "toggle_watch", "ask_agent") \
                and len(self.screen_stack) > 1:
            return False  # they act on the main screen's query; hidden while another screen is up
        if action in ("cycle_mode", "toggle_rerank", "more", "fewer", "compare", "toggle_watch", "ask_agent", "quit",
                      "help"):
            # single-letter keys belong to the query box while it has focus
            return not isinstance(self.focused, Input)
        return True

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Focus query", "Jump to the query box", self.action_focus_query)
        yield SystemCommand("Cycle mode", "hybrid → dense → sparse", self.action_cycle_mode)
        yield SystemCommand("Toggle MMR rerank", "Keep near-duplicates apart, or not", self.action_toggle_rerank)
        yield SystemCommand("Compare hybrid vs dense", "Side by side for the current query", self.action_compare)
        yield SystemCommand("Watch inbox", "Start/stop ingesting the dataset's inbox folder", self.action_toggle_watch)
        yield SystemCommand("Reload datasets", "List KX_HOME's datasets again", lambda: self.load_datasets())
        yield SystemCommand("Keys", "Show every key binding", self.action_help)

    # -- errors -------------------------------------------------------------------

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            self.query_one("#ingest-progress").display = False
            self.update_status()
            self.notify(_error_text(event.worker.error), severity="error", timeout=10)

    # -- watched inbox ------------------------------------------------------------

    def action_toggle_watch(self) -> None:
        if self.watcher is not None:
            self.stop_watch()
            return
        if self.dataset is None:
            self.notify("select a dataset first", severity="warning")
            return
        if getattr(self.backend, "settings", None) is None:
            self.notify("watching a folder needs the in-process engine (not a gateway)", severity="warning")
            return
        from engine.watch import FolderWatcher, inbox_folder

        folder = inbox_folder(self.backend.settings, self.dataset)
        folder.mkdir(parents=True, exist_ok=True)
        self._watch_root = folder.resolve()
        watcher = FolderWatcher(self.backend, self.dataset, folder, self._on_watch_event,
                                settle_seconds=self.watch_settle_seconds)
        try:
            watcher.start()
        except KxError as exc:
            self.notify(exc.message, severity="error")
            return
        self.watcher = watcher
        log = self.query_one(ActivityLog)
        log.display = True
        log.add(f"[b]watching[/b] {escape(str(folder))} → {self.dataset}")

    def stop_watch(self) -> None:
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            watcher.stop(timeout=5)
            self.query_one(ActivityLog).add(f"stopped watching {escape(str(watcher.folder))}")

    def _on_watch_event(self, event: Any) -> None:
        """Called on the watcher's thread: describe the event; the UI flushes lines in batches."""
        line = _describe_watch_event(event, self._watch_root)
        if line:
            self._activity_buffer.append(line)
        if getattr(event, "kind", "") == "batch_done":
            self._activity_buffer.append("\0reload")

    def _flush_activity(self) -> None:
        if not self._activity_buffer:
            return
        lines, self._activity_buffer = self._activity_buffer, []
        self.post_message(WatchActivity(lines))

    def on_watch_activity(self, message: WatchActivity) -> None:
        log = self.query_one(ActivityLog)
        reload = False
        for line in message.lines:
            if line == "\0reload":
                reload = True
            else:
                log.add(line)
        if reload:
            self.load_datasets(first_run=False)

    def on_unmount(self) -> None:
        if self.watcher is not None:
            self.watcher.stop(timeout=5)


def _describe_watch_event(event: Any, root: Path | None = None) -> str | None:
    """One activity line; files are shown by their path in the watched folder (guide/index.md)."""
    kind = getattr(event, "kind", "")
    path = Path(getattr(event, "path", "") or "")
    if root is not None and path.is_relative_to(root):
        path = path.relative_to(root)
    name = escape(path.as_posix() if root is not None else path.name)
    if kind == "queued":
        return f"[dim]queued[/dim] {name}"
    if kind == "ingested":
        return f"[green]added[/green] {name} ({event.passages} passages)"
    if kind == "unchanged":
        return f"[dim]unchanged[/dim] {name}"
    if kind == "refused":
        return f"[red]refused[/red] {name}: {escape(event.reason)}"
    if kind == "batch_done":
        return (f"batch {event.batch}: {event.added} added, {event.unchanged} unchanged, {event.refused} refused "
                f"· dataset now {event.documents} docs, {event.passages} passages")
    if kind == "error":
        return f"[red]error[/red] {escape(event.message)}"
    return None
