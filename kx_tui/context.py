"""What every `kx` command module shares: click's context settings and how a command gets its engine.

Command modules import this, never kx_tui/cli.py (which imports them to
register them), so the CLI has no import cycle. Nothing heavy is imported
here: the engine is loaded inside the functions, when a command runs.
"""

from __future__ import annotations

from typing import Any

import click

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def engine_from(ctx: click.Context, **overrides: Any):
    """The in-process backend (KX_BACKEND), with settings resolved once per command (eval and watch use it)."""
    from engine.backends import open_backend

    return open_backend(settings_from(ctx, **overrides))


def settings_from(ctx: click.Context, **overrides: Any):
    from engine import load_settings

    flags = dict(ctx.obj["flags"])
    flags.update({k: v for k, v in overrides.items() if v is not None})
    return load_settings(flags)


def backend_from(ctx: click.Context, settings: Any):
    """The Backend for this invocation: in-process (Engine or MilvusBackend), or KxClient when a gateway is set.

    The token: --token / KX_GATEWAY_TOKEN, else $KX_HOME/gateway.token when
    the gateway runs on this machine under the same home.
    """
    if not settings.gateway:
        from engine.backends import open_backend  # the embedded engine or Milvus (KX_BACKEND)

        return open_backend(settings, on_notice=lambda line: click.echo(line, err=True))  # e.g. a first-use export
    from engine.client import KxClient, read_token

    token = ctx.obj.get("token") or read_token(settings.home)
    return KxClient(settings.gateway, token=token)
