"""Hybrid vs dense for one query, side by side: where each passage ranks in both, and the selected one's text."""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size
from rich.console import Group
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from engine.backend import Backend
from engine.errors import KxError
from engine.records import Hit, QueryResult, RetrievalMode

from ...markdown_text import looks_like_markdown, styled_text
from ...render import terminal_safe
from ..warmup import ModelWarmup
from ..widgets.footer import KeysFooter
from .keys import HELP, KeysScreen, back_keys

_QUERY_CHARS = 48   # of the query in the title: room for the dataset, k and MMR beside it at 80 columns


def movement(rank: int, other: int | None, absent: str) -> str:
    """▲n when this list ranks the passage n places higher than the other, ▼n lower; `absent` if the other lacks it."""
    if other is None:
        return absent
    if other > rank:
        return f"▲{other - rank}"
    if other < rank:
        return f"▼{rank - other}"
    return "="


def compare_rows(this: QueryResult, other: QueryResult, absent: str) -> list[tuple[str, tuple[str | Text, ...]]]:
    """(passage ref, cells) for each hit of `this`: its rank here, its rank in `other`, the marker."""
    other_rank = {h.passage_ref: h.rank for h in other}
    rows: list[tuple[str, tuple[str | Text, ...]]] = []
    for hit in this:
        there = other_rank.get(hit.passage_ref)
        rows.append((hit.passage_ref, (str(hit.rank), "—" if there is None else str(there),
                                       movement(hit.rank, there, absent), Text(terminal_safe(hit.document_name)),
                                       Text(hit.label))))
    return rows


def _name_in(name: str, cells: int) -> str:
    """`name` in `cells` cells: whole, or cut where it says least: a path loses its start (the file name at its
    end says more, as the hit list cuts a name), a plain name its end ("travel-and-ex…")."""
    if cell_len(name) <= cells:
        return name
    if "/" not in name:
        return set_cell_size(name, cells - 1).rstrip() + "…"
    end = ""
    for ch in reversed(name):
        if cell_len(ch + end) > cells - 1:
            break
        end = ch + end
    return "…" + end


def passage_card(ref: str, results: dict[str, QueryResult]) -> Group:
    """The passage `ref` with its rank in each result ("—" where it is missing) and its document."""
    hits: dict[str, Hit] = {mode: hit for mode, result in results.items() for hit in result
                            if hit.passage_ref == ref}
    hit = next(iter(hits.values()))
    head = Text()
    for mode in results:
        there = hits.get(mode)
        head.append(f"{mode} ", style="dim")
        head.append(f"#{there.rank}" if there else "—", style="bold")
        head.append("   ")
    head.append(terminal_safe(hit.document_name), style="bold cyan")
    head.append(f"  {hit.label}  ")
    head.append(f"chars {hit.char_start}–{hit.char_end}", style="dim")
    # Markdown as its text, as the hit list and the passage view show it (no "**RMA-7**")
    text, _where = styled_text(terminal_safe(hit.text, keep_layout=True),
                               markdown=looks_like_markdown(hit.source_path, hit.text))
    return Group(head, Text(""), text)


