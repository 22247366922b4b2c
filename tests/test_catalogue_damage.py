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

from engine import Engine, Status
from engine.text.inputs import from_text

from .helpers import kx_error, run_cli, small_engine

DOCS = ["Elephants are large mammals.", "Penguins live in Antarctica.", "Elephants eat grass and bark."]


def _damage(kx_home: Path, name: str, sql: str) -> Path:
    path = kx_home / "datasets" / name / "catalog.sqlite"
    db = sqlite3.connect(path)
    db.execute(sql)
    db.commit()
    db.close()
    return path


@pytest.fixture
def three(kx_home: Path) -> Engine:
    engine = small_engine()
    for name in ("e1", "e4", "e6"):
        engine.ingest(name, [from_text(t) for t in DOCS])
    engine.close()
    return small_engine()


@pytest.mark.parametrize("value", ["{garbage", '{"embed_model": 5}', "[1, 2]"])
def test_a_damaged_fingerprint_is_data_loss_naming_the_file(three: Engine, kx_home: Path, value: str) -> None:
    path = _damage(kx_home, "e1", f"UPDATE meta SET value = '{value}' WHERE key = 'fingerprint'")
    for call in (lambda: three.query("e1", "elephants"), lambda: three.dataset_summary("e1"),
                 lambda: three.ingest("e1", [from_text("Lions hunt at night.")])):
        error = kx_error(call)
        assert error.status is Status.DATA_LOSS, error
        assert str(path) in error.message and "fingerprint" in error.message and "backup" in error.message
    # sparse: a hybrid CLI query starts loading the real model beside opening the dataset and waits for it
    # even when the open is refused (seconds, and the whole export on a cold cache); the engine calls above
    # went through the hybrid path already
    result = run_cli("datasets", "query", "e1", "elephants", "--mode", "sparse")
    assert result.code == 12 and "DATA_LOSS" in result.stderr and "INTERNAL" not in result.stderr


def test_a_vector_of_the_wrong_size_is_data_loss_not_a_zero_vector(three: Engine, kx_home: Path) -> None:
    path = _damage(kx_home, "e6", "UPDATE passages SET vector = x'0102' WHERE seq = 1")
    error = kx_error(lambda: three.query("e6", "elephants"))  # MMR reads the hits' stored vectors
    assert error.status is Status.DATA_LOSS and str(path) in error.message and "passage 1" in error.message


def test_a_vector_of_the_wrong_size_met_while_rebuilding_the_graph_is_data_loss(three: Engine,
                                                                                kx_home: Path) -> None:
    path = _damage(kx_home, "e6", "UPDATE passages SET vector = x'0102' WHERE seq = 1")
    for name in ("dense.voy", "dense.json"):  # the graph is rebuilt from the stored vectors on the next open
        (kx_home / "datasets" / "e6" / name).unlink()
    for mode in ("dense", "sparse"):
        error = kx_error(lambda: three.query("e6", "elephants", mode=mode))
        assert error.status is Status.DATA_LOSS and str(path) in error.message, error
        assert "passage 1's vector is 2 bytes" in error.message


def test_a_passage_still_in_the_backlog_is_not_damage(kx_home: Path) -> None:
    engine = small_engine()
    engine.ingest("bl", [from_text(t) for t in DOCS])
    engine.close()
    # an empty blob is what a committed, not yet embedded passage holds (the embedding backlog)
    _damage(kx_home, "bl", "UPDATE passages SET vector = x'' WHERE seq = 1")
    assert small_engine().query("bl", "elephants").hits


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
    human = run_cli("datasets", "list")
    assert human.code == 0 and "e1 (unreadable)" in human.stdout and "e1: cannot be read: DATA_LOSS" in human.stdout


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


def _tables(path: Path) -> set[str]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        db.close()


def _stored(path: Path) -> tuple[set[str], int, str]:
    """What a refused write must leave as it was: the tables, the documents, the schema version."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        documents = db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        return tables, documents, version
    finally:
        db.close()


@pytest.mark.parametrize("table", ["passages", "blobs", "texts", "lineage_events", "meta"])
def test_an_ingest_into_a_catalogue_missing_a_table_is_refused_not_healed(three: Engine, kx_home: Path,
                                                                          table: str) -> None:
    path = _damage(kx_home, "e1", f"DROP TABLE {table}")
    before = _stored(path) if table != "meta" else None
    for call in (lambda: three.query("e1", "elephants", mode="sparse"),
                 lambda: three.ingest("e1", [from_text("Lions hunt at night.")]),
                 lambda: three.retire("e1", ["anything"])):
        error = kx_error(call)
        assert error.status is Status.DATA_LOSS, error
        # the same words on read and write, and true: the rest of the catalogue is there
        assert f"its table {table} is missing" in error.message and "none of kx's tables" not in error.message
        assert str(path) in error.message and "backup" in error.message
    if before is not None:
        assert _stored(path) == before  # no empty table put in its place: the next query still says DATA_LOSS
    else:
        assert "meta" not in _tables(path)
    assert kx_error(lambda: three.query("e1", "elephants")).status is Status.DATA_LOSS


def test_a_new_dataset_and_an_old_schema_still_open_and_migrate(kx_home: Path) -> None:
    engine = small_engine()
    engine.ingest("old", [from_text(t) for t in DOCS])   # a brand-new catalogue is created as before
    engine.close()
    # schema 3 had no lineage_events table (schema 4 brought it): not damage, a writer adds it
    path = _damage(kx_home, "old", "DROP TABLE lineage_events")
    _damage(kx_home, "old", "UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    engine = small_engine()
    assert engine.query("old", "elephants", mode="sparse").hits
    engine.ingest("old", [from_text("Lions hunt at night.")])
    tables, documents, version = _stored(path)
    assert "lineage_events" in tables and documents == 4 and version == "5"


def test_a_catalogue_from_a_newer_kx_is_refused_and_left_as_it_is(three: Engine, kx_home: Path) -> None:
    path = _damage(kx_home, "e1", "UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    before = _stored(path)
    for call in (lambda: three.query("e1", "elephants"), lambda: three.list_documents("e1"),
                 lambda: three.ingest("e1", [from_text("Lions hunt at night.")])):
        error = kx_error(call)
        assert error.status is Status.FAILED_PRECONDITION, error
        assert "made by a newer kx (schema 999, this kx reads up to 5)" in error.message
        assert "upgrade kx" in error.message and str(path) in error.message
    assert _stored(path) == before  # never stamped down to this kx's schema 5
    assert [s.error.split(":")[0] for s in three.list_datasets() if s.error] == ["FAILED_PRECONDITION"]
    result = run_cli("datasets", "query", "e1", "elephants", "--mode", "sparse")  # no model to wait for
    assert result.code == Status.FAILED_PRECONDITION.exit_code and "newer kx" in result.stderr


def test_a_schema_version_that_is_not_a_number_is_data_loss(three: Engine, kx_home: Path) -> None:
    path = _damage(kx_home, "e1", "UPDATE meta SET value = 'five' WHERE key = 'schema_version'")
    for call in (lambda: three.query("e1", "elephants"), lambda: three.ingest("e1", [from_text("Lions.")])):
        error = kx_error(call)
        assert error.status is Status.DATA_LOSS and "schema_version is 'five'" in error.message, error
    assert _stored(path)[2] == "five"
