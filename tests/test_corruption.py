"""Damaged files on disk: derived indexes are rebuilt, a damaged catalogue is DATA_LOSS.

Each case damages one file of a real dataset (the handbook samples, the
real model) the way a disk or a careless copy would, opens it again as a
new process would (a fresh Engine), and compares every query mode's answer
with the pristine dataset's. Never a traceback, never a different answer.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from engine import Engine, KxError, Status, load_settings
from engine.embedded.checksums import matches
from engine.text.inputs import from_file

from .helpers import REPO, assert_dataset_consistent, run_cli

pytestmark = pytest.mark.slow

QUERIES = ["how long do I have to return a logger?", "VPN password reset"]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory, real_embedder) -> Path:
    """A handbook dataset built once; each test damages its own copy."""
    home = tmp_path_factory.mktemp("pristine")
    engine = Engine(load_settings({"home": str(home), "chunk_size": 400, "chunk_overlap": 80}),
                    embedder=real_embedder)
    files = sorted((REPO / "samples" / "handbook").glob("*.md"))
    engine.ingest("handbook", [from_file(f, 1 << 20) for f in files])
    engine.close()
    return home


def _engine_at(home: Path, embedder) -> Engine:
    return Engine(load_settings({"home": str(home), "chunk_size": 400, "chunk_overlap": 80}), embedder=embedder)


def _answers(home: Path, embedder) -> list[list[tuple[str, float]]]:
    engine = _engine_at(home, embedder)
    try:
        return [[(h.passage_ref, h.score) for h in engine.query("handbook", q, mode=mode, k=8).hits]
                for q in QUERIES for mode in ("dense", "sparse", "hybrid")]
    finally:
        engine.close()


@pytest.fixture(scope="module")
def expected(pristine: Path, real_embedder) -> list[list[tuple[str, float]]]:
    return _answers(pristine, real_embedder)


@pytest.fixture
def damaged(pristine: Path, tmp_path: Path) -> Path:
    home = tmp_path / "home"
    shutil.copytree(pristine, home)
    return home


def _folder(home: Path) -> Path:
    return home / "datasets" / "handbook"


def _flip_middle(path: Path, count: int = 64) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + count] = bytes(b ^ 0xFF for b in data[middle:middle + count])
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["truncated", "garbage", "flipped bytes", "empty", "missing"])
def test_a_damaged_dense_graph_is_rebuilt_and_answers_the_same(pristine, expected, damaged, real_embedder,
                                                               damage) -> None:
    graph = _folder(damaged) / "dense.voy"
    if damage == "truncated":
        graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 3])
    elif damage == "garbage":
        graph.write_bytes(os.urandom(graph.stat().st_size))
    elif damage == "flipped bytes":  # voyager itself loads this without a word
        _flip_middle(graph)
    elif damage == "empty":
        graph.write_bytes(b"")
    else:
        graph.unlink()
    assert _answers(damaged, real_embedder) == expected
    assert_dataset_consistent(damaged, "handbook")
    # rebuilt whole: every passage back in (built on every core, its links, so its bytes, may differ)
    from voyager import Index

    assert sorted(Index.load(str(graph)).ids) == sorted(Index.load(str(_folder(pristine) / "dense.voy")).ids)


@pytest.mark.parametrize("damage", ["flipped segment", "missing segment", "truncated segment"])
def test_a_damaged_keyword_index_is_rebuilt_and_answers_the_same(pristine, expected, damaged, real_embedder,
                                                                 damage) -> None:
    folder = _folder(damaged) / "sparse"
    files = sorted(folder.iterdir(), key=lambda p: p.stat().st_size)
    segment = next(p for p in reversed(files) if p.suffix == ".seg")
    if damage == "flipped segment":
        _flip_middle(segment)
    elif damage == "missing segment":
        segment.unlink()
    else:
        segment.write_bytes(segment.read_bytes()[:segment.stat().st_size // 2])
    assert _answers(damaged, real_embedder) == expected
    assert_dataset_consistent(damaged, "handbook")
    recorded = json.loads((_folder(damaged) / "sparse.json").read_text())["files"]
    assert recorded and all(matches(folder / name, rec) for name, rec in recorded.items())  # rebuilt whole


@pytest.mark.parametrize("sidecar", ["dense.json", "sparse.json"])
@pytest.mark.parametrize("damage", ["missing", "garbage"])
def test_a_missing_or_garbage_sidecar_is_rebuilt(expected, damaged, real_embedder, sidecar, damage) -> None:
    path = _folder(damaged) / sidecar
    if damage == "missing":
        path.unlink()
    else:
        path.write_bytes(b"\x00{not json")
    assert _answers(damaged, real_embedder) == expected
    assert_dataset_consistent(damaged, "handbook")
    assert json.loads(path.read_text())["watermark"] > 0


def _page_size(path: Path) -> int:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute("PRAGMA page_size").fetchone()[0]
    finally:
        db.close()


def _checkpointed(home: Path) -> Path:
    """The catalogue with its WAL folded in, so damage to the main file is damage to the data."""
    path = _folder(home) / "catalog.sqlite"
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return path


@pytest.mark.parametrize("damage", ["header", "pages"])
def test_a_damaged_catalogue_is_data_loss_naming_the_file(damaged, real_embedder, damage) -> None:
    path = _checkpointed(damaged)
    for name in ("dense.voy", "dense.json"):  # so the next open must read every passage to rebuild
        (_folder(damaged) / name).unlink()
    size = _page_size(path)
    data = bytearray(path.read_bytes())
    if damage == "header":
        data[:100] = os.urandom(100)
    else:  # every page after the schema: the rows themselves
        for start in range(2 * size, len(data), size):
            data[start:start + size] = os.urandom(size)
    path.write_bytes(bytes(data))
    engine = _engine_at(damaged, real_embedder)
    with pytest.raises(KxError) as caught:
        engine.query("handbook", QUERIES[0])
    engine.close()
    assert caught.value.status is Status.DATA_LOSS
    assert str(path) in caught.value.message and "restore that file from a backup" in caught.value.message
    result = run_cli("--home", str(damaged), "datasets", "query", "handbook", "-t", QUERIES[0])
    assert result.code == Status.DATA_LOSS.exit_code
    assert result.stderr.startswith("error: DATA_LOSS: the catalogue") and "Traceback" not in result.stderr
    listing = run_cli("--home", str(damaged), "datasets", "list")
    assert "Traceback" not in listing.stderr and listing.code in (0, Status.DATA_LOSS.exit_code)
