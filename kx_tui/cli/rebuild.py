"""`kx datasets rebuild NAME --as NEW`: a new dataset from NAME's stored originals, under new settings."""

from __future__ import annotations

import json
import signal

import click

from engine.errors import KxError, Status

from .context import CONTEXT_SETTINGS, local_engine, parse_sets, settings_of
from .progress import PipelineProgress
from .stopping import GIVE_UP_SECONDS, Interrupted, StopSignals

_GIVE_UP_SECONDS = GIVE_UP_SECONDS  # after Ctrl-C / SIGTERM, leave even if no stopping point came by then


@click.command("rebuild", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.option("--as", "new", required=True, metavar="NEW", help="The new dataset's name (NAME stays as it is).")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="A setting for the new dataset, e.g. --set embed_model=default-int8 (repeatable).")
@click.option("--chunk-size", type=int, default=None, help="Passage length in characters for the new dataset.")
@click.option("--chunk-overlap", type=int, default=None, help="Characters shared by neighbouring passages.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON report for scripts.")
@click.pass_context
def rebuild(ctx: click.Context, name: str, new: str, sets: tuple[str, ...], chunk_size: int | None,
            chunk_overlap: int | None, as_json: bool) -> None:
    """Build dataset NEW from dataset NAME's stored original bytes under new settings.

    Every stored version of every document goes through the ordinary
    two-stage ingest of NEW, keeping names, source paths, versions and
    retirements; NAME is only read. Stopped part-way, run the same command
    again (or `kx datasets embed NEW` once only embedding is left).

    \b
    kx datasets rebuild handbook --as handbook-int8 --set embed_model=default-int8
    kx datasets rebuild handbook --as handbook-small --chunk-size 500 --chunk-overlap 100
    """
    from ..render import Console, print_ingest_summary

    overrides: dict[str, object] = dict(parse_sets(sets))
    for key, flag, value in (("chunk_size", "--chunk-size", chunk_size),
                             ("chunk_overlap", "--chunk-overlap", chunk_overlap)):
        if value is None:
            continue  # not given: a --set value for it (or the global settings) stands
        if key in overrides:  # two values for one setting on one command line: neither silently wins
            raise KxError(Status.INVALID_ARGUMENT,
                          f"{flag} {value} and --set {key}={overrides[key]} both set {key}; give it once")
        overrides[key] = value
    if settings_of(ctx).gateway:
        raise KxError(Status.FAILED_PRECONDITION, "kx datasets rebuild runs where the datasets live; drop --gateway")
    from engine import Engine

    engine = local_engine(ctx, **overrides)
    if not isinstance(engine, Engine):  # the Milvus backend refuses, saying why (engine/milvus/backend.py)
        try:
            engine.rebuild(name, new)
        finally:
            engine.close()
        return
    err = Console(stderr=True)
    resume = f"what was committed stays: run the same command again (or `kx datasets embed {new}`) to finish"
    try:
        with StopSignals(give_up_after=_GIVE_UP_SECONDS, last_words=f"error: CANCELLED: {resume}") as stop, \
                PipelineProgress(err) as progress:
            def on_event(event: object) -> None:
                from engine.records import DocumentResult, Notice, Progress

                if isinstance(event, Progress):
                    progress.update(event)
                elif isinstance(event, Notice):
                    progress.notice(event)
                elif isinstance(event, DocumentResult) and event.code and not as_json:
                    progress.print(f"refused {event.name}: {event.reason}")
                if stop.count:
                    raise Interrupted(stop.last or signal.SIGINT, f"stopped by {stop.name}; {resume}")

            report = engine.rebuild(name, new, on_event=on_event)
    finally:
        engine.close()
    if as_json:
        click.echo(json.dumps({**report.to_dict(), "source": name}, indent=2))
    else:
        print_ingest_summary(Console(), report)
