"""The activity panel: what the watched inbox folder is doing, line by line."""

from __future__ import annotations

from typing import Any

from textual.widgets import RichLog

from ...render import terminal_safe


class ActivityLog(RichLog):
    DEFAULT_CSS = """
    ActivityLog { height: 8; border-top: solid $primary-darken-2; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(markup=True, wrap=True, max_lines=500, **kwargs)
        self.lines_written: list[str] = []   # plain copies, for tests and screenshots

    def add(self, line: str) -> None:
        # a line names files and folders as the disk has them (a name is anyone's bytes): shown, not obeyed;
        # markup survives, as only control characters change
        line = terminal_safe(line)
        self.lines_written.append(line)
        self.write(line)
