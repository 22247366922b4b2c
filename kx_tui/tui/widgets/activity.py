"""The activity panel: what the watched inbox folder is doing, line by line."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.widgets import RichLog

from ...render import terminal_safe

_MAX_LINES = 500


class ActivityLog(RichLog):
    DEFAULT_CSS = """
    ActivityLog { height: 8; border-top: solid $primary-darken-2; }
    """

    def __init__(self, **kwargs: Any) -> None:
        # min_width: wrap at the panel's own width (RichLog's default wraps at 78 and scrolls sideways, which cut
        # the middle out of a batch's counts at 80 columns)
        super().__init__(markup=True, wrap=True, max_lines=_MAX_LINES, min_width=20, **kwargs)
        self.lines_written: list[str] = []   # plain copies, for tests and screenshots
        self._wrapped_at = 0

    def add(self, line: str) -> None:
        # a line names files and folders as the disk has them (a name is anyone's bytes): shown, not obeyed;
        # markup survives, as only control characters change
        line = terminal_safe(line)
        self.lines_written.append(line)
        self.write(line)

    def on_resize(self, event: events.Resize) -> None:
        """A line is wrapped once, as it is written: at a new width, the lines are written again to fit it.
        (RichLog's own on_resize runs as well: Textual calls the handler of each class.)"""
        width = self.scrollable_content_region.width
        if self._wrapped_at and width != self._wrapped_at and self.lines_written:
            self.clear()
            for line in self.lines_written[-_MAX_LINES:]:
                self.write(line)
        self._wrapped_at = width