class CompareScreen(KeysScreen):
    """Runs the query as hybrid and as dense in a worker; the lower half shows the highlighted row's passage."""

    DEFAULT_CSS = """
    CompareScreen > #compare-title {
        padding: 0 1; background: $primary-darken-2; text-style: bold; text-wrap: nowrap; text-overflow: ellipsis;
    }
    CompareScreen > #compare-columns { height: 1fr; }
    CompareScreen .compare-column { width: 1fr; }
    CompareScreen .compare-head { padding: 0 1; text-style: bold; }
    CompareScreen > #compare-passage { height: 1fr; padding: 0 1; border-top: solid $primary-darken-2; }
    """
    BINDINGS = [*back_keys(), Binding("c", "close", "Back", show=False, tooltip="back (c again)"), HELP]
    HELP_TITLE = "compare"

    def __init__(self, backend: Backend, warmup: ModelWarmup, dataset: str, query: str, k: int,
                 rerank: bool) -> None:
        super().__init__()
        self.backend = backend
        self.warmup = warmup
        self.dataset = dataset
        self.query_text = query
        self.k = k
        self.rerank = rerank
        self.results: dict[str, QueryResult] = {}
        self.shown_ref: str | None = None   # the passage in the lower half

    def compose(self) -> ComposeResult:
        # the query as typed (a "[" is not markup, an escape is shown, not obeyed); a long one is cut, so the
        # title stays one line and the tables keep the screen
        query = terminal_safe(self.query_text)
        if len(query) > _QUERY_CHARS:
            query = query[:_QUERY_CHARS - 1].rstrip() + "…"
        yield Static(Text(f"compare · {self.dataset} · “{query}” · k={self.k} · MMR {'on' if self.rerank else 'off'}"),
                     id="compare-title")
        with Horizontal(id="compare-columns"):
            with Vertical(classes="compare-column"):
                yield Static("hybrid (rank · dense rank · vs dense)", classes="compare-head", id="hybrid-head")
                yield DataTable(id="compare-hybrid", cursor_type="row")
            with Vertical(classes="compare-column"):
                yield Static("dense (rank · hybrid rank · vs hybrid)", classes="compare-head", id="dense-head")
                yield DataTable(id="compare-dense", cursor_type="row")
        with VerticalScroll(id="compare-passage"):
            yield Static("loading…", id="compare-passage-text")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False)
    def load(self) -> None:
        self.warmup.wait()  # both modes embed: one model load, the warm-up's
        try:
            results = {mode: self.backend.query(self.dataset, self.query_text, k=self.k, mode=mode, rerank=self.rerank)
                       for mode in (RetrievalMode.HYBRID, RetrievalMode.DENSE)}
        except KxError as exc:   # e.g. the dataset was deleted on disk: said, and "loading…" goes
            self.app.call_from_thread(self._not_loaded, exc.message)
            return
        self.app.call_from_thread(self.show, results)

    def _not_loaded(self, message: str) -> None:
        self.app.notify(message, severity="error")
        self.query_one("#compare-passage-text", Static).update("the query could not be compared (Esc goes back)")

    def show(self, results: dict[str, QueryResult]) -> None:
        self.results = results
        hybrid, dense = results[RetrievalMode.HYBRID], results[RetrievalMode.DENSE]
        self._fill()
        first = hybrid[0] if len(hybrid) else (dense[0] if len(dense) else None)
        if first is None:
            self.query_one("#compare-passage-text", Static).update("no passage matches in either mode")
        else:
            self.show_passage(first.passage_ref)
        self.query_one("#compare-hybrid", DataTable).focus()

    def _fill(self) -> None:
        """Both tables, laid out for their width: the chunk label whole, the document name cut to what is left
        (_name_in), never the other way round. When the names do not fit whole (80 columns), the "other" column
        goes first: the marker beside it says the same (▲3 at #2 is #5 there)."""
        hybrid, dense = self.results[RetrievalMode.HYBRID], self.results[RetrievalMode.DENSE]
        for table_id, rows, mode, other in (("#compare-hybrid", compare_rows(hybrid, dense, "new"), "hybrid", "dense"),
                                            ("#compare-dense", compare_rows(dense, hybrid, "missing"), "dense",
                                             "hybrid")):
            table = self.query_one(table_id, DataTable)
            row = table.cursor_row if table.row_count else 0
            table.clear(columns=True)
            headings = ("#", "other", "", "chunk")
            widths = [max([len(heading), *(cell_len(str(cells[i])) for _r, cells in rows)])
                      for i, heading in ((0, "#"), (1, "other"), (2, ""), (4, "chunk"))]
            spare = (table.size.width or self.app.size.width // 2) - 2 - sum(w + 2 for w in widths) - 2
            names = max([len("document"), *(cell_len(str(cells[3])) for _r, cells in rows)])
            keep_other = spare >= names
            if not keep_other:
                spare += widths[1] + 2
            shown_name = min(names, spare) if spare >= 6 else 0
            for key, heading, width in zip(("rank", "other", "marker", "chunk"), headings, widths):
                if key != "other" or keep_other:
                    table.add_column(heading, width=width, key=key)
            if shown_name:
                table.add_column("document", width=shown_name, key="document")
            for ref, (rank, there, marker, name, label) in rows:
                cells: list[str | Text] = [rank, *([there] if keep_other else []), marker, label]
                if shown_name:
                    cells.append(Text(_name_in(str(name), shown_name), no_wrap=True))
                table.add_row(*cells, key=ref)
            if table.row_count:
                table.move_cursor(row=min(row, table.row_count - 1), animate=False)
            self.query_one(f"#{mode}-head", Static).update(
                f"{mode} (rank · {other} rank · vs {other})" if keep_other else f"{mode} (rank · vs {other})")
        self._filled_for = self.size.width

    def on_resize(self) -> None:
        if self.results and self.size.width != getattr(self, "_filled_for", 0):
            self.call_after_refresh(self._fill)

    @on(DataTable.RowHighlighted)
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        # filling a table highlights its first row too: only the table in use picks the passage
        if event.row_key.value is not None and self.results and event.data_table is self.focused:
            self.show_passage(str(event.row_key.value))

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        table = event.widget
        if isinstance(table, DataTable) and self.results and table.row_count:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            if key is not None:
                self.show_passage(str(key))

    def show_passage(self, ref: str) -> None:
        self.shown_ref = ref
        self.query_one("#compare-passage-text", Static).update(passage_card(ref, self.results))
        self.query_one("#compare-passage", VerticalScroll).scroll_home(animate=False)
