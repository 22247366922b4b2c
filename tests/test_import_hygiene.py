"""The engine is headless, and commands that need no model import neither torch nor numpy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .helpers import REPO

_PROBE = """
import json, sys
from kx_tui.cli import main
try:
    main({args!r})
except SystemExit:
    pass
heavy = ["torch", "sentence_transformers", "transformers", "textual", "numpy", "onnxruntime", "tokenizers",
         "voyager", "whoosh", "pypdfium2", "trafilatura", "lxml", "yaml", "pymilvus", "milvus_lite"]
print(json.dumps(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr)
"""


def _loaded_after(args: list[str], tmp_path) -> list[str]:
    env = {"KX_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    if not (tmp_path / "home").exists():  # list and info over a real dataset, not an empty home
        from engine import Engine, load_settings
        from engine.documents import from_text

        from .helpers import HashEmbedder

        Engine(load_settings({"home": str(tmp_path / "home")}), embedder=HashEmbedder()).ingest(
            "notes", [from_text("a dataset for list and info to describe")])
    proc = subprocess.run([sys.executable, "-c", _PROBE.format(args=args)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    return json.loads(proc.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["--help"], ["datasets", "list"], ["datasets", "list", "--json"], ["info"],
                                  ["info", "--json"], ["datasets", "ingest", "--help"],
                                  ["datasets", "documents", "--help"], ["datasets", "documents", "nothing"]])
def test_commands_that_need_no_model_never_import_torch_or_numpy(args, tmp_path) -> None:
    assert _loaded_after(args, tmp_path) == []


def test_the_engine_imports_without_any_ui() -> None:
    code = ("import sys, engine; from engine import Engine, KxClient, RetrievalMode, KxError, Status, Settings; "
            "print(sorted(m for m in ('textual', 'kx_tui', 'torch', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]"


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


def test_no_two_modules_import_each_other_even_through_others() -> None:
    """No import cycles in engine/ or kx_tui/, TYPE_CHECKING imports included (a cycle in the types is one
    in the design)."""
    import grimp

    graph = grimp.build_graph("engine", "kx_tui")
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph.find_modules_directly_imported_by(module):
            if target not in graph.modules:
                continue
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    assert cycles == []

