"""`kx datasets embed NAME`: finish a dataset's embedding backlog (stage 2 of its ingests), with progress."""

from __future__ import annotations

import json
import signal

import click

from .context import CONTEXT_SETTINGS, backend_of, settings_of
from .progress import PipelineProgress
from .stopping import GIVE_UP_SECONDS, Interrupted, StopSignals

_GIVE_UP_SECONDS = GIVE_UP_SECONDS  # after Ctrl-C / SIGTERM, leave even if no embedding batch ended by then


@click.command("embed", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.option("--json", "as_json", is_flag=True,
              help="Print the dataset afterwards as JSON (progress stays on stderr).")
@click.pass_context
def embed(ctx: click.Context, name: str, as_json: bool) -> None:
    """Embed the passages of dataset NAME that are committed but have no vectors yet.

    An ingest that was stopped (Ctrl-C, a kill, a reboot) leaves its passages
    keyword-searchable and the rest of the embedding to do; this finishes it.
    The next ingest, `kx datasets watch`, `kx serve` and the TUI also do it by
    themselves. Safe to interrupt and run again: nothing is embedded twice.
    """
    from engine.names import validate_name
    from engine.records import IngestEvent, Notice

    from ..render import Console  # notices may name documents: shown, not obeyed (render.terminal_safe)

    validate_name(name)
    backend = backend_of(ctx, settings_of(ctx))
    err = Console(stderr=True)
    resume = f"every vector committed so far is kept: run `kx datasets embed {name}` again to finish"
    # Ctrl-C / SIGTERM only count (kx_tui/cli/stopping.py): the embedding stops after the batch in hand.
    with StopSignals(give_up_after=_GIVE_UP_SECONDS, last_words=f"error: CANCELLED: {resume}") as stop, \
            PipelineProgress(err) as progress:
        def on_event(event: IngestEvent) -> None:
            if isinstance(event, Notice):
                progress.notice(event)
            else:
                progress.update(event)
            if stop.count:
                raise Interrupted(stop.last or signal.SIGINT, f"stopped by {stop.name}; {resume}")

        report = backend.embed(name, on_event=on_event)
    summary = report.dataset
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    elif summary.backlog:
        click.echo(f"{name}: {report.embedded:,} passages embedded, {summary.backlog:,} still waiting")
    else:
        click.echo(f"{name}: {report.embedded:,} passages embedded; all {summary.passages:,} passages are "
                   "searchable by dense and sparse")
