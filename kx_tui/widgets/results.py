"""The query's answer: one option per hit, explained (ranks per retriever, MMR) and highlighted."""

from __future__ import annotations

from rich.console import Group
from rich.padding import Padding
from rich.text import Text
from textual.binding import Binding
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from engine.records import Hit, QueryResult

from ..render import mmr_marker, passage_preview


def rank_or_dash(rank: int | None) -> str:
    return f"#{rank}" if rank is not None else "—"


def hit_header(hit: Hit) -> Text:
    """rank, score, document, [chunk i/N], dense and sparse ranks, MMR marker."""
    line = Text()
    line.append(f"{hit.rank:>2} ", style="bold")
    line.append(f"{hit.score:.4f}  ")
    line.append(hit.document_name, style="bold cyan")
    line.append(f"  {hit.label}  ")
    line.append(f"dense {rank_or_dash(hit.dense_rank)} · sparse {rank_or_dash(hit.sparse_rank)}", style="dim")
    marker = mmr_marker(hit.mmr_moved)
    if marker:
        line.append(f"  {marker}", style="magenta")
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
            self.add_option(Option(Group(hit_header(hit), Padding(preview, (0, 0, 1, 3))), id=f"hit-{i}"))
        if result.hits:
            self.highlighted = 0

    def hit_at(self, index: int) -> Hit | None:
        if self.result is None or not 0 <= index < len(self.result.hits):
            return None
        return self.result.hits[index]
