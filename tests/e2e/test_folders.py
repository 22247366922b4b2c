"""The end-to-end half of tests/unit/test_folders.py (a model, processes or servers there):
Folders in one command: `kx datasets ingest NAME FOLDER` walks it with the watcher's own rules.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..helpers import run_cli
from ..unit.test_folders import _tree  # noqa: F401 - helpers and fixtures


@pytest.mark.slow
def test_cli_ingests_a_folder_and_lists_each_files_outcome(tmp_path: Path, kx_home: Path) -> None:
    root = _tree(tmp_path / "docs")
    (root / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    result = run_cli("datasets", "ingest", "tree", str(root), "--json")
    report = json.loads(result.stdout)
    outcomes = {r["name"]: r["status"] for r in report["results"]}
    assert outcomes == {"api/deep/errors": "added", "api/index": "added", "broken": "refused",
                        "guide/index": "added", "notes": "added"}
    assert result.code != 0  # one refused file: the command says so, the others are in
    hits = json.loads(run_cli("datasets", "query", "tree", "bearer token endpoint", "--json", "-k", "1").stdout)
    assert hits["hits"][0]["document_name"] == "api/index"

    nothing = tmp_path / "nothing"
    nothing.mkdir()
    refused = run_cli("datasets", "ingest", "none", str(nothing), "--json")
    assert refused.code == 3 and json.loads(refused.stdout)["results"][0]["status"] == "refused"
    assert not (kx_home / "datasets" / "none").exists()
