"""Human output for the headless commands, drawn with rich."""

from __future__ import annotations

import datetime as _dt
import re
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from rich.console import Console as _RichConsole
from rich.console import JustifyMethod
from rich.markup import escape
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from engine.records import (
    DatasetSummary,
    DocumentResult,
    DocumentStatus,
    DocumentSummary,
    Hit,
    IngestReport,
    QueryResult,
    RetrievalMode,
)

if TYPE_CHECKING:  # `kx eval` imports the evaluation module; nothing else that prints should pay for it
    from engine.evaluation import EvalReport


def _unsafe_table(keep_layout: bool) -> dict[int, str]:
    """str.translate's table: each character a terminal would obey rather than show, to one visible character.

    C0 controls and DEL become their Control Pictures (ESC shows as ␛, BEL as ␇), one character for one, so
    offsets into a passage (its highlights, its answer span) stay right; C1 controls (U+009B is a one-byte
    CSI to many terminals) and the bidi overrides and isolates (which reorder what follows, e.g. a file
    name's extension) become U+FFFD. With `keep_layout` (a passage's text, where they are layout), newline
    and tab are left for the layout to use, and CR, VT and FF (CRLF line ends, a PDF's page breaks) are
    shown as spaces: a bare CR would move the cursor back over what was printed.
    """
    table = {code: chr(0x2400 + code) for code in range(0x20)}
    table[0x7F] = "\u2421"
    table.update({code: "\ufffd" for code in (*range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A))})
    if keep_layout:
        del table[ord("\n")], table[ord("\t")]
        table.update({ord("\r"): " ", ord("\v"): " ", ord("\f"): " "})
    return table


_UNSAFE = _unsafe_table(keep_layout=False)
_UNSAFE_KEEP_LAYOUT = _unsafe_table(keep_layout=True)


def terminal_safe(text: str, keep_layout: bool = False) -> str:
    """`text` (a file name, a title, a passage: anything stored) with every control character shown, not obeyed.

    Stored data reaches a person's terminal through these renderers; an escape sequence in a file name or
    a document could otherwise recolour, clear or retitle it, or hide what follows. `--json` output is
    exact instead (JSON escapes control characters itself).
    """
    return text.translate(_UNSAFE_KEEP_LAYOUT if keep_layout else _UNSAFE)


