"""Every custom message the TUI posts, as small dataclasses, in one place.

Workers and the folder watcher run on threads and talk to the UI only through
these (post_message is thread-safe). The watcher posts one message per event;
bursts coalesce in the receiver's queue through `can_replace`: a `WatchQueued`
still waiting is replaced by a newer one, which carries the current count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from textual.message import Message

from engine.records import DatasetSummary, DocumentSummary, IngestReport, PassageSpan, QueryResult
from engine.watch.events import (
    BatchDone,
    FolderEmpty,
    Ingested,
    Refused,
    Renamed,
    Retired,
    Unchanged,
    WatchError,
)

if TYPE_CHECKING:  # the agent's records are loaded when the agent screen runs, not with every message
    from engine.agent_run import AgentRun, Step


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
class WarmupNoted(Message):
    """A line from the model's warm-up while it runs (a first use exports the model's ONNX graph)."""

    line: str


@dataclass
class ModelWarmed(Message):
    """The warm-up worker is done: the model is loaded (or there was none to load, or it failed)."""


@dataclass
class QueryWaiting(Message):
    """A query is held until the model is loaded."""

    query: str


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
class DocumentsLoaded(Message):
    """A dataset's documents for the document browser: the first page as soon as it is read (`complete`
    False while more pages are coming), then every page of them."""

    dataset: str
    documents: list[DocumentSummary]
    versions: str = "latest"   # which view was loaded: "latest" or "all"
    complete: bool = True


@dataclass
class DocumentLoaded(Message):
    """One document's text and where its passages lie in it."""

    text: str
    passages: list[PassageSpan]


@dataclass
class WatchQueued(Message):
    """A file is waiting to settle; `waiting` counts every file waiting now."""

    path: str
    waiting: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, WatchQueued)  # the newer count says all this one did


@dataclass
class WatchFileDone(Message):
    """A watched file went in, was already there, or was refused."""

    event: Ingested | Unchanged | Refused
    waiting: int


@dataclass
class WatchLineageChanged(Message):
    """A watched file left the folder (its lineage retired) or was renamed in it: the counts changed."""

    event: Retired | Renamed


@dataclass
class WatchFolderEmpty(Message):
    """The watched folder was empty at start: the dataset's documents from it were kept, not retired."""

    event: FolderEmpty


@dataclass
class WatchBatchDone(Message):
    """A batch is committed: the dataset's counts changed."""

    event: BatchDone


@dataclass
class WatchFailed(Message):
    """The watcher reported a problem; a fatal one has stopped it."""

    event: WatchError


@dataclass
class AgentStepped(Message):
    """One step of an agent run, as it happens."""

    step: Step


@dataclass
class AgentFinished(Message):
    """An agent run's transcript and cited answer."""

    run: AgentRun


@dataclass
class AgentFailed(Message):
    message: str
