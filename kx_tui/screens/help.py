"""The key bindings, on one page."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = [
    ("/", "focus the query box"),
    ("Enter", "in the query box: run the query; on a hit: open it in its document"),
    ("Esc / Tab", "leave the query box (to use the keys below)"),
    ("m", "cycle the mode: hybrid → dense → sparse"),
    ("r", "MMR rerank on/off"),
    ("+ / -", "more / fewer hits (k)"),
    ("c", "compare hybrid and dense for this query"),
    ("w", "watch the dataset's inbox folder (start/stop)"),
    ("a", "ask the agent: a bounded research run over the dataset, with citations"),
    ("Ctrl+P", "command palette"),
    ("?", "this help"),
    ("q", "quit"),
]


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "Close")]

    def compose(self) -> ComposeResult:
        table = Table(title="kx — keys", show_header=False, expand=True, box=None, padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for key, what in KEYS:
            table.add_row(key, what)
        with Vertical(id="help-box"):
            yield Static(table)
            yield Static("Esc closes", classes="dim")
