"""Index files that cannot lie: bound to their catalogue, verified after every save, completed by the next writer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine import Engine, KxError, Status
from engine.embedded.dataset import Dataset
from engine.text.inputs import from_text

from .helpers import HashEmbedder

CATS = [f"cat note {i}: cats purr and nap in the sun, whiskers twitching" for i in range(6)]
SHIPS = [f"ship log {i}: the ship sailed past the harbour lighthouse at dawn" for i in range(6)]


def _names(result) -> set[str]:
    return {hit.document_name.split()[0] for hit in result}


def test_index_files_copied_from_another_dataset_are_never_trusted(hash_engine: Engine) -> None:
    hash_engine.ingest("cats", [from_text(t, name=f"cat{i}") for i, t in enumerate(CATS)])
    hash_engine.ingest("ships", [from_text(t, name=f"ship{i}") for i, t in enumerate(SHIPS)])
    hash_engine.close()
    cats, ships = Dataset(hash_engine.settings, "cats").folder, Dataset(hash_engine.settings, "ships").folder
    for name in ("dense.voy", "dense.json", "sparse.json"):
        shutil.copy2(ships / name, cats / name)
    shutil.rmtree(cats / "sparse")
    shutil.copytree(ships / "sparse", cats / "sparse")  # valid checksums: only the dataset id tells

    fresh = Engine(hash_engine.settings, embedder=HashEmbedder())
    for mode in ("dense", "sparse", "hybrid"):
        result = fresh.query("cats", "cats purr in the sun", mode=mode, k=5)
        assert len(result) == 5 and all(hit.document_name.startswith("cat") for hit in result), mode
    meta = json.loads((cats / "dense.json").read_text())
    assert meta["dataset_id"] != json.loads((ships / "dense.json").read_text())["dataset_id"]  # rebuilt


def test_an_edited_dense_sidecar_is_rebuilt_not_believed(hash_engine: Engine) -> None:
    hash_engine.ingest("cats", [from_text(t) for t in CATS])
    hash_engine.close()
    sidecar = Dataset(hash_engine.settings, "cats").folder / "dense.json"
    meta = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**meta, "count": 999}))
    fresh = Engine(hash_engine.settings, embedder=HashEmbedder())
    dense = fresh.query("cats", "cats purr in the sun", mode="dense", k=3)
    assert len(dense) == 3 and dense.dense_coverage == 1.0
    assert json.loads(sidecar.read_text())["count"] == len(CATS)


def test_a_short_graph_write_fails_loudly_keeps_the_last_graph_and_the_next_command_completes_it(
        hash_engine: Engine, monkeypatch) -> None:
    import voyager

    hash_engine.ingest("cats", [from_text(t) for t in CATS[:3]])
    folder = Dataset(hash_engine.settings, "cats").folder
    before = (folder / "dense.voy").read_bytes()
    real_save = voyager.Index.save

    def short_save(self, path):  # what a full disk did: a file cut short, and no error from voyager
        real_save(self, path)
        data = Path(path).read_bytes()
        Path(path).write_bytes(data[: len(data) // 2])

    monkeypatch.setattr(voyager.Index, "save", short_save)
    with pytest.raises(KxError) as caught:
        hash_engine.ingest("cats", [from_text(t) for t in CATS[3:]])
    assert caught.value.status is Status.RESOURCE_EXHAUSTED
    assert "dense.voy" in caught.value.message and "committed 3 document(s)" in caught.value.message
    assert (folder / "dense.voy").read_bytes() == before  # the last whole graph stays
    assert hash_engine.dataset_summary("cats").documents == 6

    monkeypatch.setattr(voyager.Index, "save", real_save)  # room again: re-running the same command completes it
    again = hash_engine.ingest("cats", [from_text(t) for t in CATS[3:]])
    assert again.count("unchanged") == 3
    dense = hash_engine.query("cats", "cats purr in the sun", mode="dense", k=6)
    assert len(dense) == 6 and dense.dense_coverage == 1.0
