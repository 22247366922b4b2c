"""One document: its provenance, and its whole text with each passage marked where it lies.

Passages may overlap (chunk_overlap): the text is cut at each passage's start
into one block per passage, headed by its label; the part a block shares with
the passage before it is underlined. n / p jump from passage to passage.
"""

from __future__ import annotations

from datetime import datetime

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from engine.backend import Backend
from engine.errors import KxError
from engine.records import DocumentSummary, PassageSpan

from ...markdown_text import looks_like_markdown, styled_text
from ...render import size_text, terminal_safe
from ..messages import DocumentLoaded
from ..widgets.footer import KeysFooter
from .keys import HELP, KeysScreen, back_keys

_SHADES = ("on #1d2b3a", "on #2e2338")  # alternate passages, so a boundary shows without a label


def provenance_table(document: DocumentSummary) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="dim", no_wrap=True)
    table.add_column(overflow="fold")
    if document.title:
        table.add_row("title", Text(terminal_safe(document.title)))
    table.add_row("source", Text(terminal_safe(document.source_path or "— (given as text or bytes)")))
    table.add_row("type", f"{document.media_type} · {size_text(document.size)}"
                          + (f" · {document.pages} pages" if document.pages is not None else ""))
    table.add_row("passages", str(document.passages))
    if document.ocr_confidence is not None:  # scanned pages or an image: its text may hold misread words
        table.add_row("read by", Text(f"OCR (mean confidence {document.ocr_confidence:.2f}; misreadings possible)",
                                      style="yellow"))
    table.add_row("ingested", datetime.fromtimestamp(document.ingested_at).strftime("%Y-%m-%d %H:%M:%S")
                  if document.ingested_at else "—")
    table.add_row("ref", document.ref)
    return table


def passage_heading(span: PassageSpan, shared: int = 0) -> Text:
    """[chunk i/N], its characters, pages and section; and how much of its start the passage before covers too."""
    line = Text(span.label, style="bold magenta")
    line.append(f"  chars {span.char_start}–{span.char_end}", style="dim")
    if shared > 0:
        line.append(f" (first {shared} shared)", style="dim")  # with the passage before; underlined below
    if span.page_start is not None:
        pages = (f"p. {span.page_start}" if span.page_end in (None, span.page_start)
                 else f"pp. {span.page_start}–{span.page_end}")
        line.append(f"  {pages}", style="dim")
    if span.section:
        line.append(f"  § {terminal_safe(span.section)}", style="dim")
    line.no_wrap, line.overflow = True, "ellipsis"   # a narrow view cuts the section's end, never wraps the label
    return line


def shared_starts(passages: list[PassageSpan]) -> dict[int, int]:
    """chunk index -> how many characters at the passage's start an earlier passage also covers (chunk_overlap)."""
    out: dict[int, int] = {}
    covered = 0
    for span in sorted(passages, key=lambda p: (p.char_start, p.chunk_index)):
        out[span.chunk_index] = max(0, min(covered, span.char_end) - span.char_start)
        covered = max(covered, span.char_end)
    return out


def blocks(text: str, passages: list[PassageSpan], markdown: bool = False) -> list[tuple[PassageSpan | None, Text]]:
    """The text as (passage, marked text) blocks in order; None for text no passage covers (before the first).
    With `markdown`, the markup is left out (headings, emphasis and links shown as their text), as the hit list
    and the passage view show it; each block still starts where its passage does."""
    text = terminal_safe(text, keep_layout=True)   # stored: shown, not obeyed; one for one, so spans still fit
    spans = sorted(passages, key=lambda p: (p.char_start, p.chunk_index))
    pieces: list[tuple[PassageSpan | None, int, int]] = []   # each block's span and its characters in `text`
    marks: list[tuple[int, int, str]] = []
    if not spans or spans[0].char_start > 0:
        first = spans[0].char_start if spans else len(text)
        pieces.append((None, 0, first))
        marks.append((0, first, "dim"))
    covered = 0  # how far the passages so far reach
    for i, span in enumerate(spans):
        end = spans[i + 1].char_start if i + 1 < len(spans) else len(text)
        shade = _SHADES[i % 2]
        shared = min(max(covered, span.char_start), end)   # [start, shared) also belongs to earlier passages
        inside = min(max(span.char_end, shared), end)       # [shared, inside) is this passage's own
        marks += [(span.char_start, shared, f"underline {shade}"), (shared, inside, shade),
                  (inside, end, "dim")]                       # past its end, before the next: in no passage
        covered = max(covered, span.char_end)
        pieces.append((span, span.char_start, end))
    full, where = styled_text(text, [m for m in marks if m[1] > m[0]], markdown)
    return [(span, full[where(a):where(b)]) for span, a, b in pieces]


