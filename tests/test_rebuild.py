"""The end-to-end half of tests/unit/test_rebuild.py (a model, processes or servers there):
`kx datasets rebuild NAME --as NEW`: a new dataset from the stored originals, lineages and retirements kept.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .helpers import run_cli


@pytest.mark.slow
def test_cli_rebuild_to_int8_answers_with_the_same_documents(tmp_path: Path, kx_home: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "guide" / "index.md").write_text("# Guide\n\nRefunds are granted within thirty days of purchase.")
    (docs / "api" / "index.md").parent.mkdir()
    (docs / "api" / "index.md").write_text("# API\n\nThe token endpoint issues bearer tokens for one hour.")
    assert run_cli("datasets", "ingest", "hb", str(docs)).code == 0
    result = run_cli("datasets", "rebuild", "hb", "--as", "hb8", "--set", "embed_model=default-int8", "--json")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["added"] == 2
    listed = {d["name"]: d for d in json.loads(run_cli("datasets", "list", "--json").stdout)}
    assert "int8" in listed["hb8"]["embed_model"] and listed["hb8"]["documents"] == 2
    names = [d["name"] for d in json.loads(run_cli("datasets", "documents", "hb8", "--json").stdout)["documents"]]
    assert sorted(names) == ["api/index", "guide/index"]
    hits = json.loads(run_cli("--set", "embed_model=default-int8", "datasets", "query", "hb8",
                              "how long is the refund window", "--json", "-k", "1").stdout)["hits"]
    assert hits[0]["document_name"] == "guide/index"
    # the dataset remembers its model: a plain query (and ingest) needs no --set (engine/dataset_settings.py)
    plain = run_cli("datasets", "query", "hb8", "how long is the refund window", "--json", "-k", "1")
    assert plain.code == 0, plain.stderr
    assert json.loads(plain.stdout)["hits"][0]["document_name"] == "guide/index"
    added = run_cli("datasets", "ingest", "hb8", "--text", "Parking is free after six.", "--json")
    assert added.code == 0 and json.loads(added.stdout)["added"] == 1, added.stderr
    # an operator's explicit model still refuses (the seed's scenario), naming the command that works
    monkeypatch.setenv("KX_SERVE_EMBED_MODEL", "default")
    refused = run_cli("datasets", "query", "hb8", "refund window")
    assert refused.code == 5, refused.stderr
    assert "this command set embed_model (env KX_SERVE_EMBED_MODEL)" in refused.stderr
    assert "kx --set embed_model=default-int8 datasets query hb8" in refused.stderr
    monkeypatch.delenv("KX_SERVE_EMBED_MODEL")

    # list says each dataset's model and chunking (a plain engine cutting at a dataset's own size, and the
    # refusal of an explicit other one: tests/unit/test_dataset_settings.py, without the model)
    shown = run_cli("datasets", "list").stdout
    assert "1000/200" in shown and "int8" in shown
