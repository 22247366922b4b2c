from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine import Engine, load_settings

from .helpers import HashEmbedder


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ONNX export cache for the whole session: the export (seconds, through torch) is paid once.

    Tests that exercise the cache itself (tests/test_onnx.py) use folders of their own.
    """
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(autouse=True)
def kx_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_cache: Path) -> Path:
    """Every test gets its own KX_HOME and no KX_* settings from the developer's shell.

    KX_MODEL_CACHE points every test (and the kx processes it starts) at the session's export cache.
    """
    for key in list(os.environ):
        if key.startswith("KX_"):
            monkeypatch.delenv(key)
    home = tmp_path / "kx-home"
    monkeypatch.setenv("KX_HOME", str(home))
    monkeypatch.setenv("KX_MODEL_CACHE", str(model_cache))
    return home


@pytest.fixture
def hash_engine(kx_home: Path) -> Engine:
    """An engine with the tiny deterministic embedder, for plumbing tests."""
    return Engine(load_settings({"chunk_size": 200, "chunk_overlap": 40}), embedder=HashEmbedder())


@pytest.fixture(scope="session")
def real_embedder(model_cache: Path, tmp_path_factory: pytest.TempPathFactory):
    """The bundled all-MiniLM-L6-v2 on the default runtime (ONNX), loaded once per test session."""
    from engine.embedders import load_embedder
    from engine.models import model_card_for

    settings = load_settings(env={"KX_HOME": str(tmp_path_factory.mktemp("home")), "KX_MODEL_CACHE": str(model_cache)})
    return load_embedder(model_card_for("default"), settings)


@pytest.fixture(scope="session")
def handbook_home(tmp_path_factory: pytest.TempPathFactory, real_embedder) -> Path:
    """A KX_HOME holding the shipped handbook as dataset 'handbook', built once with the real model."""
    from engine.documents import from_file

    from .helpers import REPO

    home = tmp_path_factory.mktemp("handbook-home")
    engine = Engine(load_settings({"home": str(home)}, env={}), embedder=real_embedder)
    engine.ingest("handbook", [from_file(p, 10**7) for p in sorted((REPO / "samples" / "handbook").glob("*.md"))])
    engine.close()
    return home


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fuzz-examples", type=int, default=None,
                     help="generated inputs per fuzz target in tests/test_fuzz.py (default 25, a fast slice; "
                          "also KX_FUZZ_EXAMPLES). 2500 runs the full >= 10,000-input campaign.")


def pytest_configure(config: pytest.Config) -> None:
    # read before the autouse fixture clears KX_* from the environment
    given = config.getoption("--fuzz-examples") or os.environ.get("KX_FUZZ_EXAMPLES")
    config.kx_fuzz_examples = int(given) if given else 25
    config.kx_fuzz_seed = int(os.environ.get("KX_FUZZ_SEED", "13"))


from .backends import backend_factory, backend_kind, lite_server  # noqa: E402,F401  (shared fixtures)
