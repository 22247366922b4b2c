"""What an empty home shows: the first run's progress line while the samples are built, else how to add documents."""

from __future__ import annotations

from typing import Any

from textual.widgets import Static

from engine.config import ENV

FIRST_RUN = f"""[b]No datasets yet.[/b]

Add documents from a shell, then come back:

  kx datasets ingest NAME --file notes.md --file more/*.txt
  kx datasets watch NAME          (ingests what lands in ${ENV.home}/inbox/NAME)

Press [b]Ctrl+Q[/b] to quit, [b]F1[/b] for the keys."""
# Keys that act wherever focus is: the note shows while the query box has it, which would take q and ? as text.


class BuildProgressLine(Static):
    # the first run's one progress line: what is happening, how long, what is left (warmup.BuildProgress)
    DEFAULT_CSS = """
    BuildProgressLine {
        height: auto;
        padding: 0 1;
        color: $warning;
    }
    """


class FirstRunNote(Static):
    """How to add documents, where there is no dataset and nothing to build one from (a gateway, no samples)."""

    DEFAULT_CSS = """
    FirstRunNote {
        padding: 1 2;
        border: round $warning;
        height: auto;
    }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(FIRST_RUN, **kwargs)
