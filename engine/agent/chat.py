"""The chat brain: an OpenAI-compatible chat model drives the loop through one read-only tool.

`ChatClient` speaks POST {url}/chat/completions (llama.cpp server, Ollama,
vLLM, ...) over httpx with the `tools` / `tool_calls` protocol. `ChatBrain`
offers the model `search_dataset(query, k, mode)`; every call is validated
(an unknown tool, arguments that are not JSON, a missing or ill-typed field:
an error goes back to the model as the tool's answer and the loop goes on)
and runs through the Reader, which keeps the bounds. When a bound is reached
the model is asked once more, without tools, for its answer (given 30 s past
the time bound for it, so a run that ran out of time still ends with one).

Citations: each passage is shown to the model with a short id, and the model
is told to cite as `[ref:ID]`. In the final answer every such mark naming a
passage the run read becomes its label (`[document p. 6, chunk 3/12]`);
a mark naming anything else is stripped and reported, never passed on.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..agent_run import CHAT, AgentRun, Citation, StopReason
from ..config import ENV, SPEC_BY_NAME
from ..errors import KxError, Status
from ..records import RetrievalMode
from .reader import Bounds, Reader

SHORT_REF = 12
MAX_TOOL_K = 64
PASSAGE_CHARS = 1500
_CITE = re.compile(r"\s?\[ref:\s*([^\]\s]*)\s*\]", re.I)

TOOL = {
    "type": "function",
    "function": {
        "name": "search_dataset",
        "description": "Search the user's dataset (hybrid dense + BM25 retrieval) and read the best passages. "
                       "Read-only. Each passage comes with an id to cite as [ref:ID].",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for, in words."},
                "k": {"type": "integer", "minimum": 1, "maximum": MAX_TOOL_K,
                      "description": f"How many passages to read (default {SPEC_BY_NAME['agent_k'].default()})."},
                "mode": {"type": "string", "enum": [m.value for m in RetrievalMode],
                         "description": "hybrid (default) fuses dense and keyword search."},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
}

SYSTEM = (
    "You are a careful research assistant working over the user's own documents (dataset '{dataset}'). "
    "Use the search_dataset tool to find passages; search again with other words when a part of the goal is "
    "not covered yet. You have at most {steps} searches. When you know enough, answer in plain prose. Every "
    "claim must cite the passage it comes from as [ref:ID] with an ID you were shown; never invent an ID."
)
PLAIN_SYSTEM = ("You are a helpful assistant. No document collection is available for this question: answer "
                "from general knowledge, say where you are unsure, and do not cite sources.")


class ChatClient:
    """One OpenAI-compatible chat-completions endpoint."""

    def __init__(self, url: str, model: str, key: str = "", *, transport: Any = None) -> None:
        import httpx  # deferred: only the chat brain needs it

        base = url.rstrip("/")
        self.endpoint = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.model = model
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.Client(headers=headers, transport=transport)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 timeout: float) -> dict[str, Any]:
        """The assistant message the model answers with (content and/or tool_calls)."""
        import httpx

        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": 0}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        try:
            response = self._http.post(self.endpoint, json=body, timeout=max(timeout, 0.1))
        except httpx.TimeoutException:
            raise KxError(Status.UNAVAILABLE, f"the chat endpoint {self.endpoint} did not answer within the "
                                              f"agent's time bound ({ENV.agent_max_seconds})") from None
        except httpx.TransportError as exc:
            raise KxError(Status.UNAVAILABLE, f"cannot reach the chat endpoint {self.endpoint} "
                                              f"({type(exc).__name__}); start the model server or fix "
                                              f"{ENV.agent_chat_url}") from None
        if not response.is_success:
            raise KxError(Status.UNAVAILABLE, f"the chat endpoint {self.endpoint} answered HTTP "
                                              f"{response.status_code}: {response.text[:200]!r}; check "
                                              f"{ENV.agent_chat_model} and {ENV.agent_chat_key}")
        try:
            message = response.json()["choices"][0]["message"]
            if not isinstance(message, dict):
                raise TypeError
        except (ValueError, KeyError, IndexError, TypeError):
            raise KxError(Status.UNAVAILABLE, f"the chat endpoint {self.endpoint} answered without a "
                                              "chat-completions message; is it OpenAI-compatible?") from None
        return message

    def close(self) -> None:
        self._http.close()


def parse_search_call(call: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(arguments, None) for a valid search_dataset call, else (None, what is wrong with it)."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return None, "a tool call must name a function"
    if function.get("name") != "search_dataset":
        return None, f"unknown tool {str(function.get('name'))[:60]!r}; the only tool is search_dataset"
    raw = function.get("arguments", "{}")
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None, "the arguments are not valid JSON; send an object like {\"query\": \"...\"}"
    if not isinstance(args, dict):
        return None, "the arguments must be a JSON object like {\"query\": \"...\"}"
    unknown = sorted(set(args) - {"query", "k", "mode"})
    if unknown:
        return None, f"unknown argument(s) {', '.join(unknown)}; search_dataset takes query, k and mode"
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return None, "query must be a non-empty string"
    k = args.get("k", None)
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_TOOL_K):
        return None, f"k must be a whole number from 1 to {MAX_TOOL_K}"
    mode = args.get("mode", None)
    if mode is not None and mode not in list(RetrievalMode):
        return None, f"mode must be one of {', '.join(RetrievalMode)}"
    return {"query": query.strip(), "k": k, "mode": mode}, None


class ChatBrain:
    """The model chooses the searches and writes the answer; the loop keeps the bounds and the citations honest."""

    def __init__(self, client: ChatClient) -> None:
        self.client = client

    def run(self, goal: str, reader: Reader) -> AgentRun:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM.format(dataset=reader.dataset, steps=reader.bounds.max_steps)},
            {"role": "user", "content": goal},
        ]
        notes: list[str] = []
        try:
            while True:
                stop = reader.exhausted()
                if stop:
                    messages.append({"role": "user", "content": f"The search budget is spent ({stop}). Answer "
                                                                "now from the passages you have read, citing them "
                                                                "as [ref:ID]."})
                    answer = self._content(self.client.complete(messages, None, reader.seconds_left() + 30.0))
                    break
                message = self.client.complete(messages, [TOOL], reader.seconds_left())
                calls = message.get("tool_calls") or []
                if not isinstance(calls, list):
                    calls = [calls]  # not the protocol's list: answered as one malformed call
                if not calls:
                    stop, answer = StopReason.ENOUGH, self._content(message)
                    break
                messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": calls})
                for call in calls:
                    call_id = call.get("id", "") if isinstance(call, dict) else ""
                    messages.append({"role": "tool", "tool_call_id": str(call_id),
                                     "content": json.dumps(self._answer_call(call, reader))})
        except KxError as exc:
            if exc.status is not Status.UNAVAILABLE or "time bound" not in exc.message:
                raise
            stop, answer = StopReason.BUDGET_TIME, ""
            notes.append("the chat model did not answer within the time bound; the passages read are in the "
                         "transcript")
        answer, citations, stripped = resolve_citations(answer, reader)
        if stripped:
            notes.append(f"stripped {len(stripped)} citation(s) of passages the run never read: "
                         + ", ".join(stripped))
        return reader.finish(goal, CHAT, stop, answer, citations, notes=notes, stripped_citations=stripped)

    @staticmethod
    def _content(message: dict[str, Any]) -> str:
        content = message.get("content")
        return content.strip() if isinstance(content, str) else ""

    def _answer_call(self, call: Any, reader: Reader) -> dict[str, Any]:
        """The tool's answer to one call: passages, or an error the model can act on."""
        stop = reader.exhausted()
        if stop:  # several calls in one turn: the ones past the bound are not run
            return {"error": f"search budget spent ({stop}); answer from what you have read"}
        args, error = parse_search_call(call)
        if args is not None:
            try:
                step, hits = reader.search(args["query"], k=args["k"], mode=args["mode"], why="the model's call")
            except KxError as exc:
                if exc.status is not Status.INVALID_ARGUMENT:
                    raise
                error = exc.message
            else:
                step.relevant_new = len(step.new_refs)  # the model is the judge of relevance here
                reader.report(step)
                return {"passages": [{"id": h.passage_ref[:SHORT_REF], "cite_as": f"[ref:{h.passage_ref[:SHORT_REF]}]",
                                      "document": h.document_name, "where": reader.citation(h.passage_ref).label,
                                      "text": h.text[:PASSAGE_CHARS]} for h in hits]}
        reader.refuse(error or "a malformed tool call", why="a malformed tool call")
        return {"error": error}

    def plain(self, goal: str, bounds: Bounds) -> AgentRun:
        """No dataset: the model answers alone, and the run says so."""
        import time

        started = time.monotonic()
        message = self.client.complete([{"role": "system", "content": PLAIN_SYSTEM},
                                        {"role": "user", "content": goal}], None, bounds.max_seconds)
        answer, stripped = _strip_marks(self._content(message))
        notes = ["no dataset: the chat model answered as a plain agent with no corpus; nothing in the answer is "
                 "cited or checked against your documents"]
        if stripped:
            notes.append(f"stripped {len(stripped)} citation(s): there was no corpus to cite")
        return AgentRun(goal=goal, dataset=None, brain=CHAT, steps=[], stop_reason=StopReason.NO_CORPUS, answer=answer,
                        citations=[], read={}, notes=notes, stripped_citations=stripped,
                        elapsed_ms=round((time.monotonic() - started) * 1000.0, 1))


def resolve_citations(answer: str, reader: Reader) -> tuple[str, list[Citation], list[str]]:
    """Turn `[ref:ID]` marks into labels of passages read; strip (and list) the rest."""
    citations: list[Citation] = []
    stripped: list[str] = []

    def replace(match: re.Match[str]) -> str:
        given = match.group(1).lower()
        found = [ref for ref in reader.hits if given and ref.startswith(given)] if len(given) >= 6 else []
        if len(found) != 1:
            stripped.append(match.group(1) or "(empty)")
            return ""
        citation = reader.citation(found[0])
        if all(c.ref != citation.ref for c in citations):
            citations.append(citation)
        return " " + citation.label

    return _CITE.sub(replace, answer), citations, stripped


def _strip_marks(answer: str) -> tuple[str, list[str]]:
    stripped: list[str] = []

    def drop(match: re.Match[str]) -> str:
        stripped.append(match.group(1) or "(empty)")
        return ""

    return _CITE.sub(drop, answer), stripped
