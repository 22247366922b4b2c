"""The main screen's status line: dataset · mode · MMR · k · the model's state · the query's state."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static


def flow(parts: Sequence[tuple[str, str]], width: int = 0) -> Text:
    """(words, style) parts joined by " · ", in lines of `width` (0: one line).

    It breaks between parts, never inside one, so nothing is cut off at any width.
    """
    line = Text()
    column = 0
    for i, (words, style) in enumerate(parts):
        if i and width and column + 3 + len(words) > width:
            line.append("\n")
            column = 0
        elif i:
            line.append(" · ")
            column += 3
        line.append(words, style=style)
        column += len(words)
    return line


class StatusLine(Static):
    # wraps rather than cutting the model's state or the timings off
    DEFAULT_CSS = """
    StatusLine {
        height: auto;
        max-height: 3;
        padding: 0 1;
        color: $text-muted;
    }
    """
