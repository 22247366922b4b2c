"""Markdown as plain text, for the engine's own words to a reader: `kx mcp`'s text and the agent's answer.

The same reading as the CLI's and TUI's (kx_tui/markdown_text.py, which also styles and maps positions):
`# Heading` is its words, `**bold**`, `*emphasis*` and `_emphasis_` their words, `[text](url)` and
`![alt](src)` their text, `> ` quote marks and code fences left out; code (`` `x` `` and fenced blocks) is
kept as written. The stored text is never changed: JSON fields (`structuredContent`, `--json`) carry it
as stored, and `--raw` shows it.
"""

from __future__ import annotations

import re

# FENCE, INLINE_CODE, QUOTE and STRONG are shared with the TUI's styling (kx_tui/markdown_text.py)
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})[^\n]*\n(.*?)(?:^ {0,3}\1[ \t]*(?:\n|\Z)|\Z)", re.M | re.S)
INLINE_CODE = re.compile(r"(`+)([^`\n]|[^`\n].*?[^`\n])\1")
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", re.M)
QUOTE = re.compile(r"^ {0,3}>[ \t]?", re.M)
_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")
STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_EMPHASIS = (re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])"),
             re.compile(r"(?<![\w_])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![\w_])"))
_SIGNS = re.compile(r"^ {0,3}#{1,6}[ \t]|\*\*\S|\]\(|^ {0,3}(`{3}|~{3})", re.M)
_SUFFIXES = (".md", ".markdown", ".mdx", ".mkd")
_HELD = re.compile("\x00(\\d+)\x00")


def is_markdown(source_path: str | None, text: str) -> bool:
    """A Markdown file by its name, or text that carries Markdown's unmistakable signs (headings, **, links)."""
    if source_path and source_path.lower().endswith(_SUFFIXES):
        return True
    return bool(_SIGNS.search(text))


def as_text(text: str) -> str:
    """`text` with its Markdown marks left out (see the module's head); code kept verbatim."""
    held: list[str] = []

    def hold(code: str) -> str:
        held.append(code)
        return f"\x00{len(held) - 1}\x00"

    out = FENCE.sub(lambda m: hold(m.group(2)), text.replace("\x00", ""))
    out = INLINE_CODE.sub(lambda m: hold(m.group(2)), out)
    out = _HEADING.sub(r"\1", out)
    out = QUOTE.sub("", out)
    out = _LINK.sub(r"\1", out)
    out = STRONG.sub(r"\2", out)
    for pattern in _EMPHASIS:
        out = pattern.sub(r"\1", out)
    return _HELD.sub(lambda m: held[int(m.group(1))], out)


def shown(source_path: str | None, text: str) -> str:
    """A passage's text for a reader: as text when it is Markdown, else as stored."""
    return as_text(text) if is_markdown(source_path, text) else text
