"""One line per HTTP request on stderr: time, method, path, status, milliseconds, client.

An ASGI middleware for `kx serve` and `kx mcp --http`, wrapped outermost so a
request the guard refuses (401, 403, 413) is logged too. It never writes the
query string, a header (the token travels in one) or a body: the path is the
raw one as sent (percent-encoded, so it cannot carry a line break), and any
control character left in it is escaped.

    2026-12-03T17:02:11.482Z POST /v1/datasets/notes/query 200 14.2ms 127.0.0.1:51234

With `json_lines` each line is one JSON object with the same fields
(`time`, `method`, `path`, `status`, `ms`, `client`). A request whose client
left before an answer logs status 0 (JSON: null).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any, Callable

_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)}


def _clean(text: str) -> str:
    return text.translate(_CONTROL)


class RequestLog:
    """ASGI middleware: answer through `app`, then write one line for the request."""

    def __init__(self, app: Any, *, json_lines: bool = False, write: Callable[[str], None] | None = None) -> None:
        self.app = app
        self.json_lines = json_lines
        self._write = write or _stderr_line

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: int | None = None

        async def observed(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, observed)
        finally:
            self._write(self.line(scope, status, (time.perf_counter() - started) * 1000))

    def line(self, scope: dict, status: int | None, ms: float) -> str:
        raw = scope.get("raw_path")
        path = _clean(raw.decode("latin-1") if isinstance(raw, (bytes, bytearray)) else str(scope.get("path", "")))
        path = path.partition("?")[0]  # a raw path never holds the query, but be sure: no query strings in logs
        client = scope.get("client")
        where = f"{client[0]}:{client[1]}" if client else "-"
        method = _clean(str(scope.get("method", "-")))
        now = datetime.now(UTC)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"
        if self.json_lines:
            return json.dumps({"time": stamp, "method": method, "path": path, "status": status,
                               "ms": round(ms, 1), "client": where})
        return f"{stamp} {method} {path} {status or 0} {ms:.1f}ms {where}"


_lock = threading.Lock()


def _stderr_line(line: str) -> None:
    with _lock:  # requests finish on many threads and tasks: whole lines, never interleaved
        try:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # stderr closed or gone: the request itself was answered
            pass
