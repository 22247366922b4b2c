"""ModelHost (engine/embedding/host.py): the one owner of a process's model, held by both backends and
`kx models prepare`. No model is loaded here: a given embedder, 'none', and a counted stand-in loader."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import engine.embedding.embedders as embedders
from engine import Engine, load_settings
from engine.embedding.host import ModelHost
from engine.milvus.backend import MilvusBackend

from .helpers import HashEmbedder


def test_a_given_embedder_is_in_hand_and_described_without_loading(kx_home: Path) -> None:
    embedder = HashEmbedder()
    host = ModelHost(load_settings(), embedder)
    assert host.loaded and host.loaded_embedder() is embedder and host.embedder() is embedder
    assert host.card() is embedder.card
    assert host.load_in_background() is None  # nothing left to load
    model, advisories = host.describe()
    assert model is not None and model["model_id"] == embedder.card.model_id and advisories == []


def test_no_model_is_none_everywhere_and_says_what_is_off(kx_home: Path) -> None:
    host = ModelHost(load_settings({"embed_model": "none"}))
    assert host.card() is None and host.embedder() is None
    assert host.load_in_background() is None and host.warm_up() is False
    model, advisories = host.describe()
    assert model is None and "dense search are off" in advisories[0]


def test_a_model_that_cannot_be_described_is_reported_as_the_models_state(kx_home: Path, tmp_path: Path) -> None:
    host = ModelHost(load_settings({"embed_model": str(tmp_path / "no-such-model")}))
    assert not host.loaded and host.load_in_background() is None  # the query raises it, on its own thread
    model, advisories = host.describe()
    assert model is not None and set(model) == {"error"} and str(tmp_path / "no-such-model") in str(model)
    assert advisories == []


def test_two_threads_asking_at_once_load_the_model_once(kx_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[int] = []

    def slow_load(card, settings, notify):
        loads.append(1)
        time.sleep(0.2)  # long enough for the second asker to arrive while the first loads
        return HashEmbedder()

    monkeypatch.setattr(embedders, "load_embedder", slow_load)
    host = ModelHost(load_settings())
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(host.embedder())) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loads) == 1 and got[0] is got[1] is host.loaded_embedder()


def test_both_backends_hold_their_own_host_and_answer_through_it(kx_home: Path) -> None:
    embedder = HashEmbedder()
    engine = Engine(load_settings(), embedder)
    # nothing listens on port 9 (discard): info still answers, with the model, and says Milvus is down
    milvus = MilvusBackend(load_settings({"milvus_uri": "http://127.0.0.1:9", "milvus_timeout": 2.0}), embedder)
    for backend in (engine, milvus):
        assert isinstance(backend.models, ModelHost)
        assert backend.embedder() is embedder and backend.model_card() is embedder.card
        assert backend.info()["embed_model"]["model_id"] == embedder.card.model_id
    assert engine.models is not milvus.models
    down = milvus.info()
    assert down["datasets"] is None and down["backend"]["error"]["message"] in down["advisories"]
