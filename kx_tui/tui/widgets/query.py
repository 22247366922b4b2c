"""The query box: an Input whose Enter runs the query and whose Esc hands focus to the results."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input


class QueryBox(Input):
    BINDINGS = [
        Binding("enter", "submit", "Run", show=False, tooltip="in the query box: run the query"),
        Binding("escape", "leave", "Leave", show=False,
                tooltip="leave the query box (Tab too), so the one-letter keys act"),
    ]

    def action_leave(self) -> None:
        self.screen.focus_next()
