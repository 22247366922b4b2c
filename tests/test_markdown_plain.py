"""Markdown as text where kx speaks to a reader (issue 41 item 6): the engine's reading (MCP, the agent) and
the CLI's agree, code is kept, and the stored text is never changed."""

from __future__ import annotations

import pytest

from engine.text.markdown_plain import as_text, is_markdown, shown
from kx_tui.markdown_text import styled_text


@pytest.mark.parametrize("source, text", [
    ("# Refunds and Returns\n\nUse the **RMA-7** form.", "Refunds and Returns\n\nUse the RMA-7 form."),
    ("## The window\n> *Thirty* days, see [the policy](http://x/p).", "The window\nThirty days, see the policy."),
    ("Run `**not bold**` then ![logo](l.png) _done_.", "Run **not bold** then logo done."),
    ("```\n# a comment, not a heading\n```\nafter", "# a comment, not a heading\nafter"),
])
def test_markdown_reads_as_its_text_and_code_stays_as_written(source: str, text: str) -> None:
    assert as_text(source) == text
    assert styled_text(source, markdown=True)[0].plain == text   # the CLI's and TUI's reading: the same words


def test_only_markdown_is_read_as_markdown() -> None:
    assert is_markdown("/docs/refunds.md", "plain words") and is_markdown(None, "# A heading")
    assert shown("/docs/notes.txt", "2 * 3 * 4 and snake_case_name") == "2 * 3 * 4 and snake_case_name"


def test_mcp_text_the_agent_and_the_title_read_a_markdown_file_as_text(hash_engine, tmp_path) -> None:
    from engine.server.mcp_tools import KxTools
    from engine.text.inputs import from_file

    path = tmp_path / "refunds.md"
    path.write_text("# Refunds and Returns\n\nUse the **RMA-7** form to return a logger within *thirty* days.\n")
    hash_engine.ingest("hb", [from_file(path, 10**6)])
    assert hash_engine.list_documents("hb")[0].title == "Refunds and Returns"   # the first heading, no front matter
    answer = KxTools(hash_engine).search("hb", "RMA-7 form", mode="sparse")
    text = answer.content[0].text
    assert "Use the RMA-7 form to return a logger within thirty days." in text and "**" not in text
    assert "**RMA-7**" in answer.structured_content["hits"][0]["text"]   # the stored text, for a program
    run = hash_engine.run_agent("which form returns a logger", "hb")
    assert "RMA-7" in run.answer and "**" not in run.answer, run.answer
