"""`kx serve`: run the local gateway (engine/server/gateway.py) until Ctrl-C or SIGTERM.

This module only resolves the options, makes or reads the token, binds the
socket (so a taken port is one error line, not a uvicorn traceback) and runs
uvicorn; SIGTERM lets in-flight requests finish and exits 0.

A stop is bounded (STOP_SECONDS) whatever the gateway is doing: the engine's
`stop_requested` makes an ingest or a backlog embedding in flight (a request,
or the start-up's resumption) leave at its next progress event, requests get
DRAIN_SECONDS to answer (one still running then answers 503 UNAVAILABLE,
`gateway_server`), a model warm-up still inside ONNX Runtime is not
waited for, and a guard ends the process (exit 0) if anything still holds it
up. Every catalogue commit is one SQLite transaction, so leaving mid-work is
no worse than the kill the crash campaign survives (RELIABILITY.md).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import TYPE_CHECKING

import click

from engine.config import ENV
from engine.errors import KxError, Status

from .context import CONTEXT_SETTINGS, bind_socket, settings_of, show_host
from .stopping import BACKSTOP_SECONDS, GIVE_UP_SECONDS, StopSignals, draining_server, exit_without_finalising

if TYPE_CHECKING:  # imported when the server starts, not when `kx --help` is drawn
    import uvicorn
    from fastapi import FastAPI

    from engine.embedded.engine import Engine
    from engine.milvus.backend import MilvusBackend

DEFAULT_PORT = 50151
DRAIN_SECONDS = 5   # how long a stop waits for requests in flight to answer (uvicorn takes whole seconds)
STOP_SECONDS = GIVE_UP_SECONDS  # the most a stop takes, from the signal to the exit (the guard's bound)
_LAST_WAIT_SECONDS = 0.5  # after the drain: the least the warm-up gets to reach its stopping point


@click.command("serve", context_settings=CONTEXT_SETTINGS)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but loopback is reachable from other machines: "
                   "the token then guards every request.")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
              help="TCP port to listen on.")
@click.option("--dev-allow-local", is_flag=True,
              help="Let clients on this machine in without the token (development only; loopback hosts only).")
@click.option("--quiet", "-q", is_flag=True, help="No line per request on stderr.")
@click.option("--log-json", is_flag=True, help="Log each request as one JSON object per line.")
@click.pass_context
def serve(ctx: click.Context, host: str, port: int, dev_allow_local: bool, quiet: bool, log_json: bool) -> None:
    """Serve the engine over HTTP (JSON API under /v1, description at /openapi.json).

    Every request but /v1/health needs 'Authorization: Bearer TOKEN'; the
    token is made at first start and kept in $KX_HOME/gateway.token (mode
    600). Point the CLI at it with `kx --gateway http://HOST:PORT ...`.

    Each request is logged on stderr as one line (time, method, path,
    status, ms, client; never the token, the query string or a body):
    --log-json for JSON lines, --quiet for none.
    """
    from engine.open_backend import open_backend
    from engine.server.security import ensure_token, is_loopback, token_path

    if dev_allow_local and not is_loopback(host):
        raise KxError(Status.FAILED_PRECONDITION,
                      f"--dev-allow-local admits clients without a token, so it serves loopback only, not {host}; "
                      "drop --dev-allow-local (clients then need the token) or use --host 127.0.0.1")
    settings = settings_of(ctx)
    token = ensure_token(settings.home)
    sock = bind_socket(host, port)
    limit_malloc_arenas()
    # A stop asked for while the engine opens is kept (the handler only counts) and honoured once
    # uvicorn starts; the guard bounds the whole stop, draining included (kx_tui/cli/stopping.py).
    with StopSignals(give_up_after=STOP_SECONDS, exit_code=0,
                     last_words="kx serve: work still in flight after the drain; leaving now (what was "
                                "committed stays; an unfinished embedding resumes at the next start)") as stop:
        engine = open_backend(settings, on_notice=lambda line: click.echo(line, err=True))  # a first-use export
        warming: threading.Thread | None = None
        try:
            bound = sock.getsockname()[1]
            click.echo(f"kx gateway on http://{show_host(host)}:{bound} ({ENV.home} {settings.home})")
            click.echo(f"token: {token_path(settings.home)} (send 'Authorization: Bearer <token>')")
            if dev_allow_local:
                click.echo("--dev-allow-local: clients on this machine need no token")
            click.echo("Ctrl-C or SIGTERM stops it after the requests in flight.")
            warming = _warm_up(engine)
            _run(engine, token, settings.max_request_bytes, dev_allow_local, sock, host, stop,
                 None if quiet else ("json" if log_json else "text"))
        finally:
            engine.request_stop()  # also when uvicorn ended on its own (a bind error): the warm-up must end
            engine.close()
            sock.close()
        # The warm-up and any request's work left past the drain stop at their next embedding batch, which on
        # a loaded machine can be seconds away; a model still loading (a first-use export) cannot be
        # interrupted at all. Their work in hand is uncommitted, so it is waited for only as long as the
        # stop's bound allows; then, since exiting the interpreter would wait for such threads, or abort (-6)
        # with one inside ONNX Runtime's C++, the process leaves without finalising (every commit is whole
        # by then; the backlog resumes at the next start).
        if warming is not None:  # what is left of the stop's bound, less a second for the exit itself
            since = stop.first_at if stop.first_at is not None else time.monotonic()
            warming.join(max(_LAST_WAIT_SECONDS, since + STOP_SECONDS - 1.0 - time.monotonic()))
        if any(t.is_alive() and t is not threading.main_thread() and not t.name.startswith("kx-stop-guard")
               for t in threading.enumerate()):
            exit_without_finalising(0)


def _warm_up(engine: Engine | MilvusBackend) -> threading.Thread:
    """Load the model beside the server, so the first query does not pay for it (a first use exports it)."""

    def warm() -> None:
        try:
            engine.prepare_model(lambda line: click.echo(line, err=True))
        except KxError as exc:  # the first request that needs the model reports it properly
            click.echo(f"embedding model not ready: {exc.message}", err=True)
            return
        if not engine.stop_requested:
            _resume_backlogs(engine)

    thread = threading.Thread(target=warm, name="kx-warm-up", daemon=True)
    thread.start()
    return thread


def _resume_backlogs(engine: Engine | MilvusBackend) -> None:
    """Finish every dataset's unfinished embedding (an ingest stopped in its second stage), one at a time."""
    try:
        waiting = [d for d in engine.list_datasets() if d.backlog]
    except KxError:
        return
    for dataset in waiting:
        click.echo(f"{dataset.name}: embedding the {dataset.backlog:,} passages an earlier ingest left "
                   "(queries meanwhile say how much dense covers)", err=True)
        if engine.stop_requested:
            return
        try:
            report = engine.embed(dataset.name)
        except KxError as exc:
            click.echo(f"{dataset.name}: the embedding did not finish: {exc.message}", err=True)
            continue
        click.echo(f"{dataset.name}: {report.embedded:,} passages embedded", err=True)


