"""The keys, on one page, built from the bindings themselves (their tooltip, else their description)."""

from __future__ import annotations

from typing import Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen .help-title { text-align: center; }
    HelpScreen > #help-box {
        width: 84; max-width: 100%; height: auto; max-height: 100%;
        padding: 1 2; border: round $primary; background: $surface;
        border-subtitle-color: $text-muted;
    }
    HelpScreen.-short > #help-box { padding: 0 2; }
    """
    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "Close")]

    def __init__(self, sections: Sequence[tuple[str, Sequence[Binding]]]) -> None:
        super().__init__()
        self.sections = sections

    def rows(self) -> list[tuple[str, str, str]]:
        """(section, keys, what they do) for every binding, keys that share an action on one row."""
        rows = []
        for title, bindings in self.sections:
            for binding in bindings:
                keys = " / ".join(self.app.get_key_display(Binding(key, binding.action,
                                                                   key_display=binding.key_display))
                                  for key in (binding.key.split(",")[:1] if binding.key_display
                                              else binding.key.split(",")))
                rows.append((title, keys, binding.tooltip or binding.description))
        return rows

    def compose(self) -> ComposeResult:
        rows = self.rows()
        key_width = max((len(keys) for _t, keys, _w in rows), default=1)
        with VerticalScroll(id="help-box"):   # a small terminal scrolls it
            yield Static(Text("kx — keys", style="bold"), classes="help-title")
            for section in dict.fromkeys(title for title, _k, _w in rows):
                table = Table(show_header=False, expand=True, box=None, padding=(0, 2, 0, 0))
                table.add_column(style="bold cyan", no_wrap=True, width=key_width)
                table.add_column(ratio=1)   # the descriptions take the room and wrap; the keys never do
                for title, keys, what in rows:
                    if title == section:
                        table.add_row(keys, what)
                yield Static(Text(section, style="dim italic"))
                yield Static(table)
            yield Static("Esc, q or ? closes", classes="dim")

    def on_mount(self) -> None:
        self.query_one("#help-box").focus()   # ↑↓ scroll it from the start

    def on_resize(self) -> None:
        self.call_after_refresh(self._say_how)

    def _say_how(self) -> None:
        """On its border, whether there is more below (a small terminal): the keys that scroll, and how to close."""
        box = self.query_one("#help-box", VerticalScroll)
        box.border_subtitle = "↑↓ PgUp PgDn scroll · Esc closes" if box.max_scroll_y > 0 else ""
