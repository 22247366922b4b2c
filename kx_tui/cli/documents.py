"""`kx datasets documents NAME`: what a dataset holds, one line per document, paged.

Works in-process and through a gateway (`--gateway`); `--json` prints the
page with its offset, limit and the dataset's total, as the gateway's
`GET /v1/datasets/NAME/documents` answers it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from engine.records import DocumentStatus

from .context import CONTEXT_SETTINGS, backend_of, settings_of

if TYPE_CHECKING:
    from engine.backend import Backend
    from engine.records import IngestReport

PAGE = 100


def added_notes(backend: Backend, name: str, report: IngestReport) -> dict[str, list[str]]:
    """ref -> what the extractor noted (a page without a text layer, an HTML page without its body) for each
    document this ingest added. The added documents are the dataset's last ones, read back a page at a time
    from the listing of every stored version: `report.documents` counts those, and the listing of current
    ones is shorter once a file was edited or retired, so it would end before the added documents."""
    refs = {r.ref for r in report.results if r.status == DocumentStatus.ADDED and r.ref}
    notes: dict[str, list[str]] = {}
    offset = report.documents - len(refs)
    while refs and offset < report.documents:
        page = backend.list_documents(name, offset=offset, limit=1000, versions="all")
        if not page:
            break
        notes.update({d.ref: list(d.notes) for d in page if d.ref in refs and d.notes})
        offset += len(page)
    return notes


@click.command("documents", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True,
              help="Skip this many documents (in ingest order) first.")
@click.option("--limit", type=click.IntRange(1, 1000), default=PAGE, show_default=True,
              help="Show at most this many documents.")
@click.option("--versions", type=click.Choice(["latest", "all"], case_sensitive=False), default="latest",
              show_default=True, help="latest: each document's current version; all: every stored version, "
                                      "superseded and retired ones too (with version and superseded_by).")
@click.option("--json", "as_json", is_flag=True, help="Print the page as JSON for scripts.")
@click.pass_context
def documents(ctx: click.Context, name: str, offset: int, limit: int, versions: str, as_json: bool) -> None:
    """List dataset NAME's documents: name, pages, passages, media type, size, when ingested, ref, source."""
    from engine.names import validate_name

    from ..render import Console, print_documents

    validate_name(name)
    backend = backend_of(ctx, settings_of(ctx))
    try:
        page = backend.list_documents(name, offset=offset, limit=limit, versions=versions.lower())
        summary = backend.dataset_summary(name)
        total = summary.documents if versions.lower() == "latest" else (summary.versions or summary.documents)
    finally:
        backend.close()
    if as_json:
        click.echo(json.dumps({"dataset": name, "offset": offset, "limit": limit, "total": total,
                               "documents": [d.to_dict() for d in page]}, indent=2, ensure_ascii=False))
    else:
        print_documents(Console(), name, page, offset, total,
                        stored=(summary.versions or 0) if versions.lower() == "latest" else 0)
