"""The query's answer: one option per hit, explained (ranks per retriever, MMR) and highlighted."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.padding import Padding
from rich.text import Text
from textual.binding import Binding
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from engine.records import Hit, QueryResult

from ..render import duplicate_marker, mmr_marker, passage_preview, shown_title

_TITLE_CHARS = 40  # a long title must not push the chunk label and ranks off the line


def rank_or_dash(rank: int | None) -> str:
    return f"#{rank}" if rank is not None else "—"


def document_heading(hit: Hit, title_chars: int = _TITLE_CHARS) -> Text:
    """The document's name, and its title beside it when that says more (cut to `title_chars`)."""
    text = Text(hit.document_name, style="bold cyan")
    title = _title(hit, title_chars)
    if title:
        text.append(f" — {title}", style="cyan")
    return text


def place(hit: Hit) -> Text:
    """[chunk i/N], then pages and section path when known (p. 6–7 · 3 Model › 3.1 LRS model)."""
    text = Text(hit.label)
    if hit.provenance:
        text.append(f" {hit.provenance}", style="green")
    return text


def _title(hit: Hit, limit: int) -> str | None:
    title = shown_title(hit.document_name, hit.document_title)
    if title and len(title) > limit:
        title = title[:limit - 1].rstrip() + "…"
    return title


def hit_header(hit: Hit, hits: Sequence[Hit] = ()) -> Text:
    """rank, score, document, [chunk i/N], dense and sparse ranks, MMR marker; then, on a line of
    its own (so neither pushes the ranks off the first), the document's title, pages and section."""
    line = Text()
    line.append(f"{hit.rank:>2} ", style="bold")
    line.append(f"{hit.score:.4f}  ")
    line.append(hit.document_name, style="bold cyan")
    line.append(f"  {hit.label}  ")
    line.append(f"dense {rank_or_dash(hit.dense_rank)} · sparse {rank_or_dash(hit.sparse_rank)}", style="dim")
    marker = mmr_marker(hit.mmr_moved)
    if marker:
        line.append(f"  {marker}", style="magenta")
    duplicate = duplicate_marker(hit, hits)
    if duplicate:
        line.append(f"  {duplicate}", style="magenta")
    title = _title(hit, _TITLE_CHARS)
    if title or hit.provenance:
        line.append("\n   ")
        if title:
            line.append(title, style="italic cyan")
        if title and hit.provenance:
            line.append(" · ")
        line.append(hit.provenance, style="green")
    return line


class ResultsList(OptionList):
    """The hits of the last answer; Enter on one opens its passage in its document."""

    DEFAULT_CSS = """
    ResultsList { height: 1fr; }
    """
    BINDINGS = [Binding("enter", "select", "Open", show=False, tooltip="on a hit: open it inside its document")]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.result: QueryResult | None = None

    def show(self, result: QueryResult, spans: dict[str, list[tuple[int, int]]]) -> None:
        self.result = result
        self.clear_options()
        for i, hit in enumerate(result.hits):
            preview = passage_preview(hit, spans.get(hit.passage_ref, []))
            self.add_option(Option(Group(hit_header(hit, result.hits), Padding(preview, (0, 0, 1, 3))), id=f"hit-{i}"))
        if result.hits:
            self.highlighted = 0

    def hit_at(self, index: int) -> Hit | None:
        if self.result is None or not 0 <= index < len(self.result.hits):
            return None
        return self.result.hits[index]
