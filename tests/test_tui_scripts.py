"""The commands as scripts meet them: tables that fit a terminal by leaving columns out and print every value
whole into a pipe; the question after the dataset's name; extraction notes in ingest results.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from engine.records import DocumentSummary
from kx_tui.render import fit_columns, print_documents

from .helpers import run_cli

LONG = "guide/installation/index-of-every-supported-platform-and-its-quirks"


def _documents() -> list[DocumentSummary]:
    return [DocumentSummary(ref="a" * 64, name=LONG, source_path=f"/srv/docs/{LONG}.md", media_type="text/markdown",
                            size=12_345, passages=7, ingested_at=1_700_000_000.0, title=None, pages=None),
            DocumentSummary(ref="b" * 64, name="faq", source_path="/srv/docs/faq.md", media_type="text/markdown",
                            size=800, passages=1, ingested_at=1_700_000_000.0, title=None, pages=None)]


def _printed(terminal: bool, width: int) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=terminal, color_system=None, highlight=False)
    print_documents(console, "docs", _documents(), 0, 2)
    return out.getvalue()


def test_off_a_terminal_every_value_is_printed_whole() -> None:
    text = _printed(terminal=False, width=80)
    assert LONG in text and f"/srv/docs/{LONG}.md" in text and "…" not in text
    header = text.splitlines()[0].split()
    assert header == ["name", "pages", "passages", "size", "type", "ingested", "source"]
    assert all(line == line.rstrip() for line in text.splitlines())   # no padding after the last column


def test_on_a_narrow_terminal_columns_are_left_out_not_names_cut() -> None:
    text = _printed(terminal=True, width=80)
    lines = text.splitlines()
    assert LONG in text and "…" not in text
    assert all(len(line.rstrip()) <= 80 for line in lines), lines
    assert "source" not in lines[0] and "passages" in lines[0]
    assert "left out to fit 80 columns" in text and "source" in text.split("left out")[0].splitlines()[-1]


def test_fit_columns_keeps_the_first_and_skips_what_does_not_fit() -> None:
    widths = {"name": 30, "title": 40, "pages": 5, "size": 6}
    assert fit_columns(widths, ["name", "title", "pages", "size"], 50, gap=2) == ["name", "pages", "size"]
    assert fit_columns(widths, ["name", "title"], 10, gap=2) == ["name"]       # the first whatever the width
    assert fit_columns(widths, ["size", "name"], 200, gap=2) == ["name", "size"]  # in the table's order


@pytest.mark.slow
def test_the_question_follows_the_name_and_ingest_reports_extraction_notes(kx_home: Path, tmp_path: Path) -> None:
    page = tmp_path / "menu.html"
    page.write_text("<html><head><title>Site menu</title></head><body><nav><a href='/'>Home</a> "
                    "<a href='/about'>About us</a></nav></body></html>")
    notes = tmp_path / "refunds.md"
    notes.write_text("# Refunds\n\nCustomers may ask for a refund within 30 days of purchase.\n")
    ingested = run_cli("datasets", "ingest", "docs", str(page), str(notes), "--json")
    assert ingested.code == 0, ingested.stderr
    results = {r["name"]: r for r in json.loads(ingested.stdout)["results"]}
    assert results["refunds"]["notes"] == []
    assert any("no main content" in n for n in results["menu"]["notes"]), results["menu"]
    again = tmp_path / "menu2.html"
    again.write_text(page.read_text().replace("About us", "About the company"))
    human = run_cli("datasets", "ingest", "docs", str(again))
    assert human.code == 0, human.stderr
    assert "note: menu2: " in human.stdout and "no main content" in human.stdout

    positional = run_cli("datasets", "query", "docs", "how long to ask for a refund?", "--json")
    flagged = run_cli("datasets", "query", "docs", "--text", "how long to ask for a refund?", "--json")
    assert positional.code == flagged.code == 0, positional.stderr + flagged.stderr
    a, b = json.loads(positional.stdout), json.loads(flagged.stdout)
    assert a["query"] == b["query"] == "how long to ask for a refund?"
    assert [h["passage_ref"] for h in a["hits"]] == [h["passage_ref"] for h in b["hits"]]
    assert a["hits"][0]["document_name"] == "refunds"
    unquoted = run_cli("datasets", "query", "docs", "refund", "within", "days", "--json")
    assert unquoted.code == 0 and json.loads(unquoted.stdout)["query"] == "refund within days"
    both = run_cli("datasets", "query", "docs", "refund", "--text", "refund")
    neither = run_cli("datasets", "query", "docs")
    assert both.code == neither.code == 2
    assert "not both" in both.stderr and 'kx datasets query NAME "your question"' in neither.stderr
