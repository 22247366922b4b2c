"""`kx mcp --http`: the streamable HTTP app inside the gateway's guard, and the answers a stop cuts short."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Sequence

from mcp.server.mcpserver import MCPServer

from ..errors import KxError, Status, not_found
from .mcp_jsonrpc import SERVER_ERROR, parse_error, refusal_of


def http_app(server: MCPServer, token: str, *, max_bytes: int, bind_host: str,
             allowed_hosts: Sequence[str] = (), allowed_origins: Sequence[str] = ()) -> AnswerWhenStopping:
    """The server's streamable HTTP app at /mcp, inside the gateway's Host, Origin, token and size guard.

    The SDK's own DNS-rebinding check is off: the gateway's guard (the same
    rules `kx serve` applies) has already answered every request it lets by.
    Outside the guard, `AnswerWhenStopping` answers what a stop cuts short.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    from .security import guard

    app = server.streamable_http_app(
        streamable_http_path="/mcp", max_request_body_size=max_bytes, host=bind_host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    return AnswerWhenStopping(guard(_OnlyMcp(_Screened(app)), token, max_bytes=max_bytes, bind_host=bind_host,
                                    allowed_hosts=allowed_hosts, allowed_origins=allowed_origins,
                                    command="kx mcp --http"), max_bytes)


class _Screened:
    """ASGI middleware: a POST whose body is not a JSON-RPC message kx serves gets the spec's error (-32700,
    -32600, -32602 with `data` naming the field) under its id, as over stdio (mcp_jsonrpc.py `refusal_of`);
    the SDK answered these with a pydantic dump under a null id, or "Invalid request parameters" and no data.
    Runs inside the guard, which has read and bounded the whole body."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        first = await receive()
        body = first.get("body", b"") if first["type"] == "http.request" else b""
        try:
            refusal = refusal_of(json.loads(body))
        except (ValueError, UnicodeDecodeError) as exc:
            refusal = parse_error(str(exc))
        if refusal is not None:
            payload = json.dumps(refusal).encode()
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(payload)).encode())]})
            await send({"type": "http.response.body", "body": payload})
            return
        replayed = False

        async def again() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return first
            return await receive()

        await self.app(scope, again, send)


class _OnlyMcp:
    """ASGI middleware: a path other than /mcp is NOT_FOUND as kx's `{code, message}`, saying where MCP is served
    (Starlette answered a plain-text "Not Found", which told a client pointed at / or /v1 nothing)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") not in ("/mcp", "/mcp/"):
            from .security import _send_error

            asked = str(scope.get("path", ""))[:200]
            await _send_error(send, not_found(f"kx mcp serves MCP at /mcp only, not at {asked!r}; point the client "
                                              "at http://HOST:PORT/mcp"))
            return
        await self.app(scope, receive, send)


STOPPING = KxError(Status.UNAVAILABLE, "kx mcp is stopping: this call was still running when the server stopped "
                                       "waiting for it; what it committed stays; call it again once kx mcp runs "
                                       "again")


class AnswerWhenStopping:
    """ASGI middleware: a request the server cancels while stopping still gets a JSON-RPC answer.

    `kx mcp --http` gives the calls in flight a drain, then cancels what still runs (kx_tui/cli/stopping.py
    `draining_server`). Without this, the cancel reached uvicorn: "Exception in ASGI application" with a
    traceback, and a plain-text 500 or a tool call's event stream cut off with no answer. Now a request
    whose answer has not started gets 503 with a JSON-RPC error (`UNAVAILABLE: ...`, which the MCP client
    raises as the call's error); a tool call whose event stream has started gets that error as its last
    event, under its request's id; a client's listening stream (GET), which answers nothing, just ends.
    `listening` holds those GET streams' tasks, for the server to end once nothing else runs.
    """

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.listening: set[asyncio.Task[Any]] = set()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        task = asyncio.current_task()
        if scope["type"] != "http" or task is None:
            await self.app(scope, receive, send)
            return
        body = bytearray()   # the request's JSON-RPC message, for its id (the guard bounds its size)
        started = streaming = done = False

        async def recorded() -> dict:
            message = await receive()
            if message["type"] == "http.request" and len(body) <= self.max_bytes:
                body.extend(message.get("body", b""))
            return message

        async def watched(message: dict) -> None:
            nonlocal started, streaming, done
            if message["type"] == "http.response.start":
                started = True
                streaming = any(k.lower() == b"content-type" and v.startswith(b"text/event-stream")
                                for k, v in message.get("headers", ()))
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                done = True
            await send(message)

        listening = scope.get("method") == "GET"
        if listening:
            self.listening.add(task)
        try:
            await self.app(scope, recorded, watched)
        except asyncio.CancelledError:
            if done or (started and not streaming):
                raise   # answered already, or half a plain answer, which cannot be taken back
            task.uncancel()   # handled here: the answer below must not be cancelled in turn
            await self._answer(send, started, None if listening else _request_id(bytes(body)))
        finally:
            self.listening.discard(task)

    @staticmethod
    async def _answer(send: Any, started: bool, request_id: Any) -> None:
        error = {"jsonrpc": "2.0", "id": request_id,
                 "error": {"code": SERVER_ERROR, "message": f"{STOPPING.code}: {STOPPING.message}",
                           "data": STOPPING.to_dict()}}
        payload = json.dumps(error).encode()
        if not started:
            await send({"type": "http.response.start", "status": STOPPING.status.http_status,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(payload)).encode())]})
            await send({"type": "http.response.body", "body": payload})
            return
        if request_id is not None:   # a tool call's stream: its answer, as the SDK frames one
            await send({"type": "http.response.body", "body": b"event: message\r\ndata: " + payload + b"\r\n\r\n",
                        "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _request_id(body: bytes) -> Any:
    """The id of the JSON-RPC request in `body`; None for a notification, a response, or what does not parse."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if isinstance(message, dict) and "method" in message and isinstance(message.get("id"), (str, int)):
        return message["id"]
    return None

