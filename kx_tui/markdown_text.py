"""Markdown as text: a passage's markup left out (headings, emphasis, links shown as their text, code kept) and
its marks styled, with a map from the source's positions to the shown text's; for the CLI and the TUI alike."""

from __future__ import annotations

import bisect
import re
from typing import Callable, Sequence

from rich.text import Text

from engine.text.markdown_plain import FENCE, INLINE_CODE, QUOTE, STRONG, is_markdown

# what the CLI and the screens ask: the engine's one test of Markdown (its name or its signs)
looks_like_markdown = is_markdown

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", re.M)
_LINK = re.compile(r"(!?)\[([^\]\n]*)\]\(([^)\n]*)\)")
_EMPHASIS = (re.compile(r"(?<![\w*])(\*)(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])"),
             re.compile(r"(?<![\w_])(_)(?=[^\s_])(.+?)(?<=[^\s_])_(?![\w_])"))


class _Markup:
    """Which characters of a Markdown text are markup to leave out (`cuts`), and how the rest is styled."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.dropped = bytearray(len(text))
        self.locked = bytearray(len(text))   # code: kept verbatim, never read as emphasis or links
        self.cuts: list[tuple[int, int]] = []
        self.styles: list[tuple[int, int, str]] = []

    def free(self, a: int, b: int) -> bool:
        return not any(self.locked[a:b])

    def cut(self, a: int, b: int) -> None:
        if b > a:
            self.cuts.append((a, b))
            self.dropped[a:b] = b"\x01" * (b - a)

    def style(self, a: int, b: int, style: str) -> None:
        self.styles.append((a, b, style))

    def lock(self, a: int, b: int) -> None:
        self.locked[a:b] = b"\x01" * (b - a)


def _markup(text: str) -> _Markup:
    m = _Markup(text)
    for match in FENCE.finditer(text):
        body_start, body_end = match.span(2)
        m.cut(match.start(), body_start)
        m.cut(body_end, match.end())
        m.style(body_start, body_end, "cyan")
        m.lock(match.start(), match.end())
    for match in INLINE_CODE.finditer(text):
        if m.free(*match.span()):
            m.cut(match.start(), match.start(2))
            m.cut(match.end(2), match.end())
            m.style(*match.span(2), "cyan")
            m.lock(*match.span())
    for match in _HEADING.finditer(text):
        if m.free(*match.span()):
            m.cut(match.start(), match.start(2))
            m.cut(match.end(2), match.end())
            m.style(*match.span(2), "bold")
    for match in QUOTE.finditer(text):
        if m.free(*match.span()):
            m.cut(*match.span())
    for match in _LINK.finditer(text):
        if m.free(*match.span()):
            m.cut(match.start(), match.start(2))       # "![" or "["
            m.cut(match.end(2), match.end())           # "](target)"
            m.style(*match.span(2), "underline")
    for pattern, style in ((STRONG, "bold"), *((p, "italic") for p in _EMPHASIS)):
        for match in pattern.finditer(text):
            if m.free(*match.span()) and not any(m.dropped[match.start():match.end()]):
                m.cut(match.start(), match.start(2))
                m.cut(match.end(2), match.end())
                m.style(*match.span(2), style)
    return m


def styled_text(text: str, marks: Sequence[tuple[int, int, str]] = (), markdown: bool = False
                ) -> tuple[Text, Callable[[int], int]]:
    """`text` with `marks` ((start, end, style) over its characters) applied, and, with `markdown`, its markup
    left out: headings, emphasis and links shown as their text, code kept. Returns the Text and a function that
    maps a position in `text` to the position of the same character in the Text."""
    if not markdown:
        out = Text(text)
        for a, b, style in marks:
            out.stylize(style, max(0, a), min(len(text), b))
        return out, lambda i: i
    m = _markup(text)
    merged: list[list[int]] = []
    for a, b in sorted(m.cuts):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    starts = [a for a, _b in merged]
    removed_before: list[int] = []   # characters cut before each cut starts
    pieces, last, removed = [], 0, 0
    for a, b in merged:
        removed_before.append(removed)
        pieces.append(text[last:a])
        last, removed = b, removed + b - a
    pieces.append(text[last:])

    def where(i: int) -> int:
        i = max(0, min(len(text), i))
        k = bisect.bisect_right(starts, i) - 1
        if k < 0:
            return i
        a, b = merged[k]
        return i - removed_before[k] - (min(i, b) - a)

    out = Text("".join(pieces))
    for a, b, style in (*m.styles, *marks):
        out.stylize(style, where(a), where(b))
    return out, where
