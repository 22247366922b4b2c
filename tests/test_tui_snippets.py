"""Snippets as a reader sees them: Markdown shown as its text (code kept), the query's words and the hit's
best-answer span (`Hit.answer_span`, when the engine gives one) highlighted in the hit list and the passage view.

The tests marked slow drive the whole Textual app (seconds each); the others check its parts.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import Input, Static

from engine import Engine, load_settings
from engine.records import Hit, QueryResult
from engine.text.inputs import from_file
from kx_tui.markdown_text import looks_like_markdown, styled_text
from kx_tui.render import ANSWER_STYLE, WORD_STYLE, passage_preview
from kx_tui.tui.app import SAMPLES, KxApp
from kx_tui.tui.screens.hit_detail import PassageDetailScreen
from kx_tui.tui.widgets.results import ResultsList

from .helpers import HashEmbedder

MARKDOWN = ("# Refunds and Returns\n\nNorthwind **sells** two _kinds_ of [Tern loggers](https://tern.example). "
            "Run `kx_run --fast **now**` first.\n\n```bash\nrm -rf *.tmp __cache__\n```\n## Th")


def _with_answer(hit: Hit, span: tuple[int, int] | None) -> Hit:
    """`hit` carrying `answer_span`: the engine's own field once it has one, else an attribute beside the others."""
    if "answer_span" in {f.name for f in dataclasses.fields(Hit)}:
        return dataclasses.replace(hit, answer_span=span)  # type: ignore[call-arg]

    @dataclasses.dataclass(frozen=True)
    class AnsweredHit(Hit):
        answer_span: tuple[int, int] | None = None

    return AnsweredHit(**{f.name: getattr(hit, f.name) for f in dataclasses.fields(Hit)}, answer_span=span)


def _styles_at(text: Text, index: int) -> set[str]:
    return {str(span.style) for span in text.spans if span.start <= index < span.end}


def test_markdown_shows_as_its_text_and_code_is_kept() -> None:
    marks = [(MARKDOWN.index("sells"), MARKDOWN.index("sells") + 5, WORD_STYLE)]
    out, where = styled_text(MARKDOWN, marks, markdown=True)
    assert out.plain == ("Refunds and Returns\n\nNorthwind sells two kinds of Tern loggers. "
                         "Run kx_run --fast **now** first.\n\nrm -rf *.tmp __cache__\nTh")
    assert "bold" in _styles_at(out, 0)                               # the heading
    assert {"bold", WORD_STYLE} <= _styles_at(out, out.plain.index("sells"))
    assert "italic" in _styles_at(out, out.plain.index("kinds"))
    assert "underline" in _styles_at(out, out.plain.index("Tern"))
    assert "cyan" in _styles_at(out, out.plain.index("kx_run"))       # code, its ** untouched
    assert out.plain[where(MARKDOWN.index("Tern"))] == "T"
    plain, same = styled_text("2*3*4 and snake_case_name", (), markdown=True)
    assert plain.plain == "2*3*4 and snake_case_name"                 # not emphasis
    assert same(5) == 5
    assert looks_like_markdown("notes/a.md", "plain") and looks_like_markdown(None, "## Heading\ntext")
    assert not looks_like_markdown("a.txt", "2 * 3 = 6, see [1]")


def test_the_preview_highlights_the_answer_and_starts_near_it() -> None:
    text = "Filler words about nothing in particular. " * 12 + "Refunds take **five working days**. The end."
    hit = Hit(rank=1, score=1.0, text=text, passage_ref="p", document_ref="d", document_name="refunds",
              chunk_index=0, chunk_count=1, char_start=100, char_end=100 + len(text), dense_rank=1,
              dense_score=0.9, sparse_rank=1, sparse_score=3.0, fused_score=0.03, fused_rank=1, mmr_moved=0)
    plain = passage_preview(hit, [], markdown=True)
    assert plain.plain.startswith("Filler") and not any(ANSWER_STYLE == str(s.style) for s in plain.spans)
    start = 100 + text.index("Refunds take")
    answered = _with_answer(hit, (start, start + len("Refunds take **five working days**")))
    shown = passage_preview(answered, [], markdown=True)
    assert shown.plain.startswith("… ") and "Refunds take five working days." in shown.plain
    assert ANSWER_STYLE in _styles_at(shown, shown.plain.index("five"))
    assert ANSWER_STYLE not in _styles_at(shown, shown.plain.index("The end"))
    outside = _with_answer(hit, (0, 50))                 # a span before the passage: nothing to mark
    assert not any(ANSWER_STYLE == str(s.style) for s in passage_preview(outside, []).spans)


@pytest.mark.slow
async def test_the_hit_list_and_passage_view_show_markdown_as_text_and_the_answer(kx_home: Path) -> None:
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    engine.ingest("handbook", [from_file(f, engine.settings.max_document_bytes) for f in sorted(SAMPLES.glob("*.md"))])

    class Answering:
        """The engine, its hits carrying a best-answer span: the passage's first sentence."""

        def __init__(self, inner: Engine) -> None:
            self._inner = inner

        def query(self, *args, **kwargs) -> QueryResult:
            result = self._inner.query(*args, **kwargs)
            hits = []
            for hit in result.hits:
                end = hit.text.find(". ")
                hits.append(_with_answer(hit, (hit.char_start, hit.char_start + end + 1) if end > 0 else None))
            return dataclasses.replace(result, hits=hits)

        def __getattr__(self, name):
            return getattr(self._inner, name)

    app = KxApp(Answering(engine), settings=engine.settings, samples=None)  # type: ignore[arg-type]
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(3):
            await pilot.pause()
            await app.workers.wait_for_complete()
        app.query_one("#query", Input).focus()
        await pilot.press(*"refund policy", "enter")
        for _ in range(3):
            await pilot.pause()
            await app.workers.wait_for_complete()
        results = app.query_one(ResultsList)
        hits = app.screen.result.hits
        assert hits and any("#" in h.text or "**" in h.text for h in hits)   # the raw passages carry markup
        for i in range(len(hits)):
            preview = results.get_option_at_index(i).prompt.renderables[1].renderable
            assert "**" not in preview.plain and "## " not in preview.plain and not preview.plain.startswith("#")
        first = results.get_option_at_index(0).prompt.renderables[1].renderable
        assert any(str(s.style) == ANSWER_STYLE for s in first.spans)
        await pilot.press("escape", "enter")
        for _ in range(3):
            await pilot.pause()
            await app.workers.wait_for_complete()
        screen = app.screen
        assert isinstance(screen, PassageDetailScreen)
        shown = screen.query_one("#detail-hit", Static).content
        assert isinstance(shown, Text) and "**" not in shown.plain
        assert any("dark_green" in str(s.style) for s in shown.spans)
    engine.close()
