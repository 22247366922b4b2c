"""`kx datasets check NAME [--repair] [--json]`: the full integrity check a DATA_LOSS message points to."""

from __future__ import annotations

import json
import sys

import click

from engine.config import ENV
from engine.errors import KxError, Status

from .context import CONTEXT_SETTINGS, settings_of

_SHOWN = 20  # findings printed one per line; the rest are counted (--json lists them all)


@click.command("check", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.option("--repair", is_flag=True,
              help="Set damaged rows aside (quarantine-*.jsonl in the dataset's folder), clear damaged vectors "
                   "for re-embedding, and rebuild both indexes from the catalogue.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON report for scripts.")
@click.pass_context
def check(ctx: click.Context, name: str, repair: bool, as_json: bool) -> None:
    """Check every row of dataset NAME's catalogue, and its index files, for damage.

    SQLite's own integrity check; each document's and passage's ref, text and
    vector; and whether the dense and keyword indexes describe this
    catalogue. Exit 0 when it is healthy (or was repaired), 12 (DATA_LOSS)
    when damage was found and not repaired. With --repair, every row that was
    set aside is reported, with the documents that lost passages.
    """
    from engine.embedded.integrity import check_dataset
    from engine.names import validate_name

    validate_name(name)
    settings = settings_of(ctx)
    if settings.gateway:
        raise KxError(Status.FAILED_PRECONDITION, "kx datasets check reads the dataset's files where they live; "
                                                  "run it on the gateway's machine, without --gateway")
    if settings.backend != "embedded":
        raise KxError(Status.FAILED_PRECONDITION, "kx datasets check reads kx's own catalogue files; a Milvus "
                                                  f"backend has its own checks ({ENV.backend}=embedded to use this)")
    report = check_dataset(settings, name, repair=repair)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        _print(report)
    if not report.healthy and not report.repaired:
        sys.exit(Status.DATA_LOSS.exit_code)


def _print(report) -> None:
    state = "healthy" if report.healthy else ("repaired" if report.repaired else "DAMAGED")
    click.echo(f"dataset '{report.dataset}': {state} ({report.documents} document rows, {report.passages} passage "
               f"rows; {report.catalogue})")
    if report.sqlite_check != ["ok"]:
        click.echo(f"  SQLite's integrity check: {len(report.sqlite_check)} problem(s), first: "
                   f"{report.sqlite_check[0]}")
    for finding in report.findings[:_SHOWN]:
        click.echo(f"  {finding.problem}")
    if len(report.findings) > _SHOWN:
        click.echo(f"  ... and {len(report.findings) - _SHOWN} more (--json lists them all)")
    for problem in report.indexes:
        click.echo(f"  {problem}")
    if report.unreadable:
        click.echo(f"  {report.unreadable}")
    if report.repaired:
        set_aside = sum(len(v) for v in report.lost_passages.values())
        others = sum(1 for f in report.findings if not f.vector_only and f.table != "passages")
        click.echo(f"repair: {set_aside} passage row(s) and {others} other row(s) set aside"
                   + (f" into {report.quarantine_file}" if report.quarantine_file else ""))
        for doc, chunks in sorted(report.lost_passages.items()):
            click.echo(f"  document {doc[:12]}... lost passage(s) {', '.join(map(str, sorted(chunks)))}")
        if report.re_embed:
            click.echo(f"  {report.re_embed} damaged vector(s) cleared: run `kx datasets embed {report.dataset}` "
                       "to embed those passages again from their text")
        if report.after and report.after != ["ok"]:
            click.echo(f"  SQLite's check still reports: {report.after[0]}")
        click.echo("  both indexes were rebuilt from the catalogue")
    elif not report.healthy:
        click.echo(f"run `kx datasets check {report.dataset} --repair` to set the damage aside and rebuild the indexes")
