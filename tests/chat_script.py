"""A scripted OpenAI-compatible chat-completions server on loopback, for the agent's chat brain.

It is not a model: each POST /v1/chat/completions is answered by the next
function of a fixed script, which sees the request body (so it can cite an
id the loop really showed it) and returns the assistant message. Every
request is kept for the test to inspect.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Turn = Callable[[dict[str, Any]], dict[str, Any]]


class ScriptedChat:
    def __init__(self) -> None:
        self.script: list[Turn] = []
        self.requests: list[dict[str, Any]] = []
        self.repeat_last = False
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:  # keep pytest's output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                owner.requests.append(body)
                if self.path != "/v1/chat/completions":
                    self._send(404, {"error": {"message": "no such route"}})
                    return
                if not owner.script:
                    self._send(500, {"error": {"message": "the script has run out"}})
                    return
                turn = owner.script[0] if owner.repeat_last and len(owner.script) == 1 else owner.script.pop(0)
                message = turn(body)
                self._send(200, {"id": "chatcmpl-test", "object": "chat.completion", "model": body.get("model"),
                                 "choices": [{"index": 0, "message": {"role": "assistant", **message},
                                              "finish_reason": "tool_calls" if message.get("tool_calls")
                                              else "stop"}]})

            def _send(self, status: int, data: dict[str, Any]) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        if self.thread.is_alive():
            self.server.shutdown()
            self.server.server_close()
            self.thread.join()


def search(query: Any = None, *, raw: str | None = None, name: str = "search_dataset", call_id: str = "call-1",
           **extra: Any) -> dict[str, Any]:
    """An assistant turn asking for one tool call (raw: the arguments string exactly as given)."""
    args = raw if raw is not None else json.dumps({"query": query, **extra} if query is not None else extra)
    return {"content": None, "tool_calls": [{"id": call_id, "type": "function",
                                             "function": {"name": name, "arguments": args}}]}


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool answers the loop has sent so far in this request, parsed."""
    return [json.loads(m["content"]) for m in body["messages"] if m.get("role") == "tool"]


def first_seen_id(body: dict[str, Any]) -> str:
    for result in tool_results(body):
        for passage in result.get("passages", []):
            return passage["id"]
    raise AssertionError("the loop showed the model no passage")
