"""`kx datasets retire NAME [DOCUMENT...] [--from FOLDER]`: retire documents on purpose.

A watch and `ingest --sync` retire a document when they see its file go, but refuse to retire everything at
once from a folder that looks empty (an unmounted drive looks the same). This is the deliberate way: by
name (a glob, as `--where name:` matches a name or a source path) or every document that came from a
folder. Retired documents stay stored (`--versions all` shows them) and answer no query; ingesting one of
the same name brings it back. All or nothing: a pattern that matches no current document refuses the whole
command before anything is retired.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from engine.errors import KxError, Status
from engine.filters import name_matches

from .context import CONTEXT_SETTINGS, local_engine, settings_of


@click.command("retire", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.argument("documents", nargs=-1)
@click.option("--from", "folders", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="Retire every current document whose file was in this folder (repeatable); the folder need "
                   "not exist any more.")
@click.option("--dry-run", is_flag=True, help="Say what would be retired; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON for scripts.")
@click.pass_context
def retire(ctx: click.Context, name: str, documents: tuple[str, ...], folders: tuple[Path, ...], dry_run: bool,
           as_json: bool) -> None:
    """Retire documents of dataset NAME on purpose: by name (globs allowed) or all from a folder (--from)."""
    from engine.backend import every_document
    from engine.in_process import InProcessBackend
    from engine.names import validate_name

    validate_name(name)
    if not documents and not folders:
        raise KxError(Status.INVALID_ARGUMENT, "name the documents to retire (as `kx datasets documents "
                                               f"{name}` lists them; globs allowed, e.g. 'guide/*') or give "
                                               "--from FOLDER for every document that came from a folder")
    if any(not pattern.strip() for pattern in documents):
        raise KxError(Status.INVALID_ARGUMENT, "a document to retire was given as empty text; name it as "
                                               f"`kx datasets documents {name}` lists it (globs allowed, e.g. "
                                               "'guide/*')")
    if settings_of(ctx).gateway:
        raise KxError(Status.FAILED_PRECONDITION, "retire changes a dataset's lineages, which the gateway does not "
                                                  "do; run it where the datasets live, without --gateway")
    backend = local_engine(ctx)
    try:
        assert isinstance(backend, InProcessBackend)
        listed = list(every_document(backend, name))
        current = {d.name: d.source_path for d in listed}   # name -> source path
        # a copy's name is current too, though listed under the first file's (its own path where known)
        paths = {d.ref: d.source_path for d in listed}
        for copy, (ref, path) in backend.copies(name).items():
            current.setdefault(copy, path or paths.get(ref))
        chosen, unmatched = _chosen(current, documents, folders)
        if unmatched:
            raise KxError(Status.NOT_FOUND, f"nothing in dataset '{name}' matches {', '.join(map(repr, unmatched))} "
                                            "(retired documents and earlier versions are not current); nothing was "
                                            f"retired. `kx datasets documents {name}` lists the current documents")
        retired = chosen if dry_run else backend.retire(name, chosen)
    finally:
        backend.close()
    if as_json:
        click.echo(json.dumps({"dataset": name, "dry_run": dry_run, "retired": retired}, indent=2,
                              ensure_ascii=False))
        return
    from ..render import Console

    console = Console()
    verb = "would retire" if dry_run else "retired"
    console.print(f"{verb} {len(retired)} document{'' if len(retired) == 1 else 's'} of '{name}'", markup=False)
    for document in retired:
        console.print(f"  {document}", markup=False)
    if retired and not dry_run:
        console.print("still stored (--versions all shows them); ingesting a document of the same name brings "
                      "it back", markup=False)


def _chosen(current: dict[str, str | None], patterns: tuple[str, ...], folders: tuple[Path, ...]
            ) -> tuple[list[str], list[str]]:
    """The current documents the patterns and folders pick (in the dataset's order), and what picked none."""
    chosen: dict[str, None] = {}
    unmatched: list[str] = []
    for pattern in patterns:
        hits = [n for n, source in current.items() if name_matches(pattern, n, source)]
        if not hits:
            unmatched.append(pattern)
        chosen.update(dict.fromkeys(hits))
    for folder in folders:
        # the folder may be gone (deleted on purpose): resolve what can be, keep the rest as written
        inside = str(folder.expanduser().resolve()).rstrip(os.sep) + os.sep
        hits = [n for n, source in current.items() if source is not None and source.startswith(inside)]
        if not hits:
            unmatched.append(f"--from {folder}")
        chosen.update(dict.fromkeys(hits))
    return [n for n in current if n in chosen], unmatched
