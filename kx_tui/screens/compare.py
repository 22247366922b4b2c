"""Hybrid vs dense for one query, side by side: where each passage ranks in both."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from engine.errors import KxError
from engine.records import QueryResult


def movement(rank: int, other: int | None, absent: str) -> str:
    """▲n when this list ranks the passage n places higher than the other, ▼n lower, `absent` when the other lacks it."""
    if other is None:
        return absent
    if other > rank:
        return f"▲{other - rank}"
    if other < rank:
        return f"▼{rank - other}"
    return "="


def compare_rows(this: QueryResult, other: QueryResult, absent: str) -> list[tuple[str, tuple[str | Text, ...]]]:
    """(passage ref, cells) for each hit of `this`: its rank here, its rank in `other`, the marker."""
    other_rank = {h.passage_ref: h.rank for h in other.hits}
    rows = []
    for hit in this.hits:
        there = other_rank.get(hit.passage_ref)
        rows.append((hit.passage_ref, (str(hit.rank), "—" if there is None else str(there),
                                       movement(hit.rank, there, absent), Text(hit.document_name), Text(hit.label))))
    return rows


class CompareScreen(Screen):
    """Runs the query as hybrid and as dense in a worker; Escape (or c) goes back."""

    BINDINGS = [Binding("escape,c", "app.pop_screen", "Back")]

    def __init__(self, backend, dataset: str, query: str, k: int, rerank: bool) -> None:
        super().__init__()
        self.backend = backend
        self.dataset = dataset
        self.query_text = query
        self.k = k
        self.rerank = rerank
        self.results: dict[str, QueryResult] = {}

    def compose(self) -> ComposeResult:
        yield Static(f"compare · {self.dataset} · “{self.query_text}” · k={self.k} · "
                     f"MMR {'on' if self.rerank else 'off'}", id="compare-title")
        with Horizontal(id="compare-columns"):
            with Vertical(classes="compare-column"):
                yield Static("hybrid (rank · dense rank · vs dense)", classes="compare-head")
                yield DataTable(id="compare-hybrid", cursor_type="row")
            with Vertical(classes="compare-column"):
                yield Static("dense (rank · hybrid rank · vs hybrid)", classes="compare-head")
                yield DataTable(id="compare-dense", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        for table_id in ("#compare-hybrid", "#compare-dense"):
            self.query_one(table_id, DataTable).add_columns("#", "other", "", "document", "chunk")
        self.load()

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False)
    def load(self) -> None:
        try:
            results = {mode: self.backend.query(self.dataset, self.query_text, k=self.k, mode=mode,
                                                rerank=self.rerank) for mode in ("hybrid", "dense")}
        except KxError as exc:
            self.app.call_from_thread(self.app.notify, exc.message, severity="error")
            return
        self.app.call_from_thread(self.show, results)

    def show(self, results: dict[str, QueryResult]) -> None:
        self.results = results
        hybrid, dense = results["hybrid"], results["dense"]
        for table_id, rows in (("#compare-hybrid", compare_rows(hybrid, dense, "new")),
                               ("#compare-dense", compare_rows(dense, hybrid, "missing"))):
            table = self.query_one(table_id, DataTable)
            table.clear()
            for ref, cells in rows:
                table.add_row(*cells, key=ref)
