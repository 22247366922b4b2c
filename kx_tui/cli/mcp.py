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

import threading
from pathlib import Path
from typing import TYPE_CHECKING

import click

from engine.errors import KxError

from .context import CONTEXT_SETTINGS, backend_of, bind_socket, settings_of, show_host
from .stopping import StopSignals, join_or_leave

if TYPE_CHECKING:
    import socket

    from mcp.server.mcpserver import MCPServer

    from engine import Settings
    from engine.backend import Backend

DEFAULT_PORT = 50152
_DRAIN_SECONDS = 10       # how long an HTTP stop waits for calls in flight
_WARM_WAIT_SECONDS = 30   # how long leaving waits for the model's load to end


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
    policy = Policy.of(allow_ingest, allow_paths, settings.max_document_bytes)  # before anything starts
    sock = bind_socket(host, port) if use_http else None
    backend = backend_of(ctx, settings)
    # the model loads while the MCP SDK imports (seconds each on a small machine), so the first search
    # finds it ready; the engine loads it once even if that search comes first
    warming = _warm_up(backend)
    try:
        from engine.server.mcp_server import build_server

        server = build_server(backend, policy)
        if sock is None:
            server.run("stdio")  # until the client closes stdin
        else:
            _serve_http(server, settings, sock, host, None if quiet else ("json" if log_json else "text"))
    finally:
        backend.close()
        if sock is not None:
            sock.close()
    # a client that leaves while the model still loads: let the load end (leaving the interpreter while a
    # thread is inside ONNX Runtime aborts the process); past the wait, leave without finalising
    join_or_leave(warming, _WARM_WAIT_SECONDS)


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


def _serve_http(server: MCPServer, settings: Settings, sock: socket.socket, host: str, log: str | None) -> None:
    import uvicorn

    from engine.server.mcp_server import http_app
    from engine.server.request_log import RequestLog
    from engine.server.security import ensure_token, token_path

    token = ensure_token(settings.home)
    app = http_app(server, token, max_bytes=settings.max_request_bytes, bind_host=host,
                   allowed_hosts=settings.gateway_allowed_hosts, allowed_origins=settings.gateway_allowed_origins)
    if log is not None:  # outermost: requests the guard refuses are logged too
        app = RequestLog(app, json_lines=log == "json")
    click.echo(f"kx mcp on http://{show_host(host)}:{sock.getsockname()[1]}/mcp (KX_HOME {settings.home})")
    click.echo(f"token: {token_path(settings.home)} (send 'Authorization: Bearer <token>')")
    click.echo("Ctrl-C or SIGTERM stops it.")
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                       timeout_graceful_shutdown=_DRAIN_SECONDS))
    # as in `kx serve`: the handlers only count a stop, which sets uvicorn's own flag; its re-raise of the
    # signal once drained lands on them too, so the process exits 0 (kx_tui/cli/stopping.py)
    with StopSignals(give_up_after=_DRAIN_SECONDS + 5, exit_code=0,
                     last_words="kx mcp: requests still in flight after the drain; leaving now") as stop:
        stop.also_flag = lambda: setattr(uv, "should_exit", True)
        uv.should_exit = bool(stop.count)
        uv.run(sockets=[sock])
