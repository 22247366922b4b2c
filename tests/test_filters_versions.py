"""The end-to-end half of tests/unit/test_filters_versions.py (a model, processes or servers there):
Filters (`--where`) and versions: narrowed inside both retrievers, the latest version of each lineage by default.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Status


@pytest.mark.slow
def test_cli_versions_and_where_through_the_real_model(tmp_path: Path) -> None:
    import json

    from .helpers import run_cli

    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "other.md").write_text("The canteen serves soup on Mondays.")
    for hour in ("eight", "nine", "ten"):  # a file edited twice, the folder ingested after each edit
        (docs / "guide" / "hours.md").write_text(f"The office opens at {hour} in the morning.")
        assert run_cli("datasets", "ingest", "hb", str(docs)).code == 0
    latest = json.loads(run_cli("datasets", "query", "hb", "when does the office open", "--json").stdout)
    assert [h["text"] for h in latest["hits"] if h["document_name"] == "guide/hours"] == [
        "The office opens at ten in the morning."]
    every = json.loads(run_cli("datasets", "query", "hb", "when does the office open", "--versions", "all",
                               "--json").stdout)
    assert sorted(h["version"] for h in every["hits"] if h["document_name"] == "guide/hours") == [1, 2, 3]
    narrowed = json.loads(run_cli("datasets", "query", "hb", "soup", "--where", "name:guide/*", "--versions", "all",
                                  "--json", "-k", "3").stdout)
    assert len(narrowed["hits"]) == 3 and {h["document_name"] for h in narrowed["hits"]} == {"guide/hours"}
    bad = run_cli("datasets", "query", "hb", "soup", "--where", "colour:red")
    assert bad.code == Status.INVALID_ARGUMENT.exit_code and "--where type:pdf" in bad.stderr
    listed = json.loads(run_cli("datasets", "list", "--json").stdout)[0]
    assert (listed["documents"], listed["versions"]) == (2, 4)
