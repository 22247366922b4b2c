"""A cold query loads the model on a thread while it opens the indexes, and never leaves that thread behind.

engine/query.py `_load_model_meanwhile`: the real model (ONNX Runtime, the
session's export cache) and the handbook dataset, in this process and as a
user's shell runs `kx` (ONNX Runtime torn down in the middle of a load
aborts a process, so the error paths are run as real processes too).
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from engine import Engine, Status, load_settings
from engine.errors import KxError

from .helpers import run_kx

pytestmark = pytest.mark.slow


def test_the_model_loads_while_the_indexes_open(handbook_home: Path, monkeypatch) -> None:
    engine = Engine(load_settings({"home": str(handbook_home)}, env={"KX_MODEL_CACHE": os.environ["KX_MODEL_CACHE"]}))
    seen: list[bool] = []
    opened = Engine.searcher

    def searcher(self: Engine, name: str):
        seen.append(any(t.name == "kx-model-load" and t.is_alive() for t in threading.enumerate()))
        return opened(self, name)

    monkeypatch.setattr(Engine, "searcher", searcher)
    result = engine.query("handbook", "how many days of paid leave")
    assert seen[0] and result.hits and result.hits[0].dense_rank is not None
    assert not [t for t in threading.enumerate() if t.name == "kx-model-load"]
    assert engine.load_model_in_background() is None  # loaded: nothing more to start
    with pytest.raises(KxError) as missing:  # no dataset: the error at once, no model load started
        Engine(engine.settings).query("no-such-set", "paid leave")
    assert missing.value.status is Status.NOT_FOUND
    assert not [t for t in threading.enumerate() if t.name == "kx-model-load"]
    engine.close()


def test_a_cold_query_process_answers_and_its_errors_exit_cleanly(handbook_home: Path, tmp_path: Path) -> None:
    env = {"KX_HOME": str(handbook_home), "KX_MODEL_CACHE": os.environ["KX_MODEL_CACHE"]}
    answered = run_kx("datasets", "query", "handbook", "--text", "how many days of paid leave", "--json", env=env)
    assert answered.code == 0, answered.stderr
    missing = run_kx("datasets", "query", "no-such-set", "--text", "paid leave", env=env)
    assert missing.code > 0 and "does not exist" in missing.stderr  # not a signal (an abort is negative)
    # a dataset whose first ingest never committed: the indexes fail to open while the model loads
    empty = Path(handbook_home) / "datasets" / "half-made"
    empty.mkdir(exist_ok=True)
    (empty / "catalog.sqlite").write_bytes(b"")
    try:
        failed = run_kx("datasets", "query", "half-made", "--text", "paid leave", env=env)
    finally:
        shutil.rmtree(empty)
    assert failed.code > 0 and "Traceback" not in failed.stderr, failed.stderr
