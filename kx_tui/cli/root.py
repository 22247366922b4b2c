"""`kx ...`: the headless subcommands, for people at a shell and for scripts.

Every command prints for a person by default and JSON with `--json`. Every
failure is one line, `error: CODE: message`, on stderr, with an exit code per
status; a traceback reaching a user is a bug (set KX_DEBUG=1 to see one).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import click

from engine.config import ENV
from engine.errors import KxError, Status
from engine.records import DocumentResult, DocumentStatus, IngestEvent, Notice, Progress, RetrievalMode

from .context import CONTEXT_SETTINGS, backend_of, local_engine, parse_sets, settings_of
from .query_options import engine_options, query_options
from .stopping import GIVE_UP_SECONDS, Interrupted, release_early

if TYPE_CHECKING:
    from rich.console import Console as RichConsole

    from engine.backend import Backend
    from engine.records import Hit
    from engine.watch.events import Renamed, Retired, WatchEvent

# Imported inside the commands that use them, so a command pays only for its own modules: `kx datasets list
# --json` never loads rich, a query never loads the watcher or the gateway (tests/test_import_hygiene.py).

EXIT_INTERNAL = Status.INTERNAL.exit_code
# Commands that handle Ctrl-C and SIGTERM themselves (a StopSignals block): a stop that came while kx started
# is theirs to honour; "datasets" hands over to its own subcommands.
_HANDLES_STOPS = frozenset({"serve", "mcp", "datasets", "ingest", "embed", "rebuild", "watch"})
_INGEST_GIVE_UP_SECONDS = GIVE_UP_SECONDS  # after Ctrl-C / SIGTERM, an ingest with no stopping point leaves anyway


class _LazyGroup(click.Group):
    """A click group whose commands in other modules are imported when one of them runs, not before.

    `lazy` maps a command's name to ("module:attribute", its one-line help); the help is what `kx --help`
    lists without importing the module (tests/test_import_hygiene.py checks it matches the command's own).
    """

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, attribute = self.lazy[cmd_name][0].split(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own listing, with the lazy commands' help from the table (their modules stay unloaded)."""
        names = [n for n in self.list_commands(ctx) if n in self.lazy and n not in self.commands
                 or not self.commands[n].hidden]
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            if name in self.lazy and name not in self.commands:
                # shortened as click shortens the loaded command's own help (click.utils.make_default_short_help
                # is deprecated (click 8.5 warns it goes in 9.0) and served by the module's __getattr__, typed `object`)
                rows.append((name, click.Command(name, help=self.lazy[name][1]).get_short_help_str(limit)))
            else:
                rows.append((name, self.commands[name].get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


_TOP_LEVEL = {
    "serve": ("kx_tui.cli.serve:serve",
              "Serve the engine over HTTP (JSON API under /v1, description at /openapi.json)."),
    "models": ("kx_tui.cli.models:models", "Prepare the embedding model (see `kx info` for the one in use)."),
    "agent": ("kx_tui.cli.agent:agent", "Let an agent search a dataset on its own and answer with citations."),
    "mcp": ("kx_tui.cli.mcp:mcp",
            "Serve kx to LLM clients over MCP: list_datasets, search, read_document, list_documents."),
    "completion": ("kx_tui.cli.completion:completion", "Print the completion script for SHELL (bash, zsh or fish)."),
}
_DATASETS = {
    "check": ("kx_tui.cli.check:check",
              "Check every row of dataset NAME's catalogue, and its index files, for damage."),
    "documents": ("kx_tui.cli.documents:documents",
                  "List dataset NAME's documents: name, pages, passages, media type, size, when ingested, ref, "
                  "source."),
    "embed": ("kx_tui.cli.embed:embed",
              "Embed the passages of dataset NAME that are committed but have no vectors yet."),
    "rebuild": ("kx_tui.cli.rebuild:rebuild",
                "Build dataset NEW from dataset NAME's stored original bytes under new settings."),
    "retire": ("kx_tui.cli.retire:retire",
               "Retire documents of dataset NAME on purpose: by name (globs allowed) or all from a folder (--from)."),
    "watch": ("kx_tui.cli.watch:watch",
              "Watch folder DIR and ingest every file that lands in it into dataset NAME, until Ctrl-C."),
}


@click.group(cls=_LazyGroup, lazy=_TOP_LEVEL, context_settings=CONTEXT_SETTINGS, invoke_without_command=True)
@click.option("--home", type=click.Path(file_okay=False, path_type=Path), default=None,
              help=f"Where datasets live (overrides {ENV.home}).")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="Override a setting for this command, e.g. --set chunk_size=800 (see `kx info`).")
@click.option("--gateway", metavar="URL", default=None,
              help="Work through a `kx serve` gateway at URL (e.g. http://127.0.0.1:50151) instead of "
                   f"in-process (overrides {ENV.gateway}).")
@click.option("--token", envvar="KX_GATEWAY_TOKEN", default=None, metavar="TOKEN",
              help=f"The gateway's bearer token (default: KX_GATEWAY_TOKEN, else ${ENV.home}/gateway.token).")
@click.version_option(package_name="kx", prog_name="kx", message="%(prog)s %(version)s")
@click.pass_context
def cli(ctx: click.Context, home: Path | None, sets: tuple[str, ...], gateway: str | None,
        token: str | None) -> None:
    """kx: ask your own documents questions, on your own machine.

    Datasets are named, append-only piles of documents under KX_HOME. Ingest
    files or text, then query them with hybrid (dense + BM25) retrieval.
    """
    # Stops that came while kx started: the commands that handle stops take them over (kx_tui/cli/stopping.py)
    release_early(ctx.invoked_subcommand in _HANDLES_STOPS)
    flags: dict[str, Any] = parse_sets(sets)
    if home is not None:
        flags["home"] = str(home)
    if gateway is not None:
        flags["gateway"] = gateway
    ctx.obj = {"flags": flags, "token": token}
    if ctx.invoked_subcommand is None:
        from ..tui.app import KxApp  # lazily: `kx --help` and the subcommands never import textual

        settings = settings_of(ctx)
        backend = backend_of(ctx, settings)
        try:
            # the local settings only when the datasets are on this machine (highlighting, watching)
            KxApp(backend, settings=None if settings.gateway else settings).run()
        finally:
            backend.close()


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.pass_context
def info(ctx: click.Context, as_json: bool) -> None:
    """Show every effective setting, where it came from, and the embedding model."""
    data = backend_of(ctx, settings_of(ctx)).info()
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        from ..render import Console, print_info

        print_info(Console(), data)


@cli.group(cls=_LazyGroup, lazy=_DATASETS, context_settings=CONTEXT_SETTINGS)
@click.pass_context
def datasets(ctx: click.Context) -> None:
    """Create, fill and inspect datasets."""
    release_early(ctx.invoked_subcommand in _HANDLES_STOPS)


@datasets.command("list", context_settings=CONTEXT_SETTINGS)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.option("--names", "names_only", is_flag=True, help="Print only the names, one a line (shell completion).")
@click.pass_context
def list_datasets(ctx: click.Context, as_json: bool, names_only: bool) -> None:
    """List datasets with their document and passage counts, embedding model and chunking."""
    summaries = backend_of(ctx, settings_of(ctx)).list_datasets()
    if names_only:
        click.echo("".join(f"{s.name}\n" for s in summaries), nl=False)
    elif as_json:
        click.echo(json.dumps([s.to_dict() for s in summaries], indent=2))
    else:
        from ..render import Console, print_datasets

        print_datasets(Console(), summaries)


@datasets.command(context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--file", "-f", "files", multiple=True, type=click.Path(path_type=Path),
              help="A file to add as one document, or a folder to add every file of (repeatable).")
@click.option("--text", "-t", "texts", multiple=True, help="A string to add as one document (repeatable).")
@click.option("--jsonl", "jsonls", multiple=True, type=click.Path(path_type=Path),
              help="A JSONL file, one {\"_id\", \"title\", \"text\"} object per line, each a document named by its id.")
@click.option("--chunk-size", type=int, default=None,
              help=f"Passage length in characters (overrides {ENV.chunk_size}).")
@click.option("--chunk-overlap", type=int, default=None,
              help=f"Characters shared by neighbouring passages (overrides {ENV.chunk_overlap}).")
@click.option("--sync", is_flag=True,
              help="Make the dataset follow each folder given: documents from it whose files are gone stop "
                   "answering (retired, still stored: --versions all shows them, putting the file back brings "
                   "them back), and a file renamed or moved inside it keeps its document's history.")
@click.option("--strict", is_flag=True,
              help="Fail (non-zero exit) when any file is refused, also one found by walking a folder.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON report for scripts.")
@click.pass_context
def ingest(ctx: click.Context, name: str, paths: tuple[Path, ...], files: tuple[Path, ...], texts: tuple[str, ...],
           jsonls: tuple[Path, ...], chunk_size: int | None, chunk_overlap: int | None, sync: bool,
           strict: bool, as_json: bool) -> None:
    """Add documents (files, or folders of them) to dataset NAME, creating it on first use.

    A folder is walked recursively with the folder watcher's rules (hidden,
    temporary and lock files skipped); each file is named by its path in the
    folder without extension, e.g. docs/guide/index.md -> guide/index (files
    sharing a stem in one folder keep theirs: report.md, report.txt).

    Two stages: each document is read, cut into passages, committed and made
    keyword-searchable within seconds; then the passages are embedded for
    dense search (queries meanwhile say how much dense covers). Stopped at
    any point, nothing committed is lost: the next ingest or `kx datasets
    embed NAME` finishes the embedding.
    Bytes already in the dataset are reported "unchanged" and cost nothing.
    A file that cannot be read is refused with the reason (one line on stderr); the others still go in.
    A refused file found in a folder does not fail the command (exit 0); one named explicitly does, and
    with --strict any does; so does an ingest that stored nothing.
    An edited file's new bytes become the current version of its document. With --sync, a
    folder's deleted files retire their documents and renames keep their history, as
    `kx datasets watch` does when it starts (documents from other folders, --text or
    --jsonl are left alone).
    """
    from engine.names import validate_name
    from engine.text.folders import folder_documents
    from engine.text.inputs import from_file, from_jsonl, from_text, refuse_name_clashes
    from engine.text.kx_files import kx_files_refusal, reaches_kx_files, refuse_the_token

    from ..render import Console, print_ingest_line, print_ingest_notes, print_ingest_summary
    from .progress import PipelineProgress
    from .stopping import StopSignals

    validate_name(name)
    settings = settings_of(ctx, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    if settings.gateway and (chunk_size is not None or chunk_overlap is not None):
        raise KxError(Status.FAILED_PRECONDITION,
                      "--chunk-size and --chunk-overlap are the gateway's settings; set them where `kx serve` "
                      f"runs ({ENV.chunk_size}, {ENV.chunk_overlap}), or drop --gateway")
    engine = backend_of(ctx, settings)
    limit = settings.max_document_bytes
    docs = []
    for path in (*paths, *files):
        place = reaches_kx_files(path, settings.home, settings.datasets_dir) if path.is_dir() else None
        if place is not None:  # as a watched folder is refused: kx's own files are no one's documents
            raise kx_files_refusal(path, place, settings.home, "nothing was ingested. Give a folder of your own, "
                                                               "e.g. one inside it that holds your documents")
    from_walk: list[bool] = []   # per document: found by walking a folder (its refusal fails nothing)
    for path in (*paths, *files):
        # a folder: every file in it, recursively, named by its path in it (the watcher's rules)
        found = folder_documents(path, limit) if path.is_dir() else [from_file(path, limit)]
        docs.extend(found)
        from_walk.extend([path.is_dir()] * len(found))
    docs += [from_text(t) for t in texts]
    for path in jsonls:
        docs.extend(from_jsonl(path, limit))
    from_walk += [False] * (len(docs) - len(from_walk))
    # here too, not only in the engine: with --gateway the bytes would leave for a gateway whose token differs
    docs = refuse_the_token(docs, settings.home)
    given_docs, docs = docs, refuse_name_clashes(docs)   # two folders' `index.md`: the second would hide the first
    # a clash is the command's own shape, not a file nobody can read: it fails the command as a named file does
    from_walk = [walked and doc is given for walked, doc, given in zip(from_walk, docs, given_docs)]
    if not docs:
        raise KxError(Status.INVALID_ARGUMENT,
                      "nothing to ingest; give --file FILE, --text TEXT or --jsonl FILE")
    folders = [path for path in (*paths, *files) if path.is_dir()]
    if sync:
        from engine.in_process import InProcessBackend

        if not folders:
            # a folder mistyped is the likely cause: say that it is missing rather than that none was given
            missing = [str(path) for path in (*paths, *files) if not path.exists()]
            given = f"{missing[0]} does not exist; " if missing else ""
            raise KxError(Status.INVALID_ARGUMENT, f"--sync makes a dataset follow a folder; {given}give one, "
                                                   f"e.g. kx datasets ingest {name} docs/ --sync")
        if not isinstance(engine, InProcessBackend):   # the gateway's client retires and renames nothing
            raise KxError(Status.FAILED_PRECONDITION, "--sync retires and renames documents, which the gateway "
                                                      "does not do; run it where the datasets live, without --gateway")
        for folder in folders:
            # A folder with nothing readable (emptied, or a share that is not mounted and shows as an empty
            # folder) would retire every document the dataset has from it: refused as a whole, touching nothing.
            inside = str(folder.resolve())
            if not any(d.error is None and (d.source_path or "").startswith(inside + os.sep) for d in docs):
                raise KxError(Status.FAILED_PRECONDITION,
                              f"--sync found nothing readable in {folder} (no file, or none kx can read), and "
                              f"would retire every document of dataset '{name}' that came from it; nothing was "
                              "changed. Check that the folder is the right one (and mounted); if its files were "
                              f"removed on purpose, `kx datasets retire {name} --from {folder}` retires what came "
                              "from it")

    out, err = Console(), Console(stderr=True)
    quiet_lines = as_json or len(docs) > 50
    # Before the ingest, as the watcher does at start: a renamed file's lineage moves to its new name first,
    # so its bytes then come back "unchanged" under that name instead of starting a second lineage.
    followed = [event for folder in folders for event in _followed(engine, name, folder)] if sync else []
    if not as_json:
        _print_followed(out, followed)
    added = 0
    seen: list[DocumentResult] = []   # every document's result so far: what a stopped --json run reports
    # Ctrl-C / SIGTERM only count; the ingest stops at its next progress event (between two embedding
    # steps or after a commit), and in any case within _INGEST_GIVE_UP_SECONDS (kx_tui/cli/stopping.py).
    with StopSignals(give_up_after=_INGEST_GIVE_UP_SECONDS,
                     last_words="error: CANCELLED: the ingest did not reach a stopping point in time; leaving "
                                "now. What was committed stays; run the same command again for the rest") as stop, \
            PipelineProgress(err) as progress:
        def on_event(event: IngestEvent) -> None:
            nonlocal added
            if isinstance(event, Progress):
                progress.update(event)
            elif isinstance(event, Notice):
                progress.notice(event)
            elif isinstance(event, DocumentResult):
                added += event.status == DocumentStatus.ADDED
                seen.append(event)
                if event.status == DocumentStatus.REFUSED:   # one line on stderr each, --json or not
                    progress.call(print_ingest_line, err, event)
                elif not quiet_lines:
                    progress.call(print_ingest_line, out, event)
            if stop.count:
                raise Interrupted(stop.last or signal.SIGINT)

        try:
            report = engine.ingest(name, docs, on_event=on_event)
        except Interrupted as stopped:
            # worded once the ingest has left: a committed group's results all arrive, even after the one the
            # stop was raised at, so `added` is what the catalogue holds from this command
            stopped = Interrupted(stopped.signum, f"stopped by {stop.name}: {added} document(s) were committed and "
                                                  "stay; run the same command again to add the rest (what is in "
                                                  "comes back unchanged)")
            if as_json:  # a script reads stdout: it still gets one object, saying what is stored and that it stopped
                from .verdict import stopped_report

                click.echo(json.dumps(stopped_report(name, seen, len(docs), stopped), indent=2))
            raise stopped from None   # the same exit (130) and stderr line as without --json
    from .documents import added_notes

    notes = added_notes(engine, name, report)   # what the extractors noted, e.g. an HTML page without its body
    if as_json:
        data = report.to_dict()
        for result in data["results"]:
            result["notes"] = notes.get(result.get("ref") or "", [])
        if sync:
            from engine.watch.events import Renamed, Retired

            data["retired"] = [{"name": e.name, "path": e.path} for e in followed if isinstance(e, Retired)]
            data["renamed"] = [{"name": e.name, "old_name": e.old_name, "path": e.path}
                               for e in followed if isinstance(e, Renamed)]
        click.echo(json.dumps(data, indent=2))
    else:
        print_ingest_notes(out, report, notes)
        print_ingest_summary(out, report)
    from .verdict import failing_refusals, failure

    failing = failing_refusals(report, docs, from_walk, strict)
    if failing:
        from engine.watch.events import Retired

        raise failure(name, report, failing, sum(isinstance(event, Retired) for event in followed))


def _followed(engine: Backend, name: str, folder: Path) -> list[Retired | Renamed]:
    """What --sync did for `folder`: Retired and Renamed events (engine/watch/reconcile.py, the watcher's rule)."""
    from engine.in_process import InProcessBackend
    from engine.watch.events import Renamed, Retired
    from engine.watch.reconcile import reconcile

    assert isinstance(engine, InProcessBackend)  # ingest refused --sync over any other backend before this
    events: list[Retired | Renamed] = []

    def keep(event: WatchEvent) -> None:
        if isinstance(event, (Retired, Renamed)):
            events.append(event)

    reconcile(engine, name, str(folder.resolve()), keep)
    return events


def _print_followed(console: RichConsole, events: list[Retired | Renamed]) -> None:
    from ..describe import describe_watch_event

    for event in events:
        line = describe_watch_event(event, event.name)
        if line:
            console.print(line)


@datasets.command(context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.argument("question", nargs=-1)
@click.option("--text", "-t", "text", default=None,
              help="The question or words to search for (or give them after NAME, quoted or not).")
@query_options
@click.option("--raw", is_flag=True, help="Show each passage's stored text as it is (Markdown marks kept).")
@click.option("--json", "as_json", is_flag=True, help="Print every field of every hit as JSON.")
@click.pass_context
def query(ctx: click.Context, name: str, question: tuple[str, ...], text: str | None, raw: bool, as_json: bool,
          **given: Any) -> None:
    """Ask dataset NAME a QUESTION; print the passages that answer it, with provenance.

    \b
    kx datasets query handbook "how long do I have to return a logger?"
    kx datasets query handbook --text "how long do I have to return a logger?"
    kx datasets query handbook "refund window" --where type:pdf --where name:policies/*
    """
    if question and text is not None:
        raise click.UsageError("give the question once: after NAME or with --text, not both")
    text = " ".join(question) if question else text
    if text is None:  # a blank question given is the engine's to refuse (INVALID_ARGUMENT, "the query is empty")
        raise click.UsageError('missing the question: kx datasets query NAME "your question"')
    settings = settings_of(ctx)
    engine = backend_of(ctx, settings)
    options = engine_options(given)
    result = engine.query(name, text, **options)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        return
    from engine.text.analysis import highlighter

    from ..render import Console, print_query

    # the dataset's own analyzer, named by its fingerprint: kx's stemming one, or Milvus's (also over a gateway)
    print_query(Console(), result, highlighter(engine.dataset_summary(name).fingerprint, text),
                where=options.get("where") or (),
                raw=raw)


# kx eval's columns: each mode, and hybrid with MMR (engine/evaluation.py VARIANTS, not imported for --help)
_EVAL_COLUMNS = [*(mode.value for mode in (RetrievalMode.DENSE, RetrievalMode.SPARSE, RetrievalMode.HYBRID)),
                 f"{RetrievalMode.HYBRID.value}+mmr"]


@cli.command("eval", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.option("--queries", "queries_path", required=True, type=click.Path(path_type=Path),
              help="JSONL of {\"_id\", \"text\"} queries (BEIR layout).")
@click.option("--qrels", "qrels_path", required=True, type=click.Path(path_type=Path),
              help="TSV of query-id, corpus-id, score judgements (header optional).")
@click.option("--corpus", "corpus_path", type=click.Path(path_type=Path), default=None,
              help="JSONL corpus to ingest into NAME first (a no-op for documents already there).")
@click.option("--mode", "modes", multiple=True, type=click.Choice(_EVAL_COLUMNS),
              help="Columns to compute (repeatable; default all four).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.pass_context
def eval_command(ctx: click.Context, name: str, queries_path: Path, qrels_path: Path, corpus_path: Path | None,
                 modes: tuple[str, ...], as_json: bool) -> None:
    """Score retrieval on judged queries: nDCG@10, Recall@100 and MRR@10 per mode.

    Judgements name documents (a --jsonl document's id, or a file's name
    without its extension); a document counts once, at its best passage.
    """
    from engine.evaluation import EVAL_DEPTH, VARIANTS, evaluate, read_qrels, read_queries
    from engine.text.inputs import from_jsonl

    from ..render import Console, print_eval
    from .progress import PipelineProgress

    if settings_of(ctx).gateway:
        raise KxError(Status.FAILED_PRECONDITION, "kx eval runs in-process; drop --gateway")
    queries, qrels = read_queries(queries_path), read_qrels(qrels_path)
    # Deep lists, so Recall@100 sees 100 distinct documents even when each is several passages.
    engine = local_engine(ctx, max_k=EVAL_DEPTH, candidate_pool=EVAL_DEPTH)
    err = Console(stderr=True)
    if corpus_path is not None:
        docs = list(from_jsonl(corpus_path, engine.settings.max_document_bytes))
        with PipelineProgress(err) as progress:
            report = engine.ingest(name, docs, on_event=progress.update)
        if not as_json:
            counts = {status: report.count(status) for status in DocumentStatus}
            err.print(f"{name}: {counts[DocumentStatus.ADDED]} added, {counts[DocumentStatus.UNCHANGED]} unchanged, "
                      f"{counts[DocumentStatus.REFUSED]} refused")
    variants = list(modes) or list(VARIANTS)

    def run_query(text: str, mode: str, rerank: bool) -> list[Hit]:
        return engine.query(name, text, k=EVAL_DEPTH, mode=mode, rerank=rerank).hits

    result = evaluate(run_query, name, queries, qrels, variants)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        print_eval(Console(), result)


def _fail(status_name: str, message: str, code: int) -> None:
    from ..render import terminal_safe  # a message may quote a file name or a line of input: shown, not obeyed

    click.echo(f"error: {status_name}: {terminal_safe(message)}", err=True)
    sys.exit(code)


def _cancelled(message: str) -> None:
    """Leave after Ctrl-C / SIGTERM: every commit is whole and the `finally` blocks have run by now, but a
    helper thread (the model loading beside an ingest) may still be inside ONNX Runtime, and finalising the
    interpreter under it aborts the process (exit -6); so leave without finalising, streams flushed."""
    click.echo(f"error: CANCELLED: {message}", err=True)
    from .stopping import leave_now_if_helpers_remain

    leave_now_if_helpers_remain(130)
    sys.exit(130)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the CLI, turning every failure into one line on stderr."""
    if os.environ.get("_KX_COMPLETE"):   # click's completion callback (zsh, fish): kx's value kinds too
        from .completion_script import attach_dynamic

        attach_dynamic(cli)
    try:
        cli.main(args=argv, prog_name="kx", standalone_mode=False)
    except KxError as exc:
        _fail(exc.status.name, exc.message, exc.status.exit_code)
    except click.exceptions.Abort as exc:  # click turns a KeyboardInterrupt (ours included) into Abort
        cause = exc.__cause__ or exc.__context__
        _cancelled(cause.message if isinstance(cause, Interrupted) else "interrupted")
    except click.exceptions.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Interrupted as exc:
        _cancelled(exc.message)
    except KeyboardInterrupt:
        _fail("CANCELLED", "interrupted", 130)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as exc:  # a bug: say so in one line, keep the trace for those who ask
        if isinstance(exc, ValueError) and "null byte" in str(exc):  # click's own path checks, on a NUL
            _fail(Status.INVALID_ARGUMENT.name, "an argument holds a NUL byte; no path or name can contain one",
                  Status.INVALID_ARGUMENT.exit_code)
        if os.environ.get("KX_DEBUG"):
            raise
        _fail("INTERNAL", f"unexpected {type(exc).__name__}: {exc}; rerun with KX_DEBUG=1 and report it",
              EXIT_INTERNAL)
