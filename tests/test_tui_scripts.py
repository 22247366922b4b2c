"""The end-to-end half of tests/unit/test_tui_scripts.py (a model, processes or servers there):
The commands as scripts meet them: tables that fit a terminal by leaving columns out and print every value
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .helpers import run_cli


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
