"""The end-to-end half of tests/unit/test_failure_statuses.py (a model, processes or servers there):
Every failure a status: damaged or odd storage, an unusable KX_HOME, out-of-range numbers, odd names.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import Engine, Status
from engine.text.inputs import from_text

from .helpers import run_cli
from .unit.test_failure_statuses import DOCS, _deep_page, _fresh, _status, engine, read_only_home  # noqa: F401 - helpers and fixtures


@pytest.mark.slow  # mounts a bind mount
def test_a_read_only_home_still_lists_reads_and_queries(read_only_home: Path, kx_home: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # the indexes behind the catalogue: a query would normally catch them up, which needs a write
    sidecar = kx_home / "datasets" / "hb" / "sparse.json"
    meta = json.loads(sidecar.read_text())
    meta["watermark"] = 1
    sidecar.write_text(json.dumps(meta))
    monkeypatch.setenv("KX_HOME", str(read_only_home))
    engine = _fresh(read_only_home)
    assert [s.name for s in engine.list_datasets()] == ["hb"]
    assert len(engine.list_documents("hb")) == len(DOCS)
    answer = engine.query("hb", "refunds", mode="dense")
    assert answer.hits and any("read-only file system" in note for note in answer.notes)
    for args in (["datasets", "list"], ["datasets", "documents", "hb"]):
        assert run_cli(*args).code == 0
    error = _status(lambda: engine.ingest("hb", [from_text("a new note")]))
    engine.close()
    assert error.status is Status.FAILED_PRECONDITION and "read-only file system" in error.message
    assert str(read_only_home / "datasets" / "hb") in error.message and "point KX_HOME" in error.message


def test_a_deep_page_goes_in_through_the_engine_and_is_found(engine: Engine) -> None:
    from engine.text.inputs import from_bytes

    report = engine.ingest("hb", [from_bytes(_deep_page(20_000), "deep", media_type="text/html")])
    assert [r.status for r in report.results] == ["added"]
    hits = engine.query("hb", "refunds paid within 30 days", mode="sparse").hits
    assert "deep" in [hit.document_name for hit in hits]
