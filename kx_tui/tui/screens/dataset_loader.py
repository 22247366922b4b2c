"""The main screen's datasets: listed in the sidebar, one selected, its indexes opened and its backlog embedded.

`DatasetLoader` is a part the main screen holds, not a widget. Its workers
run on the screen: the listing (group "datasets", exclusive, so a burst of
watch batches reloads once), the warm-up of the selected dataset's indexes
and the embedding of a backlog an earlier ingest left (a stop, a crash; the
queries go on meanwhile). The listing answers with DatasetsLoaded, which the
screen hands back here; an empty home on the first listing calls `on_empty`
(the first run).
"""

from __future__ import annotations

from functools import partial
from typing import Callable

from textual.worker import get_current_worker

from engine.errors import KxError

from ..messages import DatasetsLoaded
from ..widgets.datasets import DatasetDetails, DatasetList
from ..widgets.first_run import FirstRunNote
from ..widgets.watch import WatchPanel
from .keys import KeysScreen


class DatasetLoader:
    def __init__(self, screen: KeysScreen, *, on_change: Callable[[], None],
                 on_empty: Callable[[], None], on_embedded: Callable[[], None]) -> None:
        """`on_change` redraws the status line; `on_empty` starts the first run; `on_embedded` reruns the query
        (a backlog embedded: dense search covers more)."""
        self.screen = screen
        self.on_change = on_change
        self.on_empty = on_empty
        self.on_embedded = on_embedded
        self.selected: str | None = None
        self.listed = False                 # the datasets have been listed once (until then a query is kept)
        self.list_failed = False            # the last listing failed (e.g. a gateway that is down)

    def load(self, select: str | None = None, first_run: bool = True) -> None:
        """List the datasets again (then select `select`); an empty list starts the first run if `first_run`."""
        self.screen.run_worker(partial(self._list, select, first_run), name="load_datasets", group="datasets",
                               exclusive=True, thread=True, exit_on_error=False)

    def _list(self, select: str | None, first_run: bool) -> None:
        summaries = self.screen.kx.backend.list_datasets()
        if get_current_worker().is_cancelled:
            return   # a newer listing took over (a burst of watch batches): an older one must not overwrite it
        if not summaries and first_run:
            self.screen.app.call_from_thread(self._emptied)
            return
        self.screen.post_message(DatasetsLoaded(summaries, select))

    def _emptied(self) -> None:
        self.list_failed = False   # listed, and none there
        self.forget()
        self.on_empty()

    def forget(self) -> None:
        """None listed, none selected: the home is empty (its datasets may have been deleted on disk since they
        were listed; left in the sidebar, the last one would still be the one queries ask)."""
        self.selected = None
        self.screen.query_one(DatasetList).show([])
        self.screen.query_one(DatasetDetails).show(None)
        self.screen.sub_title = ""
        self.on_change()

    def loaded(self, message: DatasetsLoaded) -> None:
        """Show the list and select the wanted dataset: the one asked for, the one selected, else the first."""
        self.listed = True
        self.list_failed = False
        if not message.summaries:
            self.forget()
        datasets = self.screen.query_one(DatasetList)
        datasets.show(message.summaries)
        self.screen.query_one(FirstRunNote).display = not message.summaries
        wanted = message.select or self.selected
        if wanted not in datasets.summaries and message.summaries:
            wanted = message.summaries[0].name
        if wanted:
            datasets.select_name(wanted)
            self.select(wanted)

    def select(self, name: str) -> None:
        """Make `name` the dataset queries ask (a watch of another one stops) and open its indexes."""
        summaries = self.screen.query_one(DatasetList).summaries
        if name not in summaries:
            return
        watch = self.screen.query_one(WatchPanel)
        if watch.watching and watch.dataset != name:
            watch.stop()
        self.selected = name
        self.screen.query_one(DatasetDetails).show(summaries[name])
        self.screen.sub_title = name
        self.on_change()
        self.screen.run_worker(partial(self._warm, name), name="warm_dataset", group="warm-dataset", exclusive=True,
                               thread=True, exit_on_error=False)

    def _warm(self, name: str) -> None:
        """Open the dataset's indexes now, so the first query finds them ready."""
        try:
            self.screen.kx.backend.warm_up(name)
        except KxError:
            pass  # e.g. a stale fingerprint: the query says so, with what to do
        summary = self.screen.query_one(DatasetList).summaries.get(name)
        if summary is not None and summary.backlog:
            self.screen.app.call_from_thread(self._finish_backlog, name, summary.backlog)

    def _finish_backlog(self, name: str, waiting: int) -> None:
        self.screen.run_worker(partial(self._embed, name, waiting), name="finish_backlog", group="embed-backlog",
                               exclusive=True, thread=True, exit_on_error=False)

    def _embed(self, name: str, waiting: int) -> None:
        """Embed what an earlier ingest of the selected dataset left (a stop, a crash); queries go on meanwhile."""
        worker = get_current_worker()
        notify = partial(self.screen.app.call_from_thread, self.screen.notify)

        def on_event(_event: object) -> None:
            if worker.is_cancelled:  # the app is leaving: stop between two batches, nothing committed is lost
                raise KeyboardInterrupt

        notify(f"embedding the {waiting:,} passages an earlier ingest of '{name}' left; keyword search covers them "
               "already", title=name)
        try:
            report = self.screen.kx.backend.embed(name, on_event=on_event)
        except (KxError, KeyboardInterrupt):
            return
        notify(f"'{name}': {report.embedded:,} passages embedded; dense search covers the whole dataset", title=name)
        self.screen.app.call_from_thread(self.load, first_run=False)
        self.screen.app.call_from_thread(self.on_embedded)
