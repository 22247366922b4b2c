"""What every `kx` command shares: click's context settings and the settings/backend behind a command.

The root group (root.py) stores the global flags in `ctx.obj`; each command
module imports these helpers from here and is registered by root.py, so no
command module imports root.py or another command module.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

import click

from engine.errors import KxError, Status

if TYPE_CHECKING:  # the engine is imported when a command runs, not when `kx --help` is drawn
    import socket

    from engine import Engine, Settings
    from engine.backend import Backend
    from engine.milvus.backend import MilvusBackend

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class FiniteFloatRange(click.FloatRange):
    """click's FloatRange, refusing NaN and infinities too: click's range check lets NaN through (every
    comparison with it is false), and `--settle nan` then queued files forever."""

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):  # before the range, whose words ("not in the range") miss the point
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(number, param, ctx)


def parse_sets(pairs: Sequence[str]) -> dict[str, str]:
    """`--set NAME=VALUE` pairs as setting flags (dashes read as underscores)."""
    flags: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise KxError(Status.INVALID_ARGUMENT,
                          f"--set expects NAME=VALUE, got {pair!r} (e.g. --set chunk_size=800)")
        flags[key.strip().replace("-", "_")] = value
    return flags


def settings_of(ctx: click.Context, **overrides: Any) -> Settings:
    """The settings for this command: the global flags, then this command's own (None means "not given")."""
    from engine import load_settings

    flags = dict(ctx.obj["flags"])
    flags.update({k: v for k, v in overrides.items() if v is not None})
    return load_settings(flags)


def local_engine(ctx: click.Context, **overrides: Any) -> Engine | MilvusBackend:
    """The in-process backend (Engine, or MilvusBackend with KX_BACKEND=milvus), for commands that only run
    here (eval, watch, serve)."""
    from engine.open_backend import open_backend

    return open_backend(settings_of(ctx, **overrides))


def backend_of(ctx: click.Context, settings: Settings) -> Backend:
    """The Backend for this invocation: in-process (Engine or MilvusBackend), or KxClient when a gateway is set.

    The token: --token / KX_GATEWAY_TOKEN, else $KX_HOME/gateway.token when
    the gateway runs on this machine under the same home.
    """
    if not settings.gateway:
        from engine.open_backend import open_backend  # the embedded engine or Milvus (KX_BACKEND)

        return open_backend(settings, on_notice=lambda line: click.echo(line, err=True))  # e.g. a first-use export
    from engine.server.client import KxClient, read_token

    token = ctx.obj.get("token") or read_token(settings.home)
    return KxClient(settings.gateway, token=token)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, bound before the server starts: a taken port is one error line
    (UNAVAILABLE), not a uvicorn traceback. `kx serve` and `kx mcp --http` use it."""
    import socket  # here: only the servers bind, and every command imports this module

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise KxError(Status.INVALID_ARGUMENT, f"--host {host} is not an address here ({exc.strerror})") from None
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        import errno

        if exc.errno == errno.EADDRNOTAVAIL:  # the address, not the port: "pick another --port" misled
            raise KxError(Status.INVALID_ARGUMENT, f"cannot listen on {host}:{port} ({exc.strerror}): {host} is not "
                                                   "an address of this machine; give one of its own to --host "
                                                   "(127.0.0.1 for this machine only)") from None
        raise KxError(Status.UNAVAILABLE, f"cannot listen on {host}:{port} ({exc.strerror}); "
                                          "pick another --port or stop what holds it") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def show_host(host: str) -> str:
    """An address as it goes in a URL ([::1] for IPv6)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
