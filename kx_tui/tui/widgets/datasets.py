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
            # one line each, cut with an ellipsis: a long model id never wraps onto a line of its own
            lines = [Text(s.name, style="bold"), Text(f"{s.documents} docs · {s.passages} passages", style="dim"),
                     Text(s.embed_model or "no model", style="dim italic")]
            if s.error:   # listed so the others still are: its zeros are nothing read, not an empty dataset
                lines[1:] = [Text("unreadable", style="bold red"), Text(terminal_safe(s.error), style="red")]
            for line in lines:
                line.no_wrap, line.overflow = True, "ellipsis"
            self.add_option(Option(Group(*lines), id=s.name))

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
        table = Table.grid(padding=(0, 1))
        table.add_column(style="dim", no_wrap=True, min_width=9)   # "documents", "tokenizer" whole
        table.add_column(no_wrap=True, overflow="ellipsis")   # a narrow sidebar cuts a value's end, never wraps
        table.add_row("dataset", Text(summary.name, style="bold"))
        if summary.error:
            table.add_row("error", Text(terminal_safe(summary.error), style="red"))
        table.add_row("documents", str(summary.documents))
        table.add_row("passages", str(summary.passages))
        table.add_row("created", _when(summary.created_at))
        fingerprint = summary.fingerprint or {}
        if "chunk_size" in fingerprint:
            overlap = fingerprint.get("chunk_overlap")
            table.add_row("chunks", f"{fingerprint['chunk_size']}" + (f" / {overlap} overlap" if overlap else ""))
        for key, value in fingerprint.items():
            if key not in ("chunk_size", "chunk_overlap"):
                shown = ("on" if value else "off") if isinstance(value, bool) else str(value)
                label = key.replace("_version", "").replace("embed_", "").replace("_", " ")  # short: never wraps
                table.add_row(label, Text(shown, overflow="ellipsis", no_wrap=True))
        self.update(table)
