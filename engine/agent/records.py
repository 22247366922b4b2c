"""What an agent run hands back: the transcript of its steps and the cited answer.

Plain dataclasses with `to_dict()` / `from_dict()`, so the CLI, the gateway
and the SDK show the same fields. A step is one search (or one refused tool
call); `read` maps every passage ref the run read to the `Hit` as the engine
returned it, so a citation can always be opened in its document.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from ..records import Hit


class StopReason(StrEnum):
    """Why a run stopped (a StrEnum: JSON, the gateway and the SDK carry its text)."""

    ENOUGH = "enough"                      # the brain judged that reading more would not change the answer
    NO_NEW = "no new passages"             # a round brought no new relevant passage
    BUDGET_STEPS = "budget: steps"
    BUDGET_PASSAGES = "budget: passages"
    BUDGET_TIME = "budget: time"
    NO_CORPUS = "no dataset"               # the chat brain answered as a plain agent


OFFLINE, CHAT = "offline", "chat"


@dataclass
class Step:
    """One search the loop made (or one tool call it refused)."""

    index: int
    query: str | None
    mode: str | None
    k: int | None
    # every passage the search returned, best first; where the search ranked deeper than it read
    # (`ranked` > 0: the offline brain), the passages read at this step, best fused first
    refs: list[str] = field(default_factory=list)
    new_refs: list[str] = field(default_factory=list)    # those not read before in this run
    ranked: int = 0                                      # passages the search ranked, read or not (0: = refs)
    relevant_new: int = 0                                # how many of the new ones bear on the goal
    why: str = ""                                        # the brain's reason for this query
    error: str | None = None                             # a refused tool call: what was wrong with it
    elapsed_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """The step on one line, as the CLI and the TUI show it while the run goes on."""
        if self.error is not None:
            return f"step {self.index}: refused a tool call: {self.error}"
        line = (f"step {self.index}: searched {self.query!r} ({self.mode}, k={self.k}): {len(self.refs)} passage(s), "
                f"{len(self.new_refs)} new, {self.relevant_new} relevant")
        if self.ranked:
            line += f", read from {self.ranked} ranked, fused with the earlier searches"
        return line + (f" — {self.why}" if self.why else "")


@dataclass(frozen=True)
class Citation:
    """One passage the answer cites, with what a reader needs to find it."""

    ref: str
    label: str                       # "[document p. 6, chunk 3/12]"
    document_name: str
    document_ref: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class AgentRun:
    goal: str
    dataset: str | None
    brain: str
    steps: list[Step]
    stop_reason: StopReason
    answer: str
    citations: list[Citation]
    read: dict[str, Hit]                         # passage ref -> the hit, as first read
    notes: list[str] = field(default_factory=list)
    stripped_citations: list[str] = field(default_factory=list)   # refs the model cited but never read
    found: bool = True
    elapsed_ms: float = 0.0

    def summary(self) -> str:
        """Why and when the run stopped, on one line."""
        return (f"stopped: {self.stop_reason} after {len(self.steps)} step(s), {len(self.read)} passage(s) read, "
                f"{self.elapsed_ms / 1000.0:.1f} s ({self.brain} brain)")

    def to_dict(self) -> dict[str, Any]:
        return {
            "goal": self.goal,
            "dataset": self.dataset,
            "brain": self.brain,
            "stop_reason": self.stop_reason,
            "found": self.found,
            "answer": self.answer,
            "citations": [c.to_dict() for c in self.citations],
            "stripped_citations": list(self.stripped_citations),
            "notes": list(self.notes),
            "elapsed_ms": self.elapsed_ms,
            "steps": [s.to_dict() for s in self.steps],
            "read": {ref: hit.to_dict() for ref, hit in self.read.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentRun:
        return cls(
            goal=data["goal"], dataset=data.get("dataset"), brain=data["brain"],
            steps=[Step(**s) for s in data.get("steps", [])], stop_reason=StopReason(data["stop_reason"]),
            answer=data["answer"], citations=[Citation(**c) for c in data.get("citations", [])],
            read={ref: Hit.from_dict(hit) for ref, hit in data.get("read", {}).items()},
            notes=list(data.get("notes", [])),
            stripped_citations=list(data.get("stripped_citations", [])), found=bool(data.get("found", True)),
            elapsed_ms=float(data.get("elapsed_ms", 0.0)),
        )