class DocumentScreen(KeysScreen):
    DEFAULT_CSS = """
    DocumentScreen > #document-title { padding: 0 1; background: $primary-darken-2; text-style: bold; }
    DocumentScreen > #document-provenance { height: auto; padding: 0 1; border-bottom: solid $primary-darken-2; }
    DocumentScreen > #document-body { padding: 0 1; }
    /* Textual's Static wraps a rich Text whatever its no_wrap says: the heading's own rule keeps it one line */
    DocumentScreen .passage-heading { margin-top: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """
    BINDINGS = [
        *back_keys(),
        Binding("n", "next_passage", "Next passage", tooltip="scroll to the next passage"),
        Binding("p", "previous_passage", "Previous passage", tooltip="scroll to the previous passage"),
        HELP,
    ]
    HELP_TITLE = "document"

    def __init__(self, backend: Backend, dataset: str, document: DocumentSummary) -> None:
        super().__init__()
        self.backend = backend
        self.dataset = dataset
        self.document = document
        self.text: str | None = None
        self.passages: list[PassageSpan] = []
        self.current = -1   # the passage scrolled to with n / p
        self._left_at = 0.0  # the scroll position n / p left the view at

    def compose(self) -> ComposeResult:
        yield Static(Text.assemble((terminal_safe(self.document.name), "bold cyan"), f"  · {self.dataset}"),
                     id="document-title")
        yield Static(provenance_table(self.document), id="document-provenance")
        with VerticalScroll(id="document-body"):
            yield Static("loading…", id="document-loading")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, group="document", exit_on_error=False)
    def load(self) -> None:
        try:
            text = self.backend.document_text(self.dataset, self.document.ref)
            passages = self.backend.document_passages(self.dataset, self.document.ref)
        except KxError as exc:   # e.g. the dataset was deleted on disk: said, and "loading…" goes
            self.app.call_from_thread(self._not_loaded, exc.message)
            return
        self.post_message(DocumentLoaded(text, passages))

    def _not_loaded(self, message: str) -> None:
        self.app.notify(message, severity="error")
        self.query_one("#document-loading", Static).update("the document could not be loaded (Esc goes back)")

    async def on_document_loaded(self, message: DocumentLoaded) -> None:
        self.text, self.passages = message.text, sorted(message.passages, key=lambda p: p.chunk_index)
        body = self.query_one("#document-body", VerticalScroll)
        await body.remove_children()
        widgets = []
        shared = shared_starts(message.passages)
        markdown = self.document.media_type == "text/markdown" or looks_like_markdown(self.document.source_path,
                                                                                      message.text)
        for span, block in blocks(message.text, message.passages, markdown):
            if span is not None:
                widgets.append(Static(passage_heading(span, shared[span.chunk_index]), classes="passage-heading",
                                      id=f"passage-{span.chunk_index}"))
            widgets.append(Static(block))
        await body.mount_all(widgets)

    def _go_to_passage(self, index: int) -> None:
        if not self.passages:
            return
        self.current = max(0, min(len(self.passages) - 1, index))
        target = self.query_one(f"#passage-{self.passages[self.current].chunk_index}")
        body = self.query_one("#document-body")
        body.scroll_to_widget(target, top=True, animate=False, immediate=True)
        self._left_at = body.scroll_y

    def _heading_rows(self) -> list[int]:
        return [self.query_one(f"#passage-{p.chunk_index}").virtual_region.y for p in self.passages]

    def _where_left(self) -> bool:
        """True while the view is where n / p last put it (the user has not scrolled since)."""
        return self.current >= 0 and self.query_one("#document-body").scroll_y == self._left_at

    def action_next_passage(self) -> None:
        """The next passage: after the one n / p went to, or else the first whose heading is below the view's top
        line (a heading at the top is the passage being read, so the first n moves on from the first passage)."""
        if not self.passages:
            return
        if self._where_left():
            self._go_to_passage(self.current + 1)
            return
        top = self.query_one("#document-body").scroll_y
        below = [i for i, row in enumerate(self._heading_rows()) if row > top + 1]
        self._go_to_passage(below[0] if below else len(self.passages) - 1)

    def action_previous_passage(self) -> None:
        if not self.passages:
            return
        if self._where_left():
            self._go_to_passage(self.current - 1)
            return
        top = self.query_one("#document-body").scroll_y
        above = [i for i, row in enumerate(self._heading_rows()) if row < top]
        self._go_to_passage(above[-1] if above else 0)