class _SafeConsole(_RichConsole):
    """A rich Console whose every piece of text is `terminal_safe` on its way out, whoever built it.

    The one place human output passes through: a renderer that forgets to clean a stored string still
    cannot send its escapes to the terminal. Rich's own control segments (cursor moves of a live
    progress line) are rich's, not data, and go out as they are. Renderers that lay text out in columns
    still clean their cells first (`print_table`), so a cell is measured as it will be shown, and names
    are cleaned where they are put in a line, so that a CR in one shows as ␍ rather than as a space.
    """

    def print(self, *objects: Any, **kwargs: Any) -> None:
        # strings before rich reads them: it would drop BEL, BS and CR silently (and pass ESC on)
        super().print(*(terminal_safe(o, keep_layout=True) if isinstance(o, str) else o for o in objects), **kwargs)

    def render(self, renderable: Any, options: Any = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or segment.text.isprintable() or not segment.text:
                yield segment
            else:
                yield Segment(terminal_safe(segment.text, keep_layout=True), segment.style)


def Console(stderr: bool = False) -> _RichConsole:  # noqa: N802 - reads as a constructor at call sites
    return _SafeConsole(stderr=stderr, highlight=False, soft_wrap=True)


def _when(stamp: float) -> str:
    return _dt.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M") if stamp else "-"


Column = tuple[str, JustifyMethod]   # (heading, justify: "left", "right", ...)


def print_table(console: _RichConsole, columns: Sequence[Column], rows: Sequence[Sequence[str]],
                priority: Sequence[str] | None = None) -> list[str]:
    """A table of plain-text cells whose every value is printed whole; returns the headings left out.

    On a terminal the table fits its width by leaving out whole columns, least
    important last in `priority` first (default: the order given), never by
    cutting values. Off a terminal (a pipe, a file) every column is printed at
    its full width whatever the width the console assumes.
    """
    headings = [heading for heading, _j in columns]
    rows = [[terminal_safe(cell) for cell in row] for row in rows]   # measured as shown: ESC is ␛, one cell
    widths = {h: max([len(h), *(Text(row[i]).cell_len for row in rows)]) for i, h in enumerate(headings)}
    shown = (fit_columns(widths, priority or headings, console.width, gap=2) if console.is_terminal
             else headings)
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold", padding=(0, 2, 0, 0))
    for heading, justify in columns:
        if heading in shown:
            table.add_column(heading, justify=justify, no_wrap=True)
    for row in rows:
        table.add_row(*(Text(cell) for cell, heading in zip(row, headings) if heading in shown))
    if console.is_terminal:
        console.print(table)
    else:   # a pipe: the console assumes 80 columns; print at the table's own width instead
        assumed = console.width
        console.width = sum(widths[h] + 2 for h in shown)
        try:
            with console.capture() as captured:
                console.print(table, crop=False)
        finally:
            console.width = assumed
        for line in captured.get().splitlines():   # without the padding after the last column
            console.out(line.rstrip(), highlight=False)
    left_out = [h for h in headings if h not in shown]
    if left_out:
        console.print(f"[dim]({', '.join(left_out)}: left out to fit {console.width} columns; "
                      "--json or a wider terminal shows them)[/]")
    return left_out


def print_datasets(console: _RichConsole, summaries: list[DatasetSummary]) -> None:
    if not summaries:
        console.print("No datasets yet. Add one with: kx datasets ingest NAME --file FILE")
        return
    waiting = any(s.backlog for s in summaries)  # the column only while some ingest's embedding is unfinished
    unindexed = any(s.unindexed for s in summaries)  # only after a keyword index's commit failed (a full disk)
    extra = [*(("to embed",) if waiting else ()), *(("to index",) if unindexed else ())]
    print_table(console, [("name", "left"), ("documents", "right"), ("passages", "right"),
                          *((h, "right") for h in extra), ("embedding model", "left"), ("chunking", "left"),
                          ("created", "left")],
                [[s.name + (" (unreadable)" if s.error else ""),
                  f"{s.documents:,}" + (f" ({s.versions:,} stored)" if s.versions not in (None, s.documents) else ""),
                  f"{s.passages:,}",
                  *((f"{s.backlog:,}" if s.backlog else "-",) if waiting else ()),
                  *((f"{s.unindexed:,}" if s.unindexed else "-",) if unindexed else ()),
                  s.embed_model or "-", _chunking(s), _when(s.created_at)]
                 for s in summaries],
                ["name", "documents", "passages", *extra, "created", "embedding model", "chunking"])
    if waiting:
        searchable = "committed" if unindexed else "keyword-searchable"
        console.print(f"[dim]to embed: passages {searchable} but not yet in dense search; "
                      "`kx datasets embed NAME` finishes them[/]")
    if unindexed:
        console.print("[dim]to index: passages committed but not yet keyword-searchable (the keyword index's "
                      "last update failed: a full disk?); `kx datasets embed NAME` indexes them once the "
                      "disk has room[/]")
    for s in summaries:
        if s.error:  # listed so the others still are; its row's zeros are nothing read, not an empty dataset
            console.print(f"[red]{escape(s.name)}: cannot be read: {escape(s.error)}[/]")


def _chunking(summary: DatasetSummary) -> str:
    """'1000/200': the passage length and overlap (characters) the dataset was cut with; later commands on it
    use them unless told otherwise (engine/dataset_settings.py)."""
    fingerprint = summary.fingerprint or {}
    if "chunk_size" not in fingerprint:
        return "-"
    return f"{fingerprint['chunk_size']}/{fingerprint.get('chunk_overlap', 0)}"


def size_text(size: int) -> str:
    """Bytes for a person: 512 B, 3.4 KB, 12 MB."""
    if size < 1000:
        return f"{size} B"
    scaled = float(size)
    for unit in ("KB", "MB", "GB"):
        scaled /= 1000
        if scaled < 1000 or unit == "GB":
            return f"{scaled:.1f} {unit}" if scaled < 10 else f"{scaled:.0f} {unit}"
    return f"{scaled:.0f} GB"


def fit_columns(widths: dict[str, int], priority: Sequence[str], available: int, gap: int) -> list[str]:
    """The columns (keys of `widths`, in its order) that fit `available` cells whole, `gap` cells apart.

    Columns are taken in `priority` order (the first always) while the next one
    still fits; a column that does not fit is left out, never cut, so a table
    narrower than its content loses its least important columns, not the ends
    of its names.
    """
    chosen: set[str] = set()
    used = -gap
    for key in priority:
        if key not in widths:
            continue
        if chosen and used + gap + widths[key] > available:
            continue   # a narrower column further down the list may still fit
        chosen.add(key)
        used += gap + widths[key]
    return [key for key in widths if key in chosen]


def print_documents(console: _RichConsole, dataset: str, documents: list[DocumentSummary], offset: int,
                    total: int, stored: int = 0) -> None:
    """`stored`: every stored version, when the page shows current documents only (0: not known)."""
    if not documents:
        if total:
            console.print(f"[bold]{escape(dataset)}[/]: no documents from {offset + 1} (it holds {total:,})")
        elif stored:  # everything retired: still stored, so not "yet"
            console.print(f"[bold]{escape(dataset)}[/]: no current documents; {stored:,} stored version"
                          f"{'' if stored == 1 else 's'}, retired or superseded (--versions all lists them)")
        else:
            console.print(f"[bold]{escape(dataset)}[/]: no documents yet")
        return
    titled = any(d.title for d in documents)
    title: list[Column] = [("title", "left")] if titled else []
    columns: list[Column] = [("name", "left"), *title, ("pages", "right"),
                             ("passages", "right"), ("size", "right"), ("type", "left"), ("ingested", "left"),
                             ("source", "left")]
    rows = [[d.name + version_label(d), *([d.title or "-"] if titled else []),
             "-" if d.pages is None else str(d.pages),
             f"{d.passages:,}", size_text(d.size), d.media_type, _when(d.ingested_at), d.source_path or "-"]
            for d in documents]
    print_table(console, columns, rows, ["name", "passages", "pages", "title", "size", "source", "ingested", "type"])
    last = offset + len(documents)
    more = f"; --offset {last} for the next ones" if last < total else ""
    console.print(f"[dim]{escape(dataset)}: documents {offset + 1}–{last} of {total:,}{more}[/]")


def version_label(document: DocumentSummary) -> str:
    """" (v2)", " (v1, superseded)", " (v3, retired)": said when a lineage holds more than one version."""
    state = ", retired" if document.retired else ", superseded" if document.superseded_by else ""
    return f" (v{document.version}{state})" if document.version > 1 or state else ""


_STATUS_STYLE = {DocumentStatus.ADDED: "green", DocumentStatus.UNCHANGED: "dim", DocumentStatus.REFUSED: "red"}


def print_ingest_line(console: _RichConsole, result: DocumentResult) -> None:
    style = _STATUS_STYLE[result.status]
    label = f"[{style}]{result.status:<9}[/]"
    name = escape(terminal_safe(result.name))
    if result.status == DocumentStatus.REFUSED:
        # the reason quotes the file's path: a newline in its name must not start a line that reads as output
        console.print(f"{label} {name}: {escape(terminal_safe(result.reason or ''))}")
    else:
        plural = "" if result.passages == 1 else "s"
        console.print(f"{label} {name} ({result.passages} passage{plural})")


def print_ingest_notes(console: _RichConsole, report: IngestReport, notes: dict[str, list[str]]) -> None:
    """One `note:` line per thing an extractor could not do, naming the document."""
    for result in report.results:
        for note in notes.get(result.ref or "", []):
            console.print(f"[yellow]note[/]: {escape(terminal_safe(result.name))}: {escape(note)}")


def print_ingest_summary(console: _RichConsole, report: IngestReport) -> None:
    added, unchanged, refused = (report.count(s) for s in DocumentStatus)
    new = sum(r.passages for r in report.results if r.status == DocumentStatus.ADDED)
    console.print(
        f"[bold]{escape(report.dataset)}[/]: {added} added ({new:,} passage{'' if new == 1 else 's'}), "
        f"{unchanged} unchanged, "
        f"{refused} refused; the dataset now holds {report.documents:,} stored document"
        f"{'' if report.documents == 1 else 's'} (versions included), "
        f"{report.passages:,} passage{'' if report.passages == 1 else 's'}"
    )


def print_info(console: _RichConsole, data: dict[str, Any]) -> None:
    console.print(f"[bold]kx {data['version']}[/]")
    console.print(f"home         {escape(data['home'])}  ({data['datasets']} dataset(s))")
    backend = data.get("backend")  # an older gateway does not say
    if backend:
        where = backend.get("uri") or backend.get("path") or ""
        token = "  (token ***)" if backend.get("token") else ""
        console.print(f"backend      {escape(backend['kind'])}  {escape(str(where))}{token}")
        if backend.get("error"):
            console.print(f"             [red]unreachable[/]: {escape(backend['error']['message'])}")
    exists = "" if data["config_file_exists"] else "  (not present)"
    console.print(f"config file  {escape(data['config_file'])}{exists}")
    model = data["embed_model"]
    if model is None:
        console.print("embed model  none")
    elif "error" in model:
        console.print(f"embed model  [red]unavailable[/]: {escape(model['error']['message'])}")
    else:
        kind = "[yellow]chat / causal LM[/]" if model["causal_lm"] else "sentence embedder"
        console.print(f"embed model  {escape(model['model_id'])}  ({kind}, {model['pooling']} pooling, "
                      f"{model['dimension']} dims, {'normalised' if model['normalized'] else 'not normalised'})")
        if model.get("endpoint"):  # a served model: where, and how fast its probe came back
            down = f"  (not answering: {', '.join(model['endpoint_down'])})" if model.get("endpoint_down") else ""
            console.print(f"             served at {escape(', '.join(model['endpoint']))}, probe "
                          f"{model.get('latency_ms')} ms{escape(down)}")
        else:
            console.print(f"             {escape(model['path'])}")
        runtime = model.get("runtime")
        if runtime:  # which runtime embeds, and why (an older gateway does not say)
            state = ("in use" if runtime.get("loaded") else "prepared; loads on first use" if runtime.get("prepared")
                     else "prepared on first use")
            console.print(f"runtime      {escape(str(runtime['runtime']))} ({state}): {escape(str(runtime['reason']))}")
            if runtime.get("device_reason"):
                device, why = escape(str(runtime.get("device"))), escape(str(runtime["device_reason"]))
                console.print(f"device       {device}: {why}")
    ocr = data.get("ocr")  # an older gateway does not say
    if ocr:
        console.print(f"ocr          {escape(str(ocr['setting']))}  {escape(str(ocr['engine']))}")
    for advisory in data["advisories"]:
        console.print(f"[yellow]advisory[/]: {escape(advisory)}")
    console.print()
    print_table(console, [("setting", "left"), ("value", "left"), ("source", "left"), ("environment", "left")],
                [[row["name"], str(row["value"]), row["source"], row["env"]] for row in data["settings"]])


PREVIEW_CHARS = 320


def _where(rank: int | None, score: float | None, name: str) -> str:
    return f"{name} #{rank} ({score:.3g})" if rank is not None else f"{name} —"


def mmr_marker(moved: int) -> str:
    """"MMR ▲n" / "MMR ▼n" for a hit MMR moved up or down, "" for one it left in place."""
    if moved > 0:
        return f"MMR ▲{moved}"
    if moved < 0:
        return f"MMR ▼{-moved}"
    return ""


def duplicate_marker(hit: Hit, hits: Sequence[Hit]) -> str:
    """"≈ near-duplicate of #N" for a hit MMR demoted as a near-copy of hit N, "" otherwise."""
    if hit.duplicate_of is None:
        return ""
    for other in hits:
        if other.passage_ref == hit.duplicate_of:
            return f"≈ near-duplicate of #{other.rank}"
    return "≈ near-duplicate of a higher hit"


ANSWER_STYLE = "underline"            # the best-answer span inside a passage preview (CLI and TUI alike)
ANSWER_PASSAGE_STYLE = "bold white on dark_green"   # the same span inside the passage view's yellow range
WORD_STYLE = "bold yellow"            # the query's words


def answer_range(hit: Hit) -> tuple[int, int] | None:
    """The hit's best-answer span (document characters) within its passage, in passage characters; None when the
    engine gives none (`answer_span` is None on a Hit without query text, and from older gateways)."""
    if hit.answer_span is None:
        return None
    a, b = hit.answer_span
    a, b = max(a, hit.char_start) - hit.char_start, min(b, hit.char_end) - hit.char_start
    return (a, b) if b > a else None


def passage_preview(hit: Hit, spans: list[tuple[int, int]], limit: int = PREVIEW_CHARS,
                    markdown: bool = False) -> Text:
    """The passage with the query's words highlighted (and its best answer, when the hit has one), whitespace
    folded, cut to about `limit` characters; with `markdown`, the markup is left out.

    The window starts a little before the answer, else before the first
    matching word, so a match deep in a long passage is still on screen.
    """
    from .markdown_text import styled_text  # its patterns compile on import: `kx datasets list` never needs them

    answer = answer_range(hit)
    marks = [(a, b, ANSWER_STYLE) for a, b in ([answer] if answer else [])] + [(a, b, WORD_STYLE) for a, b in spans]
    # cleaned here, one character for one, so the marks' offsets still fit (rich would drop BEL and CR,
    # shifting them, and pass ESC on)
    full, where = styled_text(terminal_safe(hit.text, keep_layout=True), marks, markdown)
    plain = full.plain
    focus = where(answer[0]) if answer else (where(spans[0][0]) if spans else 0)
    start = 0
    if focus > limit * 0.6:
        start = plain.rfind(" ", 0, max(0, focus - 60)) + 1
    end = min(len(plain), start + limit)
    out = Text()
    if start > 0:
        out.append("… ", style="dim")
    out.append_text(full[start:end])
    if end < len(plain):
        out.append(" …", style="dim")
    folded = Text()
    for part in out.split("\n", allow_blank=True):
        if folded.plain and part.plain.strip():
            folded.append(" ")
        folded.append_text(part)
    return folded


def shown_title(name: str, title: str | None) -> str | None:
    """The document's title, when it says more than its name: not for "install" titled "Install", nor for
    "refunds-and-returns.md" titled "Refunds and Returns" (case, "-", "_" and a file's extension aside)."""
    if not title or not title.strip():
        return None
    title = " ".join(title.split())
    last = name.rsplit("/", 1)[-1]
    stem = last.rsplit(".", 1)[0] if re.fullmatch(r".+\.[A-Za-z0-9]{1,5}", last) else last
    return None if _said(title) in (_said(stem), _said(last)) else title


def _said(text: str) -> str:
    return " ".join(re.split(r"[\s_-]+", text.casefold())).strip()


def chunk_and_place(hit: Hit) -> str:
    """"[chunk 3/12] p. 6–7 · 3 Model › 3.1 LRS model": the chunk label, then pages and section when known."""
    return f"{hit.label} {hit.provenance}" if hit.provenance else hit.label


def _quoted(text: str) -> str:
    """`text` as one shell word (the question in a command to paste)."""
    import shlex

    return shlex.quote(text)


def _no_hits_hint(mode: str) -> str:
    """What to try after an empty answer, true for the mode that was asked."""
    if mode == RetrievalMode.SPARSE:
        return "Try other words, or --mode dense (or hybrid) for paraphrases."
    if mode == RetrievalMode.DENSE:
        return "Try other words, or --mode sparse for exact terms."
    return "Try other words."


def citation(hit: Hit, dataset: str) -> str:
    """One line that finds the passage again: document (and title), pages and section, chunk, characters, dataset.

    e.g. `refunds.md — Refunds and returns, p. 2 · 2 Refunds, [chunk 2/6], chars 440–1218 (handbook)`
    """
    title = shown_title(hit.document_name, hit.document_title)
    parts = [hit.document_name + (f" — {title}" if title else "")]
    if hit.provenance:
        parts.append(hit.provenance)
    parts += [hit.label, f"chars {hit.char_start}–{hit.char_end}"]
    where = f"{dataset}, {hit.source_path}" if hit.source_path else dataset
    return ", ".join(parts) + f" ({where})"


def print_query(console: _RichConsole, result: QueryResult, spans_of: Callable[[str], list[tuple[int, int]]],
                where: Sequence[str] = (), raw: bool = False) -> None:
    """A query's answer for a person; `where`: the filters it was asked with (an empty answer names them);
    `raw`: each passage's stored text as it is (Markdown marks kept) instead of as read."""
    mmr = "MMR on" if result.rerank else "MMR off"
    console.print(f"[bold]{escape(result.dataset)}[/] · {result.mode} · {mmr} · k={result.k} · "
                  f"{len(result.hits)} hit(s) · {result.timings_ms.get('total', 0):.0f} ms")
    for note in result.notes:
        console.print(f"[yellow]note[/]: {escape(note)}")
    if result.expanded_terms is not None:
        added = ", ".join(result.expanded_terms) if result.expanded_terms else "no new terms"
        console.print(f"[dim]expanded with: {escape(added)}[/]")
    if not result.hits:
        if where:
            shown = " ".join(f"--where {w}" for w in where)
            console.print(f"No passage matches the filter {escape(shown)}. Try it without: kx datasets query "
                          f"{escape(result.dataset)} {escape(_quoted(result.query or ''))}")
        else:
            console.print(f"No passage matches. {_no_hits_hint(result.mode)}")
        return
    for hit in result.hits:
        ranks = " · ".join(_where(r, s, n) for r, s, n in ((hit.dense_rank, hit.dense_score, "dense"),
                                                              (hit.sparse_rank, hit.sparse_score, "sparse")))
        if hit.sentence_rank is not None:  # hybrid's third list: the head ranked by best sentence
            ranks += f" · sentence #{hit.sentence_rank}"
        if hit.lead_ratio is not None:  # hybrid's lead vote: sparse's best by a wide BM25 margin, counted twice
            ranks += f" · sparse lead ×{hit.lead_ratio:.2f}"
        title = shown_title(hit.document_name, hit.document_title)
        titled = f" [dim]— {escape(terminal_safe(title))}[/]" if title else ""
        if hit.superseded_by:  # --versions all: an older version of its lineage
            titled += f" [yellow](v{hit.version}, superseded by {hit.superseded_by[:12]})[/]"
        console.print()
        console.print(
            f"[bold]{hit.rank:>2}[/]  {hit.score:.4f}  [cyan]{escape(terminal_safe(hit.document_name))}[/]{titled}  "
            f"{escape(chunk_and_place(hit))}  chars {hit.char_start}–{hit.char_end}  "
            f"[dim]{ranks}{' · ' + mmr_marker(hit.mmr_moved) if hit.mmr_moved else ''}[/]"
            + (f"  [magenta]{duplicate_marker(hit, result.hits)}[/]" if hit.duplicate_of else ""),
            highlight=False,
        )
        from .markdown_text import looks_like_markdown

        # Markdown as its text (headings, emphasis and links without their marks), unless --raw
        preview = passage_preview(hit, spans_of(hit.text),
                                  markdown=not raw and looks_like_markdown(hit.source_path, hit.text))
        preview.pad_left(4)
        console.print(preview)


def print_eval(console: _RichConsole, report: EvalReport) -> None:
    from engine.evaluation import MEASURE_LABELS, MEASURES

    console.print(f"[bold]{escape(report.dataset)}[/]: {report.judged_queries} judged queries "
                  f"(of {report.queries})")
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("measure")
    for variant in report.scores:
        table.add_column(variant, justify="right")
    for measure in MEASURES:
        values = [report.scores[v][measure] for v in report.scores]
        best = max(values)
        table.add_row(MEASURE_LABELS[measure], *[f"[bold]{x:.4f}[/]" if x == best else f"{x:.4f}" for x in values])
    table.add_row("ms/query", *[f"{report.mean_ms[v]:.1f}" for v in report.scores])
    console.print(table)
