"""What the two in-process backends (the embedded `Engine` and `MilvusBackend`) have alike, written once:
their model, through the `ModelHost` each holds, under the Backend's names; the warm-up; the agent run
here, in this process, with that model (`KxClient` has its gateway do all three); and the stop request
that work in flight honours at its next progress event.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

from .config import Settings
from .embedding.cards import ModelCard
from .embedding.host import ModelHost
from .errors import KxError, Status
from .records import IngestEvent, IngestEventFn, NotifyFn, Progress

if TYPE_CHECKING:
    from .agent_run import AgentRun, Step
    from .backend import Backend
    from .embedding.embedders import Embedder



class InProcessBackend(ABC):
    """The model half of an in-process backend. A subclass sets `settings` and `models`, and opens a
    dataset's readers in `searcher(name)`."""

    settings: Settings
    models: ModelHost
    # Set (a plain assignment, so a signal handler may do it) when the process is stopping, e.g. `kx serve`
    # after SIGTERM: the embedded engine's ingests and embeddings in flight leave at their next progress event
    # (a safe point: what was committed stays, the rest is the next writer's backlog) instead of holding the
    # stop up.
    stop_requested: bool = False

    def request_stop(self) -> None:
        """Ask the work in flight to leave at its next safe point: a plain assignment, so a signal handler
        may call it (`kx serve` and `kx mcp` stopping)."""
        self.stop_requested = True

    def unless_stopping(self, on_event: IngestEventFn | None) -> IngestEventFn:
        """`on_event`, raising UNAVAILABLE at the first progress event once `stop_requested` is set."""

        def emit(event: IngestEvent) -> None:
            if self.stop_requested and isinstance(event, Progress) and event.done < event.total:  # not at the end
                raise KxError(Status.UNAVAILABLE, "kx is stopping: this work was left at a safe point; what was "
                                                  "committed stays and the rest (its embedding backlog, or the "
                                                  "documents not yet added) is done by the next command on "
                                                  "this dataset")
            if on_event is not None:
                on_event(event)

        return emit

    # A folder's files deleted or renamed (a watch, `kx datasets ingest --sync`): only the in-process backends
    # move lineages (the gateway does not offer it), so the callers narrow a Backend to this class first.
    @abstractmethod
    def retire(self, name: str, lineages: Sequence[str]) -> list[str]:
        """Retire lineages (documents by name) whose source is gone; returns those that were live."""

    @abstractmethod
    def rename(self, name: str, moves: Sequence[tuple[str, str, str | None]]) -> list[str]:
        """Carry lineages to new names ((old name, new name, new path or None)); returns the old names moved."""

    @abstractmethod
    def copies(self, name: str) -> dict[str, tuple[str, str | None]]:
        """Live lineages a listing does not show under their own name: copies of another file's bytes
        (lineage.LineageState.copies); lineage -> (current ref, the copy's path or None)."""

    @abstractmethod
    def searcher(self, name: str) -> Any:
        """The dataset's open readers, cached (the warm-up opens them ahead of the first query)."""

    @property
    def on_notice(self) -> NotifyFn | None:
        return self.models.on_notice

    def model_card(self) -> ModelCard | None:
        return self.models.card()

    def embedder(self) -> Embedder | None:
        return self.models.embedder()

    def prepare_model(self, notify: NotifyFn | None = None) -> dict[str, Any] | None:
        return self.models.prepare(notify)

    def warm_up(self, dataset: str | None = None, notify: NotifyFn | None = None) -> bool:
        """Open `dataset`'s readers (the first query then finds them ready), or without one load the model."""
        if dataset is not None:
            self.searcher(dataset)
            return True
        return self.models.warm_up(notify)

    def run_agent(self, goal: str, dataset: str | None = None, max_steps: int | None = None,
                  on_step: Callable[[Step], None] | None = None) -> AgentRun:
        from .agent.loop import run_agent_here  # deferred: the loop is only loaded when asked for

        embedder = None if self.settings.agent_chat_url or dataset is None else self.embedder()
        return run_agent_here(cast("Backend", self), self.settings, embedder, goal, dataset, max_steps=max_steps,
                              on_step=on_step)
