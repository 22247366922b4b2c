"""A dataset's documents in a table: sortable by any column, filtered as you type; Enter opens one.

Ctrl+T switches between each lineage's current version (the default, as
queries see the dataset) and every stored version: superseded and retired
ones too, each name marked "(v1, superseded)", "(v3, retired)"."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Input, Static

from engine.backend import Backend
from engine.errors import KxError
from engine.records import DocumentSummary, VersionView

from ...render import fit_columns, size_text, terminal_safe, version_label
from ..messages import DocumentsLoaded
from ..widgets.footer import KeysFooter
from .document_text import DocumentScreen
from .keys import HELP, KeysScreen, back_keys

PAGE = 1000  # documents per backend call while loading the whole list
# Rows put in the table at most. The table is filled on the UI thread at each key typed in the filter, at about
# a tenth of a millisecond a row: a dataset of 20,000 documents froze the screen for seconds a key. The filter
# narrows the list to what it holds; the count line says when rows are left out.
ROWS = 1000

# (column key, heading, cell, sort key); None sorts last whichever the direction
COLUMNS: list[tuple[str, str, Callable[[DocumentSummary], Any], Callable[[DocumentSummary], Any]]] = [
    ("name", "name", lambda d: Text(terminal_safe(d.name) + version_label(d)), lambda d: (d.name.lower(), d.version)),
    ("title", "title", lambda d: Text(terminal_safe(d.title or "—")), lambda d: (d.title or "").lower() or None),
    ("pages", "pages", lambda d: "—" if d.pages is None else str(d.pages), lambda d: d.pages),
    ("passages", "passages", lambda d: str(d.passages), lambda d: d.passages),
    ("type", "type", lambda d: d.media_type, lambda d: d.media_type),
    ("size", "size", lambda d: size_text(d.size), lambda d: d.size),
    ("ingested", "ingested", lambda d: _when(d.ingested_at), lambda d: d.ingested_at),
    ("source", "source", lambda d: Text(terminal_safe(d.source_path or "—")), lambda d: d.source_path),
]
_SORT_KEYS = {key: sort for key, _h, _c, sort in COLUMNS}
# what a narrow terminal keeps, most important first (the name always, and whole)
PRIORITY = ("name", "passages", "pages", "title", "size", "ingested", "type", "source")


def _when(stamp: float) -> str:
    return datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M") if stamp else "—"


def matches(document: DocumentSummary, words: list[str]) -> bool:
    """Every word of the filter appears (case-insensitively) in the name, title, media type or source path."""
    haystack = " ".join(filter(None, (document.name, document.title, document.media_type,
                                      document.source_path))).lower()
    return all(word in haystack for word in words)


def ordered(documents: list[DocumentSummary], key: str | None, reverse: bool) -> list[DocumentSummary]:
    """`documents` sorted by column `key` (None: ingest order), documents without a value last."""
    if key is None:
        return list(reversed(documents)) if reverse else list(documents)
    sort = _SORT_KEYS[key]
    known = [d for d in documents if sort(d) is not None]
    unknown = [d for d in documents if sort(d) is None]
    return sorted(known, key=sort, reverse=reverse) + unknown


class DocumentsScreen(KeysScreen):
    DEFAULT_CSS = """
    DocumentsScreen > #documents-title { padding: 0 1; background: $primary-darken-2; text-style: bold; }
    DocumentsScreen > #documents-table { height: 1fr; }
    DocumentsScreen > #documents-count { height: 1; padding: 0 1; color: $text-muted; }
    """
    BINDINGS = [
        *back_keys(q_shown=False),
        Binding("slash", "focus_filter", "Filter", key_display="/", tooltip="type to filter the documents"),
        Binding("ctrl+s", "cycle_sort", "Sort", tooltip="sort by the next column"),
        Binding("ctrl+r", "reverse_sort", "Reverse", tooltip="reverse the order"),
        Binding("ctrl+t", "toggle_versions", "Versions",
                tooltip="every stored version (superseded and retired ones too), or only the current ones"),
        Binding("down", "focus_table", "Table", show=False, tooltip="from the filter: into the table"),
        HELP,
    ]
    HELP_TITLE = "documents"

    def __init__(self, backend: Backend, dataset: str) -> None:
        super().__init__()
        self.backend = backend
        self.dataset = dataset
        self.documents: list[DocumentSummary] | None = None
        self.complete = False                 # every page read (False: the first page, the rest loading)
        self.widths: dict[str, int] = {}      # each column's width over every document
        self.priority: list[str] = list(PRIORITY)   # what a narrow table keeps first: empty columns last
        self.sort_key: str | None = None      # None: ingest order
        self.reverse = False
        self.shown: list[DocumentSummary] = []
        self.versions = VersionView.LATEST   # ctrl+t: VersionView.ALL

    def compose(self) -> ComposeResult:
        yield Static(f"documents · {self.dataset}", id="documents-title")
        yield Input(placeholder="filter: words in the name, title, type or source (Esc goes back)",
                    id="documents-filter")
        yield DataTable(id="documents-table", cursor_type="row", zebra_stripes=True)
        yield Static("loading…", id="documents-count")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.columns: list[str] = []
        self.query_one(Input).focus()
        self.load()

    @work(thread=True, exclusive=True, group="documents", exit_on_error=False)
    def load(self) -> None:
        versions = self.versions
        documents: list[DocumentSummary] = []
        try:
            while True:
                page = self.backend.list_documents(self.dataset, offset=len(documents), limit=PAGE,
                                                   versions=versions)
                documents.extend(page)
                if len(page) < PAGE:
                    break
                if len(documents) == PAGE:
                    # a big dataset: show the first page while the rest is read (48,500 documents took 7.7 s
                    # to list whole, SCALING.md), filtering and sorting what has come so far
                    self.post_message(DocumentsLoaded(self.dataset, list(documents), versions, complete=False))
        except KxError as exc:   # e.g. the dataset was deleted on disk since it was listed
            self.app.call_from_thread(self._not_listed, exc.message)
            return
        self.post_message(DocumentsLoaded(self.dataset, documents, versions))

    def _not_listed(self, message: str) -> None:
        self.app.notify(message, title="documents", severity="error", timeout=10)
        self.query_one("#documents-count", Static).update("the documents could not be listed (Esc goes back)")

    def on_documents_loaded(self, message: DocumentsLoaded) -> None:
        if message.versions != self.versions:   # toggled again while this list loaded
            return
        self.documents = message.documents
        self.complete = message.complete
        # each column's width over every document (the filter changes the rows, never the columns): once a list
        cells = {key: [cell(d) for d in self.documents] for key, _h, cell, _s in COLUMNS}
        self.widths = {key: max([len(heading), *(len(str(getattr(c, "plain", c))) for c in cells[key])])
                       for key, heading, _c, _s in COLUMNS}
        # a column that is "—" in every row says nothing: it is the first to go when the table is too narrow
        # (a folder of Markdown files has no pages; at 80 columns "ingested" shows instead)
        empty = {key for key, column in cells.items() if column and all(str(c) == "—" for c in column)}
        self.priority = [k for k in PRIORITY if k not in empty] + [k for k in PRIORITY if k in empty]
        self.refresh_rows()

    def action_toggle_versions(self) -> None:
        self.versions = VersionView.LATEST if self.versions is VersionView.ALL else VersionView.ALL
        shown = "every stored version" if self.versions is VersionView.ALL else "current versions"
        self.query_one("#documents-title", Static).update(f"documents · {self.dataset} · {shown}")
        self.query_one("#documents-count", Static).update("loading…")
        self.load()

    def refresh_rows(self) -> None:
        """Fill the table with the documents that pass the filter, in the chosen order."""
        if self.documents is None:
            return
        words = self.query_one(Input).value.lower().split()
        self.shown = ordered([d for d in self.documents if matches(d, words)], self.sort_key, self.reverse)
        table = self.query_one(DataTable)
        available = (table.size.width or self.app.size.width) - 2   # less the scrollbar
        columns = fit_columns(self.widths, self.priority, available, gap=2)   # DataTable pads each cell by 1 a side
        if columns != self.columns:
            table.clear(columns=True)
            for key, heading, _cell, _sort in COLUMNS:
                if key in columns:
                    table.add_column(heading, key=key)
            self.columns = columns
        else:
            table.clear()
        for document in self.shown[:ROWS]:
            table.add_row(*(cell(document) for key, _h, cell, _sort in COLUMNS if key in columns), key=document.ref)
        order = "ingest order" if self.sort_key is None else f"sorted by {self.sort_key}"
        arrow = " ↓" if self.reverse else " ↑"
        hidden = len(COLUMNS) - len(columns)
        self.query_one("#documents-count", Static).update(
            f"{len(self.shown):,} of {len(self.documents):,}{'' if self.complete else ' so far'} "
            + ("stored versions" if self.versions is VersionView.ALL else "documents")
            + ("" if self.complete else " · loading the rest…")
            + f" · {order}{arrow} · Enter opens"
            + (f" · the first {ROWS:,} listed: type to narrow" if len(self.shown) > ROWS else "")
            + (f" · {hidden} column{'s' if hidden > 1 else ''} hidden: too narrow" if hidden else ""))
        self._filled_for = table.size.width

    def on_resize(self) -> None:
        if self.documents is not None and self.query_one(DataTable).size.width != getattr(self, "_filled_for", 0):
            self.call_after_refresh(self.refresh_rows)

    @on(Input.Changed, "#documents-filter")
    def _filter_changed(self, _event: Input.Changed) -> None:
        self.refresh_rows()

    @on(Input.Submitted, "#documents-filter")
    def _filter_submitted(self, _event: Input.Submitted) -> None:
        self.open_row(self.query_one(DataTable).cursor_row)

    @on(DataTable.HeaderSelected)
    def _header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = str(event.column_key.value)
        self.reverse = not self.reverse if key == self.sort_key else False
        self.sort_key = key
        self.refresh_rows()

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        self.open_row(event.cursor_row)

    def open_row(self, index: int) -> None:
        if 0 <= index < len(self.shown):
            self.app.push_screen(DocumentScreen(self.backend, self.dataset, self.shown[index]))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "focus_filter" and isinstance(self.focused, Input):
            return False  # "/" is typed into the filter
        if action == "focus_table" and not isinstance(self.focused, Input):
            return False
        return super().check_action(action, parameters)

    def action_focus_filter(self) -> None:
        self.query_one(Input).focus()

    def action_focus_table(self) -> None:
        self.query_one(DataTable).focus()

    def action_cycle_sort(self) -> None:
        keys = [None, *(key for key, _h, _c, _s in COLUMNS)]
        self.sort_key = keys[(keys.index(self.sort_key) + 1) % len(keys)]
        self.reverse = False
        self.refresh_rows()

    def action_reverse_sort(self) -> None:
        self.reverse = not self.reverse
        self.refresh_rows()
