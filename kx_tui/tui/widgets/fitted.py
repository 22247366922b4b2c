"""Values that fit the cells they are given: the longest of a few wordings that fits, else the last one cut in its
middle, so both ends of a model id ("all-Mi…ef67f6b") stay on screen. Rich renderables, measured and drawn at
the width the layout gives them, so a sidebar or table resized later needs no code of ours to redo them."""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

_NARROWEST = 5   # cells a value may be squeezed to: "a…b" still tells two ids apart


def middle_cut(text: str, cells: int) -> str:
    """`text` in at most `cells` terminal cells: whole when it fits, else its start and end around an "…"."""
    if cell_len(text) <= cells:
        return text
    if cells <= 1:
        return "…"[:cells]
    tail_cells = (cells - 1) // 2
    head = set_cell_size(text, cells - 1 - tail_cells).rstrip()   # a wide character never half-shown
    tail = ""
    for ch in reversed(text):
        if cell_len(ch + tail) > tail_cells:
            break
        tail = ch + tail
    return head + "…" + tail


class Fitted:
    """The first of `wordings` that fits the width it is drawn in; when none does, the last one cut in its middle
    (an id: both ends tell) or, with `middle=False`, at its end (words: their start reads)."""

    def __init__(self, *wordings: str, style: str = "", middle: bool = True) -> None:
        self.wordings = wordings
        self.style = style
        self.middle = middle

    def text(self, cells: int) -> Text:
        for wording in self.wordings:
            if cell_len(wording) <= cells:
                return Text(wording, style=self.style, no_wrap=True)
        if self.middle:
            return Text(middle_cut(self.wordings[-1], cells), style=self.style, no_wrap=True)
        cut = Text(self.wordings[-1], style=self.style, no_wrap=True, overflow="ellipsis")
        cut.truncate(cells, overflow="ellipsis")
        return cut

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.text(options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max(cell_len(w) for w in self.wordings)
        return Measurement(min(widest, _NARROWEST), widest).clamp(max_width=options.max_width)

    @property
    def plain(self) -> str:
        """The full wording, as a rich Text's `plain` is its text."""
        return self.wordings[0]

    def __str__(self) -> str:
        return self.wordings[0]