def _run(engine: Engine | MilvusBackend, token: str, max_bytes: int, allow_local: bool, sock: socket.socket, host: str,
         stop: StopSignals, log: str | None = None) -> None:
    """Serve until stopped; `log` "text" or "json" writes a line per request on stderr, None none."""
    import uvicorn

    from engine.server.gateway import create_app
    from engine.server.http_limits import guarded_protocol
    from engine.server.request_log import RequestLog

    app: FastAPI | RequestLog = create_app(engine, token, allow_local=allow_local, max_request_bytes=max_bytes,
                                           bind_host=host)
    if log is not None:  # outermost: requests the guard refuses are logged too
        app = RequestLog(app, json_lines=log == "json")
    # headers must arrive whole within 10 s, and one address holds at most 64 connections (engine/server/http_limits.py)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=DRAIN_SECONDS + BACKSTOP_SECONDS, http=guarded_protocol())
    server = gateway_server(config, engine, stop)
    # uvicorn installs its own flag-setting handlers while it runs. Before they are in (and after),
    # ours count the signal and set the same flags, so a stop in that window is not lost; uvicorn's
    # re-raise of the signal once it has drained lands on ours too, and the process exits 0.
    def also_flag() -> None:
        server.should_exit = True
        engine.request_stop()

    stop.also_flag = also_flag
    if stop.count:  # asked to stop while opening: start, then stop at once
        server.should_exit = True
        engine.request_stop()
    server.run(sockets=[sock])


def gateway_server(config: uvicorn.Config, engine: Engine | MilvusBackend, stop: StopSignals) -> uvicorn.Server:
    """uvicorn's Server for `kx serve`: a stop signal also stops the engine's work, and the drain ends quietly.

    After DRAIN_SECONDS the requests still running are cancelled (`draining_server`), which the gateway answers
    503 UNAVAILABLE as JSON (engine/server/gateway.py).
    """
    return draining_server(config, stop, engine.request_stop, DRAIN_SECONDS)


MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # glibc's mallopt parameter number


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas for this process, before the server's threads start; True if it was set.

    glibc gives each thread that contends for memory an arena of its own (up
    to 8 per core) and rarely hands their free pages back. Under the load
    benchmark (32 clients, every 8th request an ingest that reopens the
    readers) that grew the gateway's RSS 14 % in 2 minutes while queries
    alone grew it 0.1 %; capped at two arenas the same load grew it 2.8 %
    (MALLOC_ARENA_MAX=2) and 3.6–8.9 % (this call) at the same throughput
    (RELIABILITY.md). A MALLOC_ARENA_MAX the operator set wins; elsewhere
    than glibc this does nothing.
    """
    import ctypes
    import ctypes.util

    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        mallopt = getattr(libc, "mallopt", None)
    except OSError:
        return False
    return bool(mallopt is not None and mallopt(_M_ARENA_MAX, arenas) == 1)
