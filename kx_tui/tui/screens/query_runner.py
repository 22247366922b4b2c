"""The main screen's query: run in an exclusive worker, a stale answer dropped, a query held until there is a dataset.

`QueryRunner` is a part the main screen holds, not a widget: its worker runs
on the screen (group "query", exclusive, so a newer query cancels the one
before it) and posts QueryWaiting, QueryAnswered and QueryFailed to the
screen, which hands them back here. It owns what they change: the result on
show, the query's state for the status line ("searching…", "waiting for the
model…") and a query submitted before there was a dataset to ask, which is
answered once the datasets are listed or the first run's sample is built.
An answer whose query is no longer the box's text is stale and dropped.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

from textual.widgets import Input
from textual.worker import get_current_worker

from engine.errors import KxError
from engine.records import QueryResult, RetrievalMode

from ..messages import QueryAnswered, QueryFailed, QueryWaiting
from ..widgets.datasets import DatasetList
from ..widgets.results import ResultsList
from .keys import KeysScreen


class QueryRunner:
    def __init__(self, screen: KeysScreen, target: Callable[[], tuple[str | None, str | None]],
                 on_change: Callable[[], None], no_dataset: Callable[[], str]) -> None:
        """`target` says which dataset a query asks now, and without one what may still bring one (the query is
        kept until then; None: nothing will, the query is refused, and `no_dataset` says why and what to do);
        `on_change` redraws the status line, which says the query's state."""
        self.screen = screen
        self.target = target
        self.on_change = on_change
        self.no_dataset = no_dataset
        self.result: QueryResult | None = None
        self.pending: str | None = None     # "searching…" or "waiting for the model…" while a query runs
        self.held: str | None = None        # a query submitted before there was a dataset to ask
        self.asked: str | None = None       # the text of the newest query run: its answer ends `pending`

    def text(self) -> str:
        """What the query box says now."""
        return self.screen.query_one("#query", Input).value

    def current(self, query: str) -> bool:
        return query == self.text()

    def run(self, text: str) -> None:
        """Ask the selected dataset. Without one the query is kept while something may bring one, else refused."""
        if not text.strip():
            return
        dataset, hold = self.target()
        if dataset is None:
            if hold is not None:
                self.held = text  # kept, and run once the dataset is there (the newest submission wins)
                self.pending = hold
                self.on_change()
            else:
                self.screen.notify(self.no_dataset(), severity="warning")
            return
        self.pending = "searching…"
        self.asked = text
        self.on_change()
        kx = self.screen.kx
        self.screen.run_worker(partial(self._ask, dataset, text, kx.mode, kx.rerank, kx.k), name="query_worker",
                               group="query", exclusive=True, thread=True, exit_on_error=False)

    def rerun(self) -> None:
        """The query in the box again (its options changed, or the dataset did). With the box empty there is
        nothing to run, and the answer on show, asked with the old options, would pass for the new ones'."""
        if not self.text().strip():
            self._clear()
            self.on_change()
        self.run(self.text())

    def _ask(self, dataset: str, text: str, mode: str, rerank: bool, k: int) -> None:
        """The worker: wait for the model if the mode needs it, query, post the answer (or the failure)."""
        worker = get_current_worker()
        warmup = self.screen.kx.warmup
        if mode != RetrievalMode.SPARSE and not warmup.ready:  # a sparse query needs no model: it never waits
            self.screen.post_message(QueryWaiting(text))
            while not warmup.wait(0.05):
                if worker.is_cancelled:
                    return  # a newer query took over; it waits in its own turn
        try:
            result = self.screen.kx.backend.query(dataset, text, k=k, mode=mode, rerank=rerank)
        except KxError as exc:
            if not worker.is_cancelled:   # a newer query took over: its own answer or failure will be said
                self.screen.post_message(QueryFailed(text, exc.message))
            return
        if worker.is_cancelled:
            return
        self.screen.post_message(QueryAnswered(text, result, self._spans(dataset, text, result)))

    def _spans(self, dataset: str, text: str, result: QueryResult) -> dict[str, list[tuple[int, int]]]:
        """Where each hit's words match the query, with the dataset's own analyzer (its fingerprint names it:
        kx's stemming one or Milvus's, on this machine or behind a gateway)."""
        from engine.text.analysis import highlighter

        summary = self.screen.query_one(DatasetList).summaries.get(dataset)
        spans = highlighter(summary.fingerprint if summary else None, text)
        return {hit.passage_ref: spans(hit.text) for hit in result}

    def waiting(self, message: QueryWaiting) -> None:
        if self.current(message.query):
            self.pending = "waiting for the model…"
            self.on_change()

    def answered(self, message: QueryAnswered) -> None:
        if not self.current(message.query):
            self._stale(message.query)
            return
        self.pending = None
        self.result = message.result
        self.screen.query_one(ResultsList).show(message.result, message.spans)
        self.on_change()
        for note in message.result.notes:
            self.screen.notify(note, severity="warning")

    def failed(self, message: QueryFailed) -> None:
        if not self.current(message.query):
            self._stale(message.query)
            return
        self.pending = None
        self._clear()   # the answer on show was to another dataset, mode or k: it would pass for this query's
        self.screen.notify(message.message, title="query failed", severity="error", timeout=10)
        self.on_change()

    def _clear(self) -> None:
        self.result = None
        self.screen.query_one(ResultsList).clear_result()

    def _stale(self, query: str) -> None:
        """The box says something else now: the word about `query` is dropped. If it was the newest query's,
        nothing is searching any more (the text typed since has not been submitted)."""
        if query == self.asked and self.held is None and self.pending is not None:
            self.pending = None
            self.on_change()

    def release(self) -> None:
        """The datasets are listed: a held query is answered now, or no longer said to be waiting."""
        held, self.held = self.held, None
        if held is not None and self.target()[0] is not None and self.current(held):
            self.run(held)   # asked before there was a dataset: answered now
        elif held is not None:
            self.pending = None
            self.on_change()

    def drop_held(self, why: str) -> None:
        """A held query will never find its dataset: say so, once."""
        if self.held is not None:
            self.held = None
            self.pending = None
            self.screen.notify(f"your query was not run: {why}", severity="warning")
            self.on_change()

    def status_parts(self) -> list[tuple[str, str]]:
        """The status line's words for the query: its state while it runs, else the answer's size and time."""
        if self.pending:
            return [(self.pending, "italic")]
        r = self.result
        if r is None:
            return []
        parts = [(f"{len(r)} hit{'' if len(r) == 1 else 's'} in {r.timings_ms.get('total', 0):.0f} ms", "dim")]
        coverage = r.dense_coverage   # below 1 while an ingest still embeds its backlog
        if r.mode != RetrievalMode.SPARSE and coverage < 1.0:
            parts.append((f"dense covers {coverage:.0%} of passages (still embedding)", "yellow"))
        return parts
