"""The end-to-end half of tests/unit/test_import_hygiene.py (a model, processes or servers there):
The engine is headless, and commands that need no model import neither torch nor numpy.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .helpers import REPO
from .unit.test_import_hygiene import _HEAVY, _OTHER_COMMANDS, _PROBE, _loaded_after, _top  # noqa: F401 - helpers and fixtures


@pytest.mark.slow  # spawns kx
@pytest.mark.parametrize("args", [["--help"], ["datasets", "--help"], ["datasets", "list"],
                                  ["datasets", "list", "--json"], ["info"], ["info", "--json"],
                                  ["datasets", "ingest", "--help"], ["datasets", "documents", "--help"],
                                  ["datasets", "documents", "notes"], ["datasets", "documents", "nothing"]])
def test_commands_that_need_no_model_never_import_torch_or_numpy(args, tmp_path) -> None:
    loaded = _top(_loaded_after(args, tmp_path))
    assert sorted(loaded & _HEAVY) == []
    assert sorted(loaded & _OTHER_COMMANDS) == []
    assert "kx_tui.markdown_text" not in loaded  # a hit's snippet needs it; listings and --help do not


@pytest.mark.slow  # spawns kx
@pytest.mark.parametrize("args", [["--help"], ["datasets", "list", "--json"], ["info", "--json"]])
def test_help_and_json_draw_nothing_with_rich(args, tmp_path) -> None:
    assert "rich" not in _top(_loaded_after(args, tmp_path))


@pytest.mark.slow  # spawns kx
def test_a_query_imports_its_own_command_only(tmp_path) -> None:
    """A one-off query loads the indexes (numpy, voyager, whoosh) but no other command's modules."""
    loaded = _top(_loaded_after(["datasets", "query", "notes", "dataset", "--mode", "sparse"], tmp_path,
                                env={"KX_SERVE_EMBED_MODEL": "none"}))  # the dataset's test embedder is no model
    assert {"kx_tui.cli.root", "kx_tui.render", "whoosh"} <= loaded  # the probe ran the query
    assert sorted(loaded & (_OTHER_COMMANDS | {"textual", "torch", "sentence_transformers", "onnxruntime"})) == []


@pytest.mark.slow
def test_a_cold_hybrid_query_imports_its_own_command_and_onnx_only(handbook_home, tmp_path) -> None:
    """The real model on the ONNX runtime (the session's export cache): torch, the TUI and the other commands
    stay out."""
    loaded = _top(_loaded_after(["datasets", "query", "handbook", "how many days of paid leave"], tmp_path,
                                env={"KX_HOME": str(handbook_home), "KX_MODEL_CACHE": os.environ["KX_MODEL_CACHE"]}))
    assert {"kx_tui.render", "onnxruntime", "tokenizers"} <= loaded  # the probe ran the query
    assert sorted(loaded & (_OTHER_COMMANDS | {"textual", "torch", "sentence_transformers"})) == []


def test_the_engine_imports_without_any_ui() -> None:
    code = ("import sys, engine; from engine import Engine, KxClient, RetrievalMode, KxError, Status, Settings; "
            "print(sorted(m for m in ('textual', 'kx_tui', 'torch', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow  # imports every module in a fresh process: seconds
def test_every_engine_module_loads_without_the_ui() -> None:
    """All of them, the gateway and the watcher too: a `from textual.x import y` anywhere would show here."""
    code = ("import importlib, pkgutil, sys, engine\n"
            "for m in pkgutil.walk_packages(engine.__path__, 'engine.'): importlib.import_module(m.name)\n"
            "print(sorted(m for m in ('textual', 'kx_tui', 'rich') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_the_declared_layers_hold() -> None:
    """pyproject.toml's import-linter contracts: the engine never imports the UI, its layers only look down,
    screens and widgets never import the CLI."""
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports())"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout
