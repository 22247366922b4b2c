"""A hit in its document: the whole text, the hit's character range highlighted and scrolled to."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from engine.backend import Backend
from engine.errors import KxError
from engine.records import Hit, pages_label

from ...markdown_text import looks_like_markdown, styled_text
from ...render import ANSWER_PASSAGE_STYLE, answer_range, terminal_safe
from ..widgets.footer import KeysFooter
from ..widgets.results import hit_title
from .hit_actions import copy_citation, open_source
from .keys import HELP, KeysScreen, back_keys


class PassageDetailScreen(KeysScreen):
    """The parent document of `hit`, loaded in a worker; Escape goes back."""

    DEFAULT_CSS = """
    PassageDetailScreen > #detail-title {
        padding: 0 1; background: $primary-darken-2; text-style: bold; text-wrap: nowrap; text-overflow: ellipsis;
    }
    PassageDetailScreen > #detail-body { padding: 0 1; }
    """
    BINDINGS = [*back_keys(),
                Binding("y", "copy_citation", "Cite", tooltip="copy the passage's citation"),
                Binding("o", "open_source", "Open file", tooltip="open the source file with the desktop's opener"),
                HELP]
    HELP_TITLE = "passage view"

    def __init__(self, backend: Backend, dataset: str, hit: Hit) -> None:
        super().__init__()
        self.backend = backend
        self.dataset = dataset
        self.hit = hit
        self.document_text: str | None = None

    def compose(self) -> ComposeResult:
        hit = self.hit
        # as the hit list has it: the pages beside the chunk label, the title and section on the line under it
        pages = pages_label(hit.page_start, hit.page_end)
        first = Text.assemble((terminal_safe(hit.document_name), "bold cyan"),
                              f"  {hit.label}" + (f" {pages}" if pages else "") + "  ",
                              (f"chars {hit.char_start}–{hit.char_end}", "dim"))
        second = Text(" · ").join(Text(terminal_safe(p), style=s)
                                  for p, s in ((hit_title(hit), "cyan"), (hit.section, "green")) if p)
        for line in (first, second):
            line.no_wrap, line.overflow = True, "ellipsis"   # cut at the end, never wrapped mid-field
        yield Static(Text("\n").join([first, second]) if second.plain else first, id="detail-title")
        with VerticalScroll(id="detail-body"):
            yield Static("loading…", id="detail-before")
            yield Static("", id="detail-hit")
            yield Static("", id="detail-after")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, group="detail", exit_on_error=False)
    def load(self) -> None:
        try:
            text = self.backend.document_text(self.dataset, self.hit.document_ref)
        except KxError as exc:   # e.g. the dataset was deleted on disk: said, and "loading…" goes
            self.app.call_from_thread(self._not_loaded, exc.message)
            return
        self.app.call_from_thread(self.show_text, text)

    def _not_loaded(self, message: str) -> None:
        self.app.notify(message, severity="error")
        self.query_one("#detail-before", Static).update("the document could not be loaded (Esc goes back)")

    def show_text(self, text: str) -> None:
        """The document around the hit; Markdown shown as its text; the best answer, when there is one, marked."""
        self.document_text = text
        start, end = self.hit.char_start, self.hit.char_end
        marks = [(start, end, "bold black on yellow")]
        answer = answer_range(self.hit)
        if answer is not None:
            marks.append((start + answer[0], start + answer[1], ANSWER_PASSAGE_STYLE))
        # stored: shown, not obeyed (render.terminal_safe), one for one so the marks still fit
        full, where = styled_text(terminal_safe(text, keep_layout=True), marks,
                                  looks_like_markdown(self.hit.source_path, text))
        shown_start, shown_end = where(start), where(end)
        before = self.query_one("#detail-before", Static)
        before.update(full[:shown_start])
        before.display = shown_start > 0
        self.query_one("#detail-hit", Static).update(full[shown_start:shown_end])
        self.query_one("#detail-after", Static).update(full[shown_end:])
        self.call_after_refresh(self._scroll_to_hit)

    def _scroll_to_hit(self) -> None:
        self.query_one("#detail-body").scroll_to_widget(self.query_one("#detail-hit"), top=True, animate=False)

    def action_copy_citation(self) -> None:
        copy_citation(self.app, self.dataset, self.hit)

    def action_open_source(self) -> None:
        open_source(self.app, self.hit)

    @property
    def highlighted_range(self) -> tuple[int, int] | None:
        """The character range shown highlighted, once the text is in."""
        return None if self.document_text is None else (self.hit.char_start, self.hit.char_end)
