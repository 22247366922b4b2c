"""`kx mcp`: serve kx's tools to LLM clients over the Model Context Protocol (engine/server/mcp_server.py).

stdio by default (what Claude Desktop, Claude Code and most clients start);
`--http` serves streamable HTTP at /mcp with the same token, Host and Origin
rules as `kx serve`. Its own command rather than a route inside `kx serve`:
a desktop client starts it per session over stdio, it serves any backend
(`kx --gateway URL mcp` fronts a remote gateway), and the MCP SDK stays out
of the gateway's process. In stdio mode stdout is the protocol: everything
for a person goes to stderr.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import click

from engine.config import ENV
from engine.errors import KxError

from .context import CONTEXT_SETTINGS, backend_of, bind_socket, settings_of, show_host
from .stopping import (
    BACKSTOP_SECONDS,
    GIVE_UP_SECONDS,
    StopSignals,
    draining_server,
    exit_without_finalising,
    join_or_leave,
)

if TYPE_CHECKING:
    import socket

    import uvicorn
    from mcp.server.mcpserver import MCPServer

    from engine import Settings
    from engine.backend import Backend
    from engine.server.mcp_server import AnswerWhenStopping

DEFAULT_PORT = 50152
DRAIN_SECONDS = 5         # how long an HTTP stop waits for calls in flight (as `kx serve`)
STOP_SECONDS = GIVE_UP_SECONDS  # the most an HTTP stop takes, from the signal to the exit (the guard's bound)
_WARM_WAIT_SECONDS = 30   # how long leaving waits for the model's load to end (stdio: the client left)
_LEAVE_SECONDS = 10        # how long leaving waits for a call's work to stop (stdio: the client left)


@click.command("mcp", context_settings=CONTEXT_SETTINGS)
@click.option("--http", "use_http", is_flag=True, help="Serve streamable HTTP at /mcp instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="With --http: the address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
              help="With --http: the TCP port.")
@click.option("--allow-ingest", is_flag=True, help="Offer ingest_text (and ingest_file with --allow-path); "
                                                   "read-only without it.")
@click.option("--allow-path", "allow_paths", multiple=True, type=click.Path(path_type=Path), metavar="FOLDER",
              help="A folder ingest_file may read from (repeatable; symlinks are resolved before the check).")
@click.option("--quiet", "-q", is_flag=True, help="With --http: no line per request on stderr.")
@click.option("--log-json", is_flag=True, help="With --http: log each request as one JSON line.")
@click.pass_context
def mcp(ctx: click.Context, use_http: bool, host: str, port: int, allow_ingest: bool, allow_paths: tuple[Path, ...],
        quiet: bool, log_json: bool) -> None:
    """Serve kx to LLM clients over MCP: list_datasets, search, read_document, list_documents.

    Add it to Claude Code with `claude mcp add kx -- kx mcp`. Hits come with
    citations ([document p. 6, chunk 3/12]). --allow-ingest adds ingest_text;
    --allow-path FOLDER adds ingest_file, confined to FOLDER. With --http
    every request needs 'Authorization: Bearer TOKEN' ($KX_HOME/gateway.token).
    """
    from engine.server.mcp_policy import Policy

    settings = settings_of(ctx)
    policy = Policy.of(allow_ingest, allow_paths, settings.max_document_bytes,  # before anything starts
                       home=settings.home, datasets=settings.datasets_dir)
    sock = bind_socket(host, port) if use_http else None
    backend = backend_of(ctx, settings)
    # the model loads while the MCP SDK imports (seconds each on a small machine), so the first search
    # finds it ready; the engine loads it once even if that search comes first
    warming = _warm_up(backend)
    stop: StopSignals | None = None
    try:
        from engine.server.mcp_server import build_server

        server = build_server(backend, policy)
        if sock is None:
            server.run("stdio")  # until the client closes stdin
            _leave_calls(_stopper(backend))
        else:
            stop = _serve_http(server, backend, settings, sock, host,
                               None if quiet else ("json" if log_json else "text"))
    finally:
        backend.close()
        if sock is not None:
            sock.close()
    if stop is not None and stop.first_at is not None:
        # stopped by a signal: the stop is bounded as `kx serve`'s is. The warm-up gets what is left of the
        # bound; a tool call's work left running past the drain (its answer already given, its commits whole)
        # is not waited for, since finalising the interpreter would wait for its thread
        warming.join(max(0.5, stop.first_at + STOP_SECONDS - 1.0 - time.monotonic()))
        if any(t.is_alive() and t is not threading.main_thread() and not t.name.startswith("kx-stop-guard")
               for t in threading.enumerate()):
            exit_without_finalising(0)
    # a client that leaves while the model still loads: let the load end (leaving the interpreter while a
    # thread is inside ONNX Runtime aborts the process); past the wait, leave without finalising
    join_or_leave(warming, _WARM_WAIT_SECONDS)


def _leave_calls(request_stop: Callable[[], None]) -> None:
    """The stdio client has left: the SDK cancelled its calls in flight, but their work runs on in worker
    threads the interpreter would wait for at exit. An ingest among them (an ingest_text of a book: minutes
    of embedding) kept `kx mcp` alive that long after its client had gone. Told to stop, it leaves at its next
    progress event (what it committed stays; the rest is embedded by the next writer); past the wait, the
    process leaves without finalising (every commit is whole)."""
    request_stop()
    deadline = time.monotonic() + _LEAVE_SECONDS
    while time.monotonic() < deadline:
        if not _calls_running():
            return
        time.sleep(0.05)
    exit_without_finalising(0)


def _calls_running() -> bool:
    """Whether a tool call's work still runs on a worker thread (not the model's warm-up, a daemon)."""
    return any(t.is_alive() and not t.daemon and t is not threading.main_thread() for t in threading.enumerate())


def _warm_up(backend: Backend) -> threading.Thread:
    """Load the embedding model beside the server; a failure is reported by the first call that needs it."""

    def warm() -> None:
        try:
            backend.warm_up(notify=lambda line: click.echo(line, err=True))
        except KxError as exc:
            click.echo(f"embedding model not ready: {exc.message}", err=True)
        except Exception as exc:  # noqa: BLE001 - a warm-up failure must not take the server down
            click.echo(f"embedding model not ready: {type(exc).__name__}: {exc}", err=True)

    thread = threading.Thread(target=warm, name="kx-mcp-warm-up", daemon=True)
    thread.start()
    return thread


def _serve_http(server: MCPServer, backend: Backend, settings: Settings, sock: socket.socket, host: str,
                log: str | None) -> StopSignals:
    """Serve until stopped; the StopSignals block that counted the stop, if one came."""
    import uvicorn

    from engine.server.mcp_server import http_app
    from engine.server.request_log import RequestLog
    from engine.server.security import ensure_token, token_path

    token = ensure_token(settings.home)
    guarded = http_app(server, token, max_bytes=settings.max_request_bytes, bind_host=host,
                       allowed_hosts=settings.gateway_allowed_hosts, allowed_origins=settings.gateway_allowed_origins)
    app: Any = guarded
    if log is not None:  # outermost: requests the guard refuses are logged too
        app = RequestLog(app, json_lines=log == "json")
    click.echo(f"kx mcp on http://{show_host(host)}:{sock.getsockname()[1]}/mcp ({ENV.home} {settings.home})")
    click.echo(f"token: {token_path(settings.home)} (send 'Authorization: Bearer <token>')")
    click.echo("Ctrl-C or SIGTERM stops it after the calls in flight.")
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=DRAIN_SECONDS + BACKSTOP_SECONDS)
    # as in `kx serve`: the handlers only count a stop, which sets uvicorn's own flag; its re-raise of the
    # signal once drained lands on them too, so the process exits 0 (kx_tui/cli/stopping.py)
    request_stop = _stopper(backend)
    with StopSignals(give_up_after=STOP_SECONDS, exit_code=0,
                     last_words="kx mcp: calls still in flight after the drain; leaving now (what was committed "
                                "stays)") as stop:
        uv = mcp_http_server(config, guarded, stop, request_stop)

        def also_flag() -> None:  # from the signal handler: flags only
            uv.should_exit = True
            request_stop()

        stop.also_flag = also_flag
        if stop.count:  # asked to stop while starting: start, then stop at once
            also_flag()
        uv.run(sockets=[sock])
    return stop


def mcp_http_server(config: uvicorn.Config, app: AnswerWhenStopping, stop: StopSignals,
                    request_stop: Callable[[], None]) -> uvicorn.Server:
    """uvicorn's Server for `kx mcp --http`: calls in flight get DRAIN_SECONDS to answer, then those still
    running answer UNAVAILABLE (`AnswerWhenStopping`); a client's listening stream ends once no call runs.

    sse_starlette (under the MCP SDK) would end every event stream the moment uvicorn is told to stop
    (its process-wide patch of uvicorn's handle_exit): a tool call then got an empty 200 stream, no answer
    at all, however soon it would have finished. kx's drain decides instead, so its switch is turned off
    here (this process serves one server).
    """
    from sse_starlette.sse import AppStatus

    AppStatus.enable_automatic_graceful_drain = False
    # The SDK's session, shut down after the drain, tries to answer each call still running "Connection closed"
    # and, a second later, warns that it "gave up": those calls were already answered UNAVAILABLE on their own
    # streams (AnswerWhenStopping), so the line only misleads whoever reads the log.
    logging.getLogger("mcp.shared.jsonrpc_dispatcher").addFilter(_ANSWERED_ALREADY)
    return draining_server(config, stop, request_stop, DRAIN_SECONDS, listening=lambda: app.listening)


class _AnsweredAlready(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno == logging.WARNING and record.getMessage().startswith("shutdown error response")
                    and record.getMessage().endswith("gave up: transport write blocked"))


_ANSWERED_ALREADY = _AnsweredAlready()


def _stopper(backend: Backend) -> Callable[[], None]:
    """What a stop tells the backend: an in-process engine's ingest in flight (a tool's) leaves at its next
    safe point; a gateway's client has nothing to tell (the gateway stops its own work)."""
    from engine.in_process import InProcessBackend

    return backend.request_stop if isinstance(backend, InProcessBackend) else lambda: None
