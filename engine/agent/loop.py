"""The bounded research loop: one entry point, two brains, one set of hard bounds.

`run_agent(backend, goal, dataset, ...)` picks the brain — the chat model
when `agent_chat_url` is set, else the offline brain (the embedder only) —
and hands it a `Reader`: the only way a brain touches the dataset. The reader
searches through the Backend (so the same loop runs on the in-process engine
or over a gateway), remembers every passage read, writes one transcript step
per search, and enforces the bounds (steps, passages read, wall time) whatever
the brain asks for.

Degrading: with no dataset the chat brain answers as a plain agent and says
so; the offline brain has nothing to read and refuses with FAILED_PRECONDITION.
An unknown dataset is NOT_FOUND before any step is taken.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ..backend import Backend
from ..config import Settings
from ..errors import invalid, precondition
from ..records import Hit
from .records import (
    BUDGET_PASSAGES,
    BUDGET_STEPS,
    BUDGET_TIME,
    CHAT,
    OFFLINE,
    AgentRun,
    Citation,
    Step,
)

StepFn = Callable[[Step], None]
EmbedFn = Callable[[Sequence[str]], np.ndarray]
MAX_GOAL_CHARS = 4000


@dataclass(frozen=True)
class Bounds:
    """Hard limits of one run; the loop stops at the first one reached."""

    max_steps: int
    max_passages: int
    max_seconds: float
    k: int

    @classmethod
    def from_settings(cls, settings: Settings, max_steps: int | None = None) -> "Bounds":
        steps = settings.agent_max_steps
        if max_steps is not None:
            if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
                raise invalid(f"max steps must be a whole number of at least 1, got {max_steps!r}")
            steps = min(max_steps, settings.agent_max_steps)  # a caller may tighten the bound, never loosen it
        return cls(steps, settings.agent_max_passages, settings.agent_max_seconds, settings.agent_k)


def citation_label(hit: Hit | dict[str, Any]) -> str:
    """`[document p. 6, chunk 3/12]`; the page part only where the document has pages."""
    get = hit.get if isinstance(hit, dict) else lambda key, default=None: getattr(hit, key, default)
    where = str(get("document_name"))
    start, end = get("page_start", None), get("page_end", None)
    if start is not None:
        where += f" p. {start}" if end in (None, start) else f" pp. {start}–{end}"
    return f"[{where}, chunk {int(get('chunk_index')) + 1}/{get('chunk_count')}]"


class Reader:
    """The brains' one window on the dataset: searches, remembers what was read, keeps the bounds."""

    def __init__(self, backend: Backend, dataset: str, bounds: Bounds, on_step: StepFn | None = None) -> None:
        self.backend = backend
        self.dataset = dataset
        self.bounds = bounds
        self.on_step = on_step
        self.started = time.monotonic()
        self.steps: list[Step] = []
        self.hits: dict[str, Hit] = {}          # every passage read, in the order first read

    def exhausted(self) -> str | None:
        """The bound already reached, or None while the run may go on."""
        if len(self.steps) >= self.bounds.max_steps:
            return BUDGET_STEPS
        if len(self.hits) >= self.bounds.max_passages:
            return BUDGET_PASSAGES
        if self.seconds_left() <= 0:
            return BUDGET_TIME
        return None

    def seconds_left(self) -> float:
        return self.bounds.max_seconds - (time.monotonic() - self.started)

    def search(self, query: str, *, k: int | None = None, mode: str | None = None, why: str = "") -> tuple[Step, list[Hit]]:
        """One step: search, note which hits are new, and report the step.

        Never reads past the passage bound: the hits beyond it are dropped
        from the step (and said so in `why`).
        """
        t = time.perf_counter()
        k = self.bounds.k if k is None else k
        result = self.backend.query(self.dataset, query, k=k, mode=mode)
        room = self.bounds.max_passages - len(self.hits)
        new: list[Hit] = []
        for hit in result.hits:
            if hit.passage_ref not in self.hits and len(new) < room:
                new.append(hit)
        new_refs = {h.passage_ref for h in new}
        kept = [h for h in result.hits if h.passage_ref in self.hits or h.passage_ref in new_refs]
        for hit in new:
            self.hits[hit.passage_ref] = hit
        if len(kept) < len(result.hits):
            why = (why + "; " if why else "") + "passage bound reached: the rest left unread"
        step = Step(index=len(self.steps) + 1, query=query, mode=result.mode, k=result.k,
                    refs=[h.passage_ref for h in kept], new_refs=[h.passage_ref for h in new], why=why,
                    elapsed_ms=round((time.perf_counter() - t) * 1000.0, 1))
        self.steps.append(step)
        return step, kept

    def refuse(self, error: str, why: str = "") -> Step:
        """A step that searched nothing: a tool call the loop would not run."""
        step = Step(index=len(self.steps) + 1, query=None, mode=None, k=None, why=why, error=error)
        self.steps.append(step)
        self.report(step)
        return step

    def report(self, step: Step) -> None:
        if self.on_step is not None:
            self.on_step(step)

    def citation(self, ref: str) -> Citation:
        hit = self.hits[ref]
        return Citation(ref, citation_label(hit), hit.document_name, hit.document_ref)

    def finish(self, goal: str, brain: str, stop_reason: str, answer: str, citations: list[Citation],
               **extra: Any) -> AgentRun:
        return AgentRun(goal=goal, dataset=self.dataset, brain=brain, steps=self.steps, stop_reason=stop_reason,
                        answer=answer, citations=citations,
                        read={ref: hit.to_dict() for ref, hit in self.hits.items()},
                        elapsed_ms=round((time.monotonic() - self.started) * 1000.0, 1), **extra)


