"""The Reader, the only way a brain touches the dataset, and the bounds it enforces.

It searches through the Backend (so the same loop runs on the in-process
engine or over a gateway), remembers every passage read, writes one
transcript step per search, and enforces the bounds (steps, passages read,
wall time) whatever the brain asks for. The brains (offline.py, chat.py)
import it; loop.py picks a brain and hands it one.

Two ways to take a step: `search` reads the search's own top k (the chat
brain: the model asked for exactly those); `rank` then `read` searches
deeper than it reads and lets the brain choose which of the passages ranked
so far to read (the offline brain fuses every ranking of the run). Only
passages read count against the passage bound.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ..backend import Backend
from ..config import Settings
from ..errors import invalid
from ..records import Hit
from .records import AgentRun, Citation, Step, StopReason

StepFn = Callable[[Step], None]
EmbedFn = Callable[[Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class Bounds:
    """Hard limits of one run; the loop stops at the first one reached."""

    max_steps: int
    max_passages: int
    max_seconds: float
    k: int

    @classmethod
    def from_settings(cls, settings: Settings, max_steps: int | None = None) -> Bounds:
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
    return f"[{where}, chunk {int(get('chunk_index') or 0) + 1}/{get('chunk_count')}]"


@dataclass
class Ranking:
    """One search's ranked passages, none of them read yet (`Reader.rank`)."""

    query: str
    mode: str
    hits: list[Hit]
    started: float          # perf_counter when the search began: the step's time runs from here


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

    def exhausted(self) -> StopReason | None:
        """The bound already reached, or None while the run may go on."""
        if len(self.steps) >= self.bounds.max_steps:
            return StopReason.BUDGET_STEPS
        if len(self.hits) >= self.bounds.max_passages:
            return StopReason.BUDGET_PASSAGES
        if self.seconds_left() <= 0:
            return StopReason.BUDGET_TIME
        return None

    def seconds_left(self) -> float:
        return self.bounds.max_seconds - (time.monotonic() - self.started)

    def search(self, query: str, *, k: int | None = None, mode: str | None = None,
               why: str = "") -> tuple[Step, list[Hit]]:
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

    def rank(self, query: str, *, depth: int, vector: Any = None, mode: str | None = None) -> Ranking:
        """Search `depth` deep and hand back the ranking without reading any of it.

        `vector` (optional) searches dense with it instead of the query's own
        embedding; sparse still searches the words of `query`.
        """
        started = time.perf_counter()
        result = self.backend.query(self.dataset, query, vector=vector, k=max(1, depth), mode=mode)
        return Ranking(query, result.mode, list(result.hits), started)

    def read(self, ranking: Ranking, chosen: Sequence[Hit], *, why: str = "") -> Step:
        """One step: the search that made `ranking`, and the passages the brain chose to read after it.

        `chosen` may come from any ranking of the run. Passages already read
        are not read again and nothing is read past the passage bound (said
        so in `why`). The step is not reported yet: the brain judges it first.
        """
        room = self.bounds.max_passages - len(self.hits)
        fresh = [h for h in dict((h.passage_ref, h) for h in chosen).values() if h.passage_ref not in self.hits]
        if len(fresh) > room:
            why = (why + "; " if why else "") + "passage bound reached: the rest left unread"
            fresh = fresh[:max(0, room)]
        for hit in fresh:
            self.hits[hit.passage_ref] = hit
        refs = [h.passage_ref for h in fresh]
        step = Step(index=len(self.steps) + 1, query=ranking.query, mode=ranking.mode, k=self.bounds.k,
                    refs=refs, new_refs=list(refs), ranked=len(ranking.hits), why=why,
                    elapsed_ms=round((time.perf_counter() - ranking.started) * 1000.0, 1))
        self.steps.append(step)
        return step

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

    def finish(self, goal: str, brain: str, stop_reason: StopReason, answer: str, citations: list[Citation],
               **extra: Any) -> AgentRun:
        return AgentRun(goal=goal, dataset=self.dataset, brain=brain, steps=self.steps, stop_reason=stop_reason,
                        answer=answer, citations=citations,
                        read=dict(self.hits),
                        elapsed_ms=round((time.monotonic() - self.started) * 1000.0, 1), **extra)


class Brain(Protocol):
    """Decides what to search and when to stop, then writes the cited answer.

    Args: the goal, and the Reader it must do all its reading through.
    Returns: the finished run (`Reader.finish`).
    """

    def run(self, goal: str, reader: Reader) -> AgentRun: ...
