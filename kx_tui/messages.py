"""Every custom message the TUI posts, as small dataclasses, in one place.

Workers run on threads and talk to the UI only through these (post_message is
thread-safe). Bursts are coalesced by their sender: a watched folder's events
arrive as one `WatchActivity` per flush, not one message per file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.message import Message

from engine.records import DatasetSummary, IngestReport, QueryResult


@dataclass
class DatasetsLoaded(Message):
    """The datasets under KX_HOME, freshly listed."""

    summaries: list[DatasetSummary]
    select: str | None = None   # the dataset to select once shown


@dataclass
class IngestProgressed(Message):
    """The first-run sample ingest is under way: `stage` is "embedding" or "indexing ..."."""

    stage: str
    done: int
    total: int


@dataclass
class IngestFinished(Message):
    report: IngestReport


@dataclass
class QueryAnswered(Message):
    """A query's answer, with each hit's highlighted spans (by passage ref)."""

    query: str
    result: QueryResult
    spans: dict[str, list[tuple[int, int]]] = field(default_factory=dict)


@dataclass
class QueryFailed(Message):
    query: str
    message: str


@dataclass
class WatchActivity(Message):
    """Lines describing what the watched folder did since the last flush (coalesced)."""

    lines: list[str]


@dataclass
class AgentStepped(Message):
    """One step of an agent run, as it happens (engine.agent.records.Step)."""

    step: object


@dataclass
class AgentFinished(Message):
    """An agent run's transcript and cited answer (engine.agent.records.AgentRun)."""

    run: object


@dataclass
class AgentFailed(Message):
    message: str
