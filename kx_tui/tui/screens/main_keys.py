"""What the main screen's keys and commands do: the query's options, the screens they open, a hit's citation and file.

`MainKeys` is a part the main screen holds, not a widget. The bindings stay
on the screen (the footer and the help read them there, and a pushed screen
hides them); each `action_*` of the screen hands over to the method here of
the same name. The same methods are the command palette's entries.
"""

from __future__ import annotations

from typing import Callable, Iterable

from textual.app import SystemCommand
from textual.widgets import Input

from engine.config import ENV
from engine.records import Hit, RetrievalMode

from ..widgets.results import ResultsList
from ..widgets.watch import WatchPanel
from .compare import CompareScreen
from .dataset_loader import DatasetLoader
from .document_table import DocumentsScreen
from .hit_actions import copy_citation, open_source
from .hit_detail import PassageDetailScreen
from .keys import KeysScreen
from .query_runner import QueryRunner

MODES = tuple(RetrievalMode)


class MainKeys:
    def __init__(self, screen: KeysScreen, queries: QueryRunner, datasets: DatasetLoader,
                 on_change: Callable[[], None], no_dataset: Callable[[str], str]) -> None:
        """`on_change` redraws the status line, which shows the query's options; `no_dataset(otherwise)` says
        what a key that needs a dataset says without one."""
        self.screen = screen
        self.queries = queries
        self.datasets = datasets
        self.on_change = on_change
        self.no_dataset = no_dataset

    def focus_query(self) -> None:
        self.screen.query_one("#query", Input).focus()

    # -- the query's options: each change reruns the query ----------------------------

    def cycle_mode(self) -> None:
        kx = self.screen.kx
        kx.mode = MODES[(MODES.index(kx.mode) + 1) % len(MODES)] if kx.mode in MODES else MODES[0]
        self.on_change()
        self.queries.rerun()

    def toggle_rerank(self) -> None:
        kx = self.screen.kx
        kx.rerank = not kx.rerank
        self.on_change()
        self.queries.rerun()

    def set_k(self, k: int) -> None:
        kx = self.screen.kx
        wanted, k = k, max(1, min(kx.max_k, k))
        if k == kx.k and wanted != k:  # at an end: said, so the key does not seem dead
            most = f"the most kx returns ({ENV.max_k} is {kx.max_k})" if wanted > k else "the fewest a query asks for"
            self.screen.notify(f"k is {k} already, {most}", timeout=3)
        elif k != kx.k:
            kx.k = k
            self.on_change()
            self.queries.rerun()

    # -- what opens another screen, or acts on the dataset --------------------------

    def compare(self) -> None:
        text, dataset = self.queries.text(), self.datasets.selected
        if dataset is None:
            self.screen.notify(self.no_dataset("no dataset selected; ingest one first"), severity="warning")
            return
        if not text.strip():
            self.screen.notify("type a query first; compare shows it as hybrid and as dense", severity="warning")
            return
        kx = self.screen.kx
        self.screen.app.push_screen(CompareScreen(kx.backend, kx.warmup, dataset, text, kx.k, kx.rerank))

    def documents(self) -> None:
        if self.datasets.selected is None:
            self.screen.notify(self.no_dataset("no dataset selected; ingest one first"), severity="warning")
            return
        self.screen.app.push_screen(DocumentsScreen(self.screen.kx.backend, self.datasets.selected))

    def toggle_watch(self) -> None:
        watch = self.screen.query_one(WatchPanel)
        if watch.watching:
            watch.stop()
        elif self.datasets.selected is None:
            self.screen.notify(self.no_dataset("select a dataset first"), severity="warning")
        else:
            watch.start(self.datasets.selected)

    def ask_agent(self) -> None:
        if self.datasets.selected is None:
            self.screen.notify(self.no_dataset("select a dataset first; the agent researches the current one"),
                               severity="warning")
            return
        from .agent import AgentScreen

        self.screen.app.push_screen(AgentScreen(self.screen.kx.backend, self.datasets.selected, self.queries.text()))

    # -- a hit: the highlighted one, or the one Enter picked ------------------------

    def _hit(self) -> Hit | None:
        results = self.screen.query_one(ResultsList)
        return None if results.highlighted is None else results.hit_at(results.highlighted)

    def copy_citation(self) -> None:
        result = self.queries.result
        copy_citation(self.screen.app, result.dataset if result else "", self._hit())

    def open_source(self) -> None:
        open_source(self.screen.app, self._hit())

    def open_hit(self, index: int) -> None:
        hit = self.screen.query_one(ResultsList).hit_at(index)
        result = self.queries.result
        if hit is not None and result is not None:
            self.screen.app.push_screen(PassageDetailScreen(self.screen.kx.backend, result.dataset, hit))

    def commands(self) -> Iterable[SystemCommand]:
        """The command palette's entries for the main screen."""
        yield SystemCommand("Focus query", "Jump to the query box", self.focus_query)
        yield SystemCommand("Cycle mode", "hybrid → dense → sparse", self.cycle_mode)
        yield SystemCommand("Toggle MMR rerank", "Keep near-duplicates apart, or not", self.toggle_rerank)
        yield SystemCommand("Compare hybrid vs dense", "Side by side for the current query", self.compare)
        yield SystemCommand("Browse documents", "The selected dataset's documents", self.documents)
        yield SystemCommand("Watch inbox", "Start/stop ingesting the dataset's inbox folder", self.toggle_watch)
        yield SystemCommand("Ask the agent", "A bounded research run over the dataset", self.ask_agent)
        yield SystemCommand("Reload datasets", f"List {ENV.home}'s datasets again", lambda: self.datasets.load())
