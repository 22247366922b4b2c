from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine import Engine, load_settings

from .helpers import HashEmbedder


@pytest.fixture(autouse=True)
def kx_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own KX_HOME and no KX_* settings from the developer's shell."""
    for key in list(os.environ):
        if key.startswith("KX_"):
            monkeypatch.delenv(key)
    home = tmp_path / "kx-home"
    monkeypatch.setenv("KX_HOME", str(home))
    return home


@pytest.fixture
def hash_engine(kx_home: Path) -> Engine:
    """An engine with the tiny deterministic embedder, for plumbing tests."""
    return Engine(load_settings({"chunk_size": 200, "chunk_overlap": 40}), embedder=HashEmbedder())


@pytest.fixture(scope="session")
def real_embedder():
    """The bundled all-MiniLM-L6-v2, loaded once per test session."""
    from engine.embedders import load_embedder
    from engine.models import model_card_for

    return load_embedder(model_card_for("default"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fuzz-examples", type=int, default=None,
                     help="generated inputs per fuzz target in tests/test_fuzz.py (default 25, a fast slice; "
                          "also KX_FUZZ_EXAMPLES). 2500 runs the full >= 10,000-input campaign.")


def pytest_configure(config: pytest.Config) -> None:
    # read before the autouse fixture clears KX_* from the environment
    given = config.getoption("--fuzz-examples") or os.environ.get("KX_FUZZ_EXAMPLES")
    config.kx_fuzz_examples = int(given) if given else 25
    config.kx_fuzz_seed = int(os.environ.get("KX_FUZZ_SEED", "13"))
