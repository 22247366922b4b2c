"""Markdown: today's UTF-8 text, with ATX headings as sections and YAML front matter as metadata.

Front matter (`---` on the very first line, closed by `---` or `...`) is
metadata, not body text: its `title` becomes the document's title (without
one, the first heading's words do) and the rest goes into `metadata`. It is cut off the text, so the stored text, the
passages and every character range start after it. Headings inside fenced
code blocks are code, not sections. Setext headings (underlined with `===`)
are not read as sections.

Runs in-process (it is cheap and needs no parser beyond PyYAML for the front matter).
"""

from __future__ import annotations

import re

from ..errors import invalid
from ..formats import MARKDOWN, media_type
from ..text.inputs import DocumentInput, extract_text
from .base import Extracted, Section

EXTRACTOR_ID = "markdown/2"   # 2: a document without front matter is titled by its first heading

_FRONT_OPEN = re.compile(r"\A---[ \t]*\r?\n")
_FRONT_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.MULTILINE)
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def extract_markdown(doc: DocumentInput) -> Extracted:
    label = doc.source_path or doc.name
    raw = extract_text(doc)
    text, metadata, notes = _split_front_matter(raw, label)
    if not text.strip():
        raise invalid(f"{label} holds only YAML front matter; there is no body text to index")
    sections = tuple(_headings(text))
    # the front matter's title, else the first heading's words (a README's `# Refunds and Returns`)
    title = metadata.pop("title", None) or (sections[0].title if sections else None)
    return Extracted(text=text, media_type=media_type(MARKDOWN), sections=sections, title=title,
                     notes=tuple(notes), extractor=EXTRACTOR_ID, metadata=metadata)


def _split_front_matter(raw: str, label: str) -> tuple[str, dict[str, str], list[str]]:
    opened = _FRONT_OPEN.match(raw)
    if not opened:
        return raw, {}, []
    closed = _FRONT_CLOSE.search(raw, opened.end())
    if not closed:
        return raw, {}, []  # a lone `---` rule at the top, not front matter
    block, body = raw[opened.end():closed.start()], raw[closed.end():].lstrip("\r\n")
    import yaml  # deferred: only Markdown with front matter pays for it

    try:
        loaded = yaml.safe_load(block)
    except yaml.YAMLError:
        return body, {}, [f"{label}: its front matter is not valid YAML, so its title was not read"]
    if not isinstance(loaded, dict):
        return body, {}, []
    metadata = {str(k): str(v) for k, v in loaded.items() if isinstance(v, (str, int, float, bool)) and str(v).strip()}
    return body, metadata, []


def _headings(text: str) -> list[Section]:
    sections: list[Section] = []
    fence: str | None = None
    offset = 0
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        opener = _FENCE.match(bare)
        if fence is not None:
            if opener and opener.group(1)[0] == fence[0] and len(opener.group(1)) >= len(fence) \
                    and not bare.strip().lstrip(fence[0]):
                fence = None
        elif opener:
            fence = opener.group(1)
        else:
            heading = _ATX.match(bare)
            if heading and (heading.group(2) or "").strip():
                sections.append(Section(offset + len(bare) - len(bare.lstrip()), len(heading.group(1)),
                                        heading.group(2).strip()))
        offset += len(line)
    return sections
