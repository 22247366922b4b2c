"""`kx mcp --http` stopped while a tool call is still running: the call gets a JSON-RPC error saying kx mcp is
stopping (it got uvicorn's "Exception in ASGI application" traceback and a cut-off stream, or an empty 200
stream with no answer), the server ends within the drain instead of waiting for the call's thread, and a call
that finishes within the drain gets its real answer.

In-process: the real MCP app under `kx mcp --http`'s own uvicorn server in a thread, over an engine whose
query waits until the test lets it go, driven by the `mcp` SDK's own client over streamable HTTP. Then the
real `kx mcp --http` process (its query slowed the same way) stopped by SIGTERM.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

import anyio
import pytest
import uvicorn
from mcp import Client
from sse_starlette.sse import AppStatus

import kx_tui.cli.mcp as mcp_module
from engine import Engine
from engine.errors import KxError, Status
from engine.server.mcp_server import build_server, http_app
from engine.text.inputs import from_text
from kx_tui.cli.stopping import BACKSTOP_SECONDS

from .helpers import start_server, wait_until_answering

TOKEN = "t" * 43


@pytest.fixture
def served(hash_engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    hash_engine.ingest("notes", [from_text("The parking garage opens at seven.", "parking")])
    # the server turns sse_starlette's process-wide switch off; the test gives it back
    monkeypatch.setattr(AppStatus, "enable_automatic_graceful_drain", AppStatus.enable_automatic_graceful_drain)
    yield hash_engine


def _serve(engine: Engine, drain: float,
           monkeypatch: pytest.MonkeyPatch) -> tuple[uvicorn.Server, threading.Thread, str, SimpleNamespace]:
    monkeypatch.setattr(mcp_module, "DRAIN_SECONDS", drain)
    app = http_app(build_server(engine), TOKEN, max_bytes=10**6, bind_host="127.0.0.1")
    # log_config None: uvicorn's loggers reach the root logger, where caplog reads them
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on",
                            timeout_graceful_shutdown=drain + BACKSTOP_SECONDS)
    stop = SimpleNamespace(count=0, last=None, first_at=None)
    server = mcp_module.mcp_http_server(config, app, stop, lambda: setattr(engine, "stop_requested", True))  # type: ignore[arg-type]
    thread, url, _sock = start_server(server)
    return server, thread, f"{url}/mcp", stop


def _call_search(url: str, seen: dict[str, Any]) -> threading.Thread:
    """A client that calls search once, in a thread of its own; what it got lands in `seen`."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async def run() -> None:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            await client.list_tools()   # the client checks a result against its tool's schema: fetched now,
            try:                         # not from a server that no longer takes new requests
                seen["result"] = await client.call_tool("search", {"dataset": "notes", "query": "parking",
                                                                   "mode": "sparse"})
            except Exception as exc:  # noqa: BLE001 - the test asserts what it was
                seen["error"] = exc
            seen["at"] = time.monotonic()

    def main() -> None:
        try:
            anyio.run(run)
        except Exception as exc:  # noqa: BLE001 - leaving a session on a stopped server may fail; not the point
            seen.setdefault("closing", exc)

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    return thread


