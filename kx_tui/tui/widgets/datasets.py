"""The datasets sidebar: a list of datasets and the selected one's details."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from engine.records import DatasetSummary

from ...render import terminal_safe
from .fitted import Fitted


def _when(stamp: float) -> str:
    return datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M") if stamp else "—"


class DatasetList(OptionList):
    """One line per dataset: name, documents, passages, embedding model."""

    DEFAULT_CSS = """
    DatasetList { height: auto; max-height: 50%; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.summaries: dict[str, DatasetSummary] = {}

    def show(self, summaries: list[DatasetSummary]) -> None:
        self.summaries = {s.name: s for s in summaries}
        self.clear_options()
        for s in summaries:
            # one line each: a long model id never wraps onto a line of its own; it loses its middle, so its
            # name and its revision both show (the tooltip and the details below have it whole)
            name = Text(s.name, style="bold", no_wrap=True, overflow="ellipsis")
            lines: list[Text | Fitted] = [
                name, Fitted(f"{s.documents:,} docs · {s.passages:,} passages", f"{s.documents:,} docs, "
                             f"{s.passages:,} passages", style="dim", middle=False),
                Fitted(s.embed_model or "no model", style="dim italic")]
            if s.error:   # listed so the others still are: its zeros are nothing read, not an empty dataset
                lines[1:] = [Text("unreadable", style="bold red", no_wrap=True),
                             Text(terminal_safe(s.error), style="red", no_wrap=True, overflow="ellipsis")]
            self.add_option(Option(Group(*lines), id=s.name))
        self._tooltip_for(self.highlighted)

    def _tooltip_for(self, index: int | None) -> None:
        """Hovering the list shows the highlighted dataset's model id whole (the line may have lost its middle)."""
        option = self.get_option_at_index(index) if index is not None and index < self.option_count else None
        summary = self.summaries.get(option.id or "") if option is not None else None
        self.tooltip = (f"{summary.name}: {summary.documents:,} documents, {summary.passages:,} passages\n"
                        f"model {summary.embed_model or 'none'}") if summary else None

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._tooltip_for(event.option_index)

    def select_name(self, name: str) -> None:
        if name in self.summaries:
            self.highlighted = self.get_option_index(name)


class DatasetDetails(Static):
    """The selected dataset's fingerprint, creation time and chunk settings."""

    DEFAULT_CSS = """
    DatasetDetails { height: auto; padding: 1 1; }
    """

    def show(self, summary: DatasetSummary | None) -> None:
        if summary is None:
            self.update("")
            return
        # a narrow sidebar (80 columns) never wraps a value: a shorter wording when there is one, else the value
        # loses its middle (a model id keeps its name and its revision); the tooltip has every value whole
        rows: list[tuple[str, str | Text | Fitted]] = [("dataset", Text(summary.name, style="bold"))]
        if summary.error:
            rows.append(("error", Text(terminal_safe(summary.error), style="red")))
        rows += [("documents", f"{summary.documents:,}"), ("passages", f"{summary.passages:,}")]
        created = _when(summary.created_at)
        rows.append(("created", Fitted(created, created.split(" ")[0])))
        fingerprint = summary.fingerprint or {}
        if "chunk_size" in fingerprint:
            size, overlap = fingerprint["chunk_size"], fingerprint.get("chunk_overlap")
            rows.append(("chunks", Fitted(f"{size} / {overlap} overlap", f"{size} / {overlap}") if overlap
                         else f"{size}"))
        for key, value in fingerprint.items():
            if key not in ("chunk_size", "chunk_overlap"):
                shown = ("on" if value else "off") if isinstance(value, bool) else str(value)
                label = key.replace("_version", "").replace("embed_", "").replace("_", " ")  # short: never wraps
                rows.append((label, Fitted(shown)))
        table = Table.grid(padding=(0, 1))
        table.add_column(style="dim", no_wrap=True, min_width=9)   # "documents", "tokenizer" whole
        table.add_column(overflow="ellipsis")
        for label, value in rows:
            table.add_row(label, value)
        self.update(table)
        self.tooltip = "\n".join(f"{label:<9} {value}" for label, value in rows)
