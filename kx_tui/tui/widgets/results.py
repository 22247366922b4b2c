"""The query's answer: one option per hit, explained (ranks per retriever, MMR) and highlighted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import Group
from rich.padding import Padding
from rich.text import Text
from textual.binding import Binding
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from engine.records import Hit, QueryResult, pages_label

from ...markdown_text import looks_like_markdown
from ...render import PREVIEW_CHARS, duplicate_marker, mmr_marker, passage_preview, shown_title, terminal_safe

_TITLE_CHARS = 40  # a long title must not push the chunk label and ranks off the line
_SHORT_LIST = 20   # rows: a list shorter than this (an 80x24 terminal) shows each passage in three lines, not seven,
                   # so two or three hits are on screen at once; Enter still opens the whole passage
_SHORT_PREVIEW_LINES = 3


def rank_or_dash(rank: int | None) -> str:
    return f"#{rank}" if rank is not None else "—"


def hit_title(hit: Hit) -> str | None:
    """The document's title beside a hit, unless its name says it or the section already starts with it (a
    Markdown file titled by its first heading: "Refunds and Returns › Store credit" says it once)."""
    title = shown_title(hit.document_name, hit.document_title)
    section = hit.section or ""
    if title and (section == title or section.startswith(title + " › ")):
        return None
    return title


def _title(hit: Hit, limit: int) -> str | None:
    title = hit_title(hit)
    if title and len(title) > limit:
        title = title[:limit - 1].rstrip() + "…"
    return title


def _last_cells(text: str, cells: int) -> str:
    """The end of `text` that fits in `cells` terminal cells (a CJK character or an emoji takes two)."""
    start = len(text)
    while start > 0 and cell_len(text[start - 1:]) <= cells:
        start -= 1
    return text[start:]


def hit_header(hit: Hit, hits: Sequence[Hit] = (), width: int = 0) -> Text:
    """rank, score, document, [chunk i/N] and pages, dense and sparse ranks, MMR marker; then, on a line of
    its own (so neither pushes the ranks off the first), the document's title and section.

    With a `width`, no field is ever cut or wrapped in its middle: the first line
    always keeps what says which passage this is and how well it matched: rank,
    score, document, chunk label and pages (a name too long for it loses its start:
    the file name at its end says more). The fields that do not fit after them
    move to the second line, least important first: the MMR markers, then the
    retrievers' ranks; that line is cut with an ellipsis at its end, never wrapped.
    """
    lead = Text()
    lead.append(f"{hit.rank:>2} ", style="bold")
    lead.append(f"{hit.score:.4f}  ")
    pages = pages_label(hit.page_start, hit.page_end)
    place = f"  {hit.label}" + (f" {pages}" if pages else "")
    name = terminal_safe(hit.document_name)   # stored: shown, not obeyed (render.terminal_safe)
    room = width - lead.cell_len - cell_len(place)
    if width and cell_len(name) > room:   # a name too long for the line loses its start, never the chunk label
        name = "…" + _last_cells(name, max(room - 1, 1))
    head = Text()
    head.append(name, style="bold cyan")
    head.append(place)
    ranks = Text(f"dense {rank_or_dash(hit.dense_rank)} · sparse {rank_or_dash(hit.sparse_rank)}", style="dim")
    markers = [Text(m, style="magenta") for m in (mmr_marker(hit.mmr_moved), duplicate_marker(hit, hits)) if m]
    first_len = lead.cell_len + head.cell_len
    kept: list[Text] = []
    for field in (ranks, *markers):   # most important first; once one moves, the rest follow it
        if width and first_len + 2 + field.cell_len > width:
            break
        kept.append(field)
        first_len += 2 + field.cell_len
    line = Text()
    line.append_text(lead)
    line.append_text(head)
    for field in kept:
        line.append("  ")
        line.append_text(field)
    second = Text()
    for field in (f for f in (ranks, *markers) if f not in kept):
        second.append(" · " if second.plain else "")
        second.append_text(field)
    title = _title(hit, _TITLE_CHARS)
    for piece, style in ((title, "italic cyan"), (hit.section, "green")):
        if piece:
            second.append(" · " if second.plain else "")
            second.append(terminal_safe(piece), style=style)
    if second.plain:
        line.append("\n   ")
        line.append_text(second)
    if width:
        lines = line.split("\n")
        for part in lines:
            part.no_wrap, part.overflow = True, "ellipsis"
            part.truncate(width, overflow="ellipsis")
        line = Text("\n").join(lines)
    return line


class ResultsList(OptionList):
    """The hits of the last answer; Enter on one opens its passage in its document."""

    DEFAULT_CSS = """
    ResultsList { height: 1fr; }
    """
    BINDINGS = [Binding("enter", "select", "Open", show=False, tooltip="on a hit: open it inside its document")]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.result: QueryResult | None = None
        self.spans: dict[str, list[tuple[int, int]]] = {}
        self._shown_size = (0, 0)

    def show(self, result: QueryResult, spans: dict[str, list[tuple[int, int]]], keep_place: bool = False) -> None:
        highlighted = self.highlighted if keep_place else None
        self.result, self.spans = result, spans
        width = self._width()
        self._shown_size = (width, self._short())
        limit = max(80, _SHORT_PREVIEW_LINES * (width - 3)) if width and self._short() else PREVIEW_CHARS
        self.clear_options()
        for i, hit in enumerate(result.hits):
            preview = passage_preview(hit, spans.get(hit.passage_ref, []), limit,
                                      markdown=looks_like_markdown(hit.source_path, hit.text))
            self.add_option(Option(Group(hit_header(hit, result.hits, width), Padding(preview, (0, 0, 1, 3))),
                                   id=f"hit-{i}"))
        if result.hits:
            self.highlighted = highlighted if highlighted is not None else 0

    def clear_result(self) -> None:
        """No answer on show (the query failed)."""
        self.result, self.spans = None, {}
        self.clear_options()

    def _width(self) -> int:
        """Cells a hit's line may take: the list's width less its border, padding and scrollbar (0: not laid out)."""
        width = self.scrollable_content_region.width
        return max(0, width - 2) if width else 0

    def _short(self) -> bool:
        height = self.scrollable_content_region.height
        return 0 < height < _SHORT_LIST

    def on_resize(self) -> None:
        if self.result is not None and (self._width(), self._short()) != self._shown_size:
            self.show(self.result, self.spans, keep_place=True)

    def hit_at(self, index: int) -> Hit | None:
        if self.result is None or not 0 <= index < len(self.result.hits):
            return None
        return self.result.hits[index]
