from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine import Engine, load_settings

from .helpers import small_engine

# Fixtures that make any test using them slow, wherever it lives: the real model (its load, and the export
# into the session cache on a cold run) and a `milvus-lite server` process. Marked here, so a new test that
# takes one of them leaves the inner loop (`python -m pytest -m "not slow"`) without anyone remembering to.
_SLOW_FIXTURES = {"real_embedder", "handbook_home", "lite_server"}


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
    return small_engine()


@pytest.fixture(scope="session")
def real_embedder(model_cache: Path, tmp_path_factory: pytest.TempPathFactory):
    """The bundled all-MiniLM-L6-v2 on the default runtime (ONNX), loaded once per test session."""
    from engine.embedding.cards import model_card_for
    from engine.embedding.embedders import load_embedder

    settings = load_settings(env={"KX_HOME": str(tmp_path_factory.mktemp("home")), "KX_MODEL_CACHE": str(model_cache)})
    return load_embedder(model_card_for("default"), settings)


@pytest.fixture(scope="session")
def handbook_home(tmp_path_factory: pytest.TempPathFactory, real_embedder) -> Path:
    """A KX_HOME holding the shipped handbook as dataset 'handbook', built once with the real model."""
    from engine.text.inputs import from_file

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


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the marks added here count
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        server = callspec is not None and callspec.params.get("backend_kind") == "milvus-server"
        if server or _SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def _missing_shared(item: pytest.Item) -> list[Path]:
    return [Path(m.args[0]) for m in item.iter_markers("shared_data") if not Path(m.args[0]).exists()]


def pytest_report_collectionfinish(config: pytest.Config, start_path: Path, items: list[pytest.Item]) -> list[str]:
    """Once per run: which tests the missing shared data will skip (or fail, under CI=true), and why."""
    missing: dict[Path, int] = {}
    for item in items:
        for path in _missing_shared(item):
            missing[path] = missing.get(path, 0) + 1
    if not missing:
        return []
    fate = "FAIL (CI=true: CI has the shared data)" if _in_ci() else "are skipped"
    return [f"shared data: {count} test(s) reading {path} {fate}: it is not there; "
            "clone kx beside ../shared/data to run them" for path, count in sorted(missing.items())]


def pytest_runtest_setup(item: pytest.Item) -> None:
    for path in _missing_shared(item):
        if _in_ci():
            pytest.fail(f"shared data {path} is missing and CI=true: CI must run the real-document tests")
        pytest.skip(f"shared data {path} is not beside this checkout")


def pytest_configure(config: pytest.Config) -> None:
    # read before the autouse fixture clears KX_* from the environment
    given = config.getoption("--fuzz-examples") or os.environ.get("KX_FUZZ_EXAMPLES")
    config.kx_fuzz_examples = int(given) if given else 25
    config.kx_fuzz_seed = int(os.environ.get("KX_FUZZ_SEED", "13"))


from .backends import backend_factory, backend_kind, lite_server  # noqa: E402,F401  (shared fixtures)