class Brain(Protocol):
    """Decides what to search and when to stop, then writes the cited answer.

    Args: the goal, and the Reader it must do all its reading through.
    Returns: the finished run (`Reader.finish`).
    """

    def run(self, goal: str, reader: Reader) -> AgentRun: ...


def check_goal(goal: Any) -> str:
    if not isinstance(goal, str) or not goal.strip():
        raise invalid("the goal is empty; say what the agent should find out, e.g. --goal \"summarise our refund "
                      "policy\"")
    if len(goal) > MAX_GOAL_CHARS:
        raise invalid(f"the goal is {len(goal):,} characters; keep it under {MAX_GOAL_CHARS:,}")
    return goal.strip()


def run_agent(
    backend: Backend,
    settings: Settings,
    goal: str,
    dataset: str | None = None,
    *,
    embed: EmbedFn | None = None,
    max_steps: int | None = None,
    on_step: StepFn | None = None,
    chat_transport: Any = None,
) -> AgentRun:
    """Run one bounded research loop over `dataset` (or none) and return its transcript and answer.

    `embed` is needed by the offline brain (the engine's embedder); the chat
    brain is used whenever `settings.agent_chat_url` is set. `on_step` is
    called with each step as it happens. `chat_transport` replaces the HTTP
    transport in tests of the protocol (an httpx transport).
    """
    goal = check_goal(goal)
    bounds = Bounds.from_settings(settings, max_steps)
    if dataset is not None:
        backend.dataset_summary(dataset)  # NOT_FOUND (or a bad name) before any step
    if settings.agent_chat_url:
        from .chat import ChatBrain, ChatClient

        client = ChatClient(settings.agent_chat_url, settings.agent_chat_model, settings.agent_chat_key,
                            transport=chat_transport)
        chat = ChatBrain(client)
        try:
            if dataset is None:
                return chat.plain(goal, bounds)
            return chat.run(goal, Reader(backend, dataset, bounds, on_step))
        finally:
            client.close()
    else:
        if dataset is None:
            raise precondition("the offline agent reads a dataset and has no model to answer from memory; "
                               "give --dataset NAME, or set KX_AGENT_CHAT_URL to an OpenAI-compatible chat "
                               "endpoint to run a plain agent")
        if embed is None:
            raise precondition("the offline agent needs the embedding model to judge passages and sentences, "
                               "and none is configured here; set KX_SERVE_EMBED_MODEL, or run it where the "
                               "engine runs (in-process, or through the gateway's /v1/agent/runs)")
        from .offline import OfflineBrain

        brain: Brain = OfflineBrain(embed)
    return brain.run(goal, Reader(backend, dataset, bounds, on_step))


def run_agent_on(backend: Any, goal: str, dataset: str | None = None, *, max_steps: int | None = None,
                 on_step: StepFn | None = None) -> AgentRun:
    """Run the agent wherever `backend` keeps the engine: in this process, or on its gateway.

    An in-process Engine runs the loop here with its own embedder; a KxClient
    asks its gateway to run it (POST /v1/agent/runs), where the embedder
    lives, and reports the steps once the run is over.
    """
    if hasattr(backend, "run_agent"):
        run = backend.run_agent(goal, dataset=dataset, max_steps=max_steps)
        for step in run.steps:
            if on_step is not None:
                on_step(step)
        return run
    settings = backend.settings
    embed = None
    if not settings.agent_chat_url and dataset is not None:
        embedder = backend.embedder()
        if embedder is not None:
            embed = embedder.encode
    return run_agent(backend, settings, goal, dataset, embed=embed, max_steps=max_steps, on_step=on_step)
