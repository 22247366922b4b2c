"""The bounded research loop: one entry point, two brains, one set of hard bounds.

`run_agent(backend, goal, dataset, ...)` picks the brain — the chat model
when `agent_chat_url` is set, else the offline brain (the embedder only) —
and hands it a `Reader` (reader.py): the only way a brain touches the
dataset, and the keeper of the bounds (steps, passages read, wall time).

Degrading: with no dataset the chat brain answers as a plain agent and says
so; the offline brain has nothing to read and refuses with FAILED_PRECONDITION.
An unknown dataset is NOT_FOUND before any step is taken.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..agent_run import AgentRun
from ..backend import Backend
from ..config import ENV, Settings
from ..errors import invalid, precondition
from .reader import Bounds, Brain, EmbedFn, Reader, StepFn, citation_label

if TYPE_CHECKING:
    from ..embedding.embedders import Embedder

__all__ = ["Bounds", "Reader", "citation_label", "check_goal", "run_agent", "run_agent_here"]

MAX_GOAL_CHARS = 4000


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
                               f"give --dataset NAME, or set {ENV.agent_chat_url} to an OpenAI-compatible chat "
                               "endpoint to run a plain agent")
        if embed is None:
            raise precondition("the offline agent needs the embedding model to judge passages and sentences, "
                               f"and none is configured here; set {ENV.embed_model}, or run it where the "
                               "engine runs (in-process, or through the gateway's /v1/agent/runs)")
        from .offline import OfflineBrain

        brain: Brain = OfflineBrain(embed, rrf_k=settings.rrf_k)
    return brain.run(goal, Reader(backend, dataset, bounds, on_step))


def run_agent_here(backend: Backend, settings: Settings, embedder: Embedder | None, goal: str,
                   dataset: str | None = None, *, max_steps: int | None = None,
                   on_step: StepFn | None = None) -> AgentRun:
    """An in-process backend's `run_agent` (Engine, MilvusBackend): the loop runs here, with the backend's
    embedder (the offline brain judges passages with it; None: none is configured, or the chat brain runs).
    A KxClient asks its gateway instead."""
    embed = None if embedder is None else embedder.encode
    return run_agent(backend, settings, goal, dataset, embed=embed, max_steps=max_steps, on_step=on_step)
