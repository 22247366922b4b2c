"""A stop while a request is still running: the request answers 503 UNAVAILABLE as JSON, and the log holds no
traceback (it was uvicorn's plain-text 500 and "Exception in ASGI application ... CancelledError").

In-process: the real gateway app under uvicorn in a thread, over an engine whose query waits until the test
lets it go (a slow query without a slow input).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from types import SimpleNamespace
from typing import Any, Iterator

import httpx
import pytest
import uvicorn

import kx_tui.cli.serve as serve_module
from engine import Engine
from engine.server.gateway import create_app
from engine.text.inputs import from_text
from kx_tui.cli.stopping import BACKSTOP_SECONDS

from .helpers import start_server

TOKEN = "t" * 43


@pytest.fixture
def slow_engine(hash_engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Engine, threading.Event]]:
    hash_engine.ingest("notes", [from_text("The parking garage opens at seven.")])
    entered, release = threading.Event(), threading.Event()

    def slow_query(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(20)   # as a long query would: the worker thread is busy past the drain
        raise AssertionError("the slow query was let go")

    monkeypatch.setattr(hash_engine, "query", slow_query)
    yield hash_engine, entered
    release.set()


def _config(engine: Engine, graceful: float) -> uvicorn.Config:
    # log_config None: uvicorn's loggers reach the root logger, where caplog reads them
    return uvicorn.Config(create_app(engine, TOKEN), log_config=None, access_log=False, lifespan="off",
                          timeout_graceful_shutdown=graceful)  # type: ignore[arg-type]


@pytest.mark.parametrize("server_kind", ["kx serve", "plain uvicorn"])
def test_a_request_running_when_the_server_stops_answers_503_json_without_a_traceback(
        slow_engine: tuple[Engine, threading.Event], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture, server_kind: str) -> None:
    engine, entered = slow_engine
    if server_kind == "kx serve":   # kx serve's own server: it ends the drain itself, quietly
        monkeypatch.setattr(serve_module, "DRAIN_SECONDS", 0.5)
        stop = SimpleNamespace(count=0, last=None, first_at=None)
        server = serve_module.gateway_server(_config(engine, 0.5 + BACKSTOP_SECONDS), engine,
                                             stop)  # type: ignore[arg-type]
    else:   # any uvicorn: its own timeout cancels the request; the gateway still answers it
        server = uvicorn.Server(_config(engine, 0.5))
    caplog.set_level(logging.INFO)
    thread, url, _sock = start_server(server)
    answer: dict[str, httpx.Response] = {}
    client = threading.Thread(target=lambda: answer.update(r=httpx.post(
        f"{url}/v1/datasets/notes/query", json={"text": "parking"}, headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=30)))
    client.start()
    assert entered.wait(10), "the query did not start"
    started = time.monotonic()
    if server_kind == "kx serve":
        server.handle_exit(signal.SIGTERM, None)   # what SIGTERM runs (flags only)
        assert engine.stop_requested and stop.count == 1
    else:
        server.should_exit = True
    client.join(15)
    thread.join(15)
    response = answer["r"]
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/json"
    assert response.json()["code"] == "UNAVAILABLE" and "kx is stopping" in response.json()["message"]
    assert time.monotonic() - started < 5
    assert not thread.is_alive()
    logged = "\n".join(f"{r.levelname} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "Exception in ASGI application" not in logged and not any(r.exc_info for r in caplog.records), logged
    if server_kind == "kx serve":   # not even uvicorn's "Cancel 1 running task(s)" line
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR], logged


def test_a_request_that_answers_within_the_drain_is_answered(hash_engine: Engine,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    hash_engine.ingest("notes", [from_text("The parking garage opens at seven.")])
    monkeypatch.setattr(serve_module, "DRAIN_SECONDS", 5)
    stop = SimpleNamespace(count=0, last=None, first_at=None)
    real_query = hash_engine.query
    entered = threading.Event()

    def a_little_slow(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        time.sleep(0.5)
        return real_query(*args, **kwargs)

    monkeypatch.setattr(hash_engine, "query", a_little_slow)
    server = serve_module.gateway_server(_config(hash_engine, 6), hash_engine, stop)  # type: ignore[arg-type]
    thread, url, _sock = start_server(server)
    answer: dict[str, httpx.Response] = {}
    client = threading.Thread(target=lambda: answer.update(r=httpx.post(
        f"{url}/v1/datasets/notes/query", json={"text": "parking", "mode": "sparse"},
        headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)))
    client.start()
    assert entered.wait(10)
    server.handle_exit(signal.SIGTERM, None)
    client.join(15)
    thread.join(15)
    assert answer["r"].status_code == 200 and answer["r"].json()["hits"]