def test_a_call_running_when_kx_mcp_stops_answers_unavailable_and_the_server_ends_promptly(
        served: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow_query(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(30)   # as a long search would: its worker thread is busy well past the drain
        raise KxError(Status.UNAVAILABLE, "let go at the test's end; nobody hears this answer")

    monkeypatch.setattr(served, "query", slow_query)
    caplog.set_level(logging.INFO)
    server, thread, url, stop = _serve(served, 0.5, monkeypatch)
    seen: dict[str, Any] = {}
    client = _call_search(url, seen)
    try:
        assert entered.wait(20), "the call did not start"
        started = time.monotonic()
        server.handle_exit(signal.SIGTERM, None)   # what SIGTERM runs while uvicorn serves (flags only)
        assert served.stop_requested and stop.count == 1 and stop.first_at is not None
        thread.join(10)
        client.join(10)
        ended = time.monotonic() - started
    finally:
        release.set()
    assert not thread.is_alive() and ended < 5, f"the server took {ended:.1f} s to stop"
    error = seen.get("error")
    assert error is not None, seen
    assert "UNAVAILABLE: kx mcp is stopping" in str(error) and "call it again" in str(error)
    assert seen["at"] - started < 5
    logged = "\n".join(f"{r.levelname} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "Exception in ASGI application" not in logged and not any(r.exc_info for r in caplog.records), logged
    # not even uvicorn's "Cancel 1 running task(s)", nor the SDK's "shutdown error response ... gave up"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], logged


def test_a_call_that_answers_within_the_drain_is_answered(served: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    real_query = served.query
    entered = threading.Event()

    def a_little_slow(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        time.sleep(0.5)
        return real_query(*args, **kwargs)

    monkeypatch.setattr(served, "query", a_little_slow)
    server, thread, url, _stop = _serve(served, 5, monkeypatch)
    seen: dict[str, Any] = {}
    client = _call_search(url, seen)
    assert entered.wait(20), "the call did not start"
    started = time.monotonic()
    server.handle_exit(signal.SIGTERM, None)
    client.join(15)
    thread.join(15)
    assert "error" not in seen, seen.get("error")
    result = seen.get("result")
    assert result is not None, seen
    assert not result.is_error and result.structured_content["hits"][0]["document_name"] == "parking"
    # the client's own listening stream did not hold the stop for the whole drain
    assert not thread.is_alive() and time.monotonic() - started < 4


# `kx` as its own process with Engine.query slowed down: a search that outlasts any drain
_SLOW_KX = """
import sys, time
from kx_tui.cli.stopping import install_early
install_early()
from engine.embedded.engine import Engine
def slow(self, *args, **kwargs):
    sys.stderr.write("the search started\\n"); sys.stderr.flush()
    time.sleep(60)
Engine.query = slow
from kx_tui.cli.root import main
main(sys.argv[1:])
"""


@pytest.mark.slow
def test_sigterm_stops_a_real_kx_mcp_http_with_a_call_in_flight_cleanly_and_in_time(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    import httpx

    from engine import load_settings

    from .helpers import REPO, free_port

    home = tmp_path / "home"
    engine = Engine(load_settings({"home": str(home), "embed_model": "none"}, env={}))
    engine.ingest("notes", [from_text("The parking garage opens at seven.", "parking")], [[1.0, 0.0, 0.0]])
    engine.close()   # no model anywhere: a vector given, a search in sparse mode
    env = {k: v for k, v in os.environ.items() if not k.startswith("KX_")}
    env.update({"KX_HOME": str(home), "KX_SERVE_EMBED_MODEL": "none", "PYTHONPATH": str(REPO)})
    port = free_port()
    log = tmp_path / "mcp.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", _SLOW_KX, "mcp", "--http", "--port", str(port)], cwd=REPO,
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/mcp"
    answer: dict[str, Any] = {}
    try:
        wait_until_answering(proc, url, log, within=60)
        headers = {"Authorization": f"Bearer {(home / 'gateway.token').read_text().strip()}",
                   "Accept": "application/json, text/event-stream"}
        hello = httpx.post(url, headers=headers, timeout=10, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}})
        headers.update({"mcp-session-id": hello.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"})
        httpx.post(url, headers=headers, timeout=10, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = threading.Thread(target=lambda: answer.update(r=httpx.post(url, headers=headers, timeout=60, json={
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "search", "arguments": {"dataset": "notes", "query": "parking", "mode": "sparse"}}})))
        call.start()
        deadline = time.monotonic() + 30
        while "the search started" not in log.read_text():
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
            time.sleep(0.05)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        stopped_in = time.monotonic() - sent
        call.join(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = log.read_text()
    assert code == 0 and stopped_in < mcp_module.STOP_SECONDS + 1, (code, stopped_in, lines)
    response = answer["r"]
    assert response.status_code in (200, 503), response.text
    events = [line[len("data:"):] for line in response.text.splitlines() if line.startswith("data:")]
    error = json.loads(events[-1] if events else response.text)
    assert error["id"] == 2 and error["error"]["data"]["code"] == "UNAVAILABLE", response.text
    assert error["error"]["message"].startswith("UNAVAILABLE: kx mcp is stopping")
    assert "Traceback" not in lines and "Exception in ASGI" not in lines and "gave up" not in lines, lines


# `kx` as its own process with Engine.ingest held up: an ingest that leaves at its next progress event once told
# to stop (as the real one does: `unless_stopping`), or, with KX_TEST_STUBBORN, one that never looks
_HELD_INGEST_KX = """
import os, sys, time
from kx_tui.cli.stopping import install_early
install_early()
from engine.embedded.engine import Engine
from engine.records import Progress
def held(self, name, docs, vectors=None, on_event=None, **kwargs):
    emit = self.unless_stopping(on_event)
    sys.stderr.write("the ingest started\\n"); sys.stderr.flush()
    for done in range(600):
        time.sleep(0.1)
        if not os.environ.get("KX_TEST_STUBBORN"):
            emit(Progress("embedding", done, 600))
    raise AssertionError("never told to stop")
Engine.ingest = held
from kx_tui.cli.root import main
main(sys.argv[1:])
"""


@pytest.mark.slow
@pytest.mark.parametrize("stubborn", [False, True])
def test_a_stdio_client_that_leaves_mid_ingest_does_not_keep_kx_mcp_alive(tmp_path: Path, stubborn: bool) -> None:
    """The client closes stdin (MCP's stdio shutdown) while an ingest_text runs: kx mcp exits 0 at once (the
    ingest leaves at its next progress event), or within its wait for work that does not stop; it lived on
    until the ingest ended (minutes of embedding for a long text)."""
    import os
    import subprocess
    import sys

    from .helpers import REPO

    env = {k: v for k, v in os.environ.items() if not k.startswith("KX_")}
    env.update({"KX_HOME": str(tmp_path / "home"), "KX_SERVE_EMBED_MODEL": "none", "PYTHONPATH": str(REPO),
                "KX_EMBED_MODEL": "none"})
    if stubborn:
        env["KX_TEST_STUBBORN"] = "1"
    log = tmp_path / "mcp.log"
    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", _HELD_INGEST_KX, "mcp", "--allow-ingest"], cwd=REPO, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for message in ({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "t", "version": "0"}}},
                        {"jsonrpc": "2.0", "method": "notifications/initialized"},
                        {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                         "params": {"name": "ingest_text", "arguments": {"dataset": "notes", "text": "a long book"}}}):
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 0
        deadline = time.monotonic() + 60
        while "the ingest started" not in log.read_text():
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
            time.sleep(0.05)
        left = time.monotonic()
        proc.stdin.close()
        code = proc.wait(timeout=40)
        gone_in = time.monotonic() - left
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = log.read_text()
    assert code == 0, (code, lines)
    assert gone_in < (mcp_module._LEAVE_SECONDS + 3 if stubborn else 3), (gone_in, lines)
    assert "Traceback" not in lines and "never told to stop" not in lines, lines
