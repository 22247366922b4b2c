"""A catalogue damaged in its rows or its schema: a named status with a next step, never INTERNAL, and nothing lost.

Each case was found by an adversarial sweep: a garbage or incomplete stored
fingerprint, a vector blob of the wrong size, one damaged dataset failing
`list` for every dataset, an ingest that recreated a dropped table (and so
"healed" the damage away), and a catalogue from a newer kx read and
downgraded.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine import Engine, KxError, Status, load_settings
from engine.text.inputs import from_text

from ..helpers import HashEmbedder, run_cli

DOCS = ["Elephants are large mammals.", "Penguins live in Antarctica.", "Elephants eat grass and bark."]


def _engine() -> Engine:
    return Engine(load_settings({"chunk_size": 200, "chunk_overlap": 40}), embedder=HashEmbedder())


def _damage(kx_home: Path, name: str, sql: str) -> Path:
    path = kx_home / "datasets" / name / "catalog.sqlite"
    db = sqlite3.connect(path)
    db.execute(sql)
    db.commit()
    db.close()
    return path


def _error(call) -> KxError:
    with pytest.raises(KxError) as caught:
        call()
    return caught.value


@pytest.fixture
def three(kx_home: Path) -> Engine:
    engine = _engine()
    for name in ("e1", "e4", "e6"):
        engine.ingest(name, [from_text(t) for t in DOCS])
    engine.close()
    return _engine()


@pytest.mark.parametrize("value", ["{garbage", '{"embed_model": 5}', "[1, 2]"])
def test_a_damaged_fingerprint_is_data_loss_naming_the_file(three: Engine, kx_home: Path, value: str) -> None:
    path = _damage(kx_home, "e1", f"UPDATE meta SET value = '{value}' WHERE key = 'fingerprint'")
    for call in (lambda: three.query("e1", "elephants"), lambda: three.dataset_summary("e1"),
                 lambda: three.ingest("e1", [from_text("Lions hunt at night.")])):
        error = _error(call)
        assert error.status is Status.DATA_LOSS, error
        assert str(path) in error.message and "fingerprint" in error.message and "backup" in error.message
    result = run_cli("datasets", "query", "e1", "elephants")
    assert result.code == 12 and "DATA_LOSS" in result.stderr and "INTERNAL" not in result.stderr


def test_a_vector_of_the_wrong_size_is_data_loss_not_a_zero_vector(three: Engine, kx_home: Path) -> None:
    path = _damage(kx_home, "e6", "UPDATE passages SET vector = x'0102' WHERE seq = 1")
    error = _error(lambda: three.query("e6", "elephants"))  # MMR reads the hits' stored vectors
    assert error.status is Status.DATA_LOSS and str(path) in error.message and "passage 1" in error.message


def test_a_passage_still_in_the_backlog_is_not_damage(kx_home: Path) -> None:
    engine = _engine()
    engine.ingest("bl", [from_text(t) for t in DOCS])
    engine.close()
    # an empty blob is what a committed, not yet embedded passage holds (the embedding backlog)
    _damage(kx_home, "bl", "UPDATE passages SET vector = x'' WHERE seq = 1")
    assert _engine().query("bl", "elephants").hits


def test_one_damaged_dataset_is_marked_in_the_list_and_the_others_still_listed(three: Engine,
                                                                             kx_home: Path) -> None:
    _damage(kx_home, "e1", "UPDATE meta SET value = '{garbage' WHERE key = 'fingerprint'")
    _damage(kx_home, "e4", "DROP TABLE passages")
    summaries = {s.name: s for s in three.list_datasets()}
    assert set(summaries) == {"e1", "e4", "e6"}
    assert summaries["e6"].error is None and summaries["e6"].documents == 3
    assert "error" not in summaries["e6"].to_dict()  # a healthy dataset's dict is unchanged
    for name in ("e1", "e4"):
        assert summaries[name].error and summaries[name].error.startswith("DATA_LOSS: "), summaries[name]
        assert str(kx_home / "datasets" / name / "catalog.sqlite") in summaries[name].error
    result = run_cli("datasets", "list", "--json")
    assert result.code == 0, result.stderr
    assert '"error": "DATA_LOSS: ' in result.stdout and '"e6"' in result.stdout


def test_the_gateway_lists_the_healthy_datasets_beside_a_damaged_one(three: Engine, kx_home: Path) -> None:
    from fastapi.testclient import TestClient

    from engine.server.gateway import create_app

    _damage(kx_home, "e1", "UPDATE meta SET value = '{garbage' WHERE key = 'fingerprint'")
    app = create_app(three, "tok", allowed_hosts=["testserver"])
    with TestClient(app) as client:
        answer = client.get("/v1/datasets", headers={"Authorization": "Bearer tok"})
    assert answer.status_code == 200, answer.text
    listed = {d["name"]: d for d in answer.json()["datasets"]}
    assert listed["e1"]["error"].startswith("DATA_LOSS: ") and "error" not in listed["e6"]
