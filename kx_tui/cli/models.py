"""`kx models prepare`: export and check the embedding model's ONNX graph now, not at first use.

The export takes seconds once (it imports torch); doing it ahead of time keeps
the first ingest, the TUI's first query and a script's first `kx datasets
query` fast. It prints one line per step and then the runtime each model will
use, and why.
"""

from __future__ import annotations

import json

import click

from engine.config import ENV
from engine.errors import KxError, Status

from .context import CONTEXT_SETTINGS


@click.group("models", context_settings=CONTEXT_SETTINGS)
def models() -> None:
    """Prepare the embedding model (see `kx info` for the one in use)."""


@models.command("prepare", context_settings=CONTEXT_SETTINGS)
@click.option("--model", "names", multiple=True, metavar="MODEL",
              help=f"A {ENV.embed_model} value to prepare, e.g. default-int8 (repeatable; default: the "
                   "configured model).")
@click.option("--retry", is_flag=True, help="Try the export again even if an earlier one was refused.")
@click.option("--json", "as_json", is_flag=True, help="Print the runtime of each model as JSON.")
@click.pass_context
def prepare(ctx: click.Context, names: tuple[str, ...], retry: bool, as_json: bool) -> None:
    """Export each model to ONNX (once), check it against torch, and say which runtime it will use."""
    from engine import load_settings
    from engine.embedding.host import ModelHost
    from engine.embedding.onnx_cache import clear_failure, model_folder

    settings = load_settings(ctx.obj["flags"])
    if settings.gateway:
        raise KxError(Status.FAILED_PRECONDITION, "kx models prepare works on this machine's model cache; "
                                                  "run it where `kx serve` runs, or drop --gateway")
    say = (lambda line: None) if as_json else (lambda line: click.echo(line, err=True))
    out = []
    for name in names or (settings.embed_model,):
        host = ModelHost(load_settings({**ctx.obj["flags"], "embed_model": name}))
        card = host.card()
        if card is None:
            raise KxError(Status.INVALID_ARGUMENT, f"model {name!r} is 'none': there is nothing to prepare")
        if retry:
            clear_failure(model_folder(host.settings, card))
        status = host.prepare(say)
        assert status is not None  # prepare answers None only without a model, refused just above
        out.append({"model": name, "model_id": card.model_id, **status})
        if not as_json:
            click.echo(f"{card.model_id}: {status['runtime']}: {status['reason']}")
    if as_json:
        click.echo(json.dumps(out, indent=2))
