"""The engine is headless, and commands that need no model import neither torch nor numpy.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .helpers import REPO
from .import_probe import HEAVY, OTHER_COMMANDS, loaded_after, top


def test_the_lazy_commands_list_their_own_help() -> None:
    """`kx --help` lists the commands from other modules without importing them: the table it reads says what
    each command's own docstring says."""
    import importlib

    from kx_tui.cli.root import cli, datasets

    for group in (cli, datasets):
        for name, (target, short_help) in group.lazy.items():
            module, attribute = target.split(":")
            command = getattr(importlib.import_module(module), attribute)
            assert command.name == name
            assert command.get_short_help_str(10_000) == short_help


def test_help_shortens_the_lazy_commands_with_no_deprecated_click_helper() -> None:
    """`kx --help` at a narrow width lists every lazy command, shortened through click's public API: click's
    `utils.make_default_short_help` is deprecated (a DeprecationWarning on every --help, gone in click 9.0)."""
    import warnings

    from click.testing import CliRunner

    from kx_tui.cli.root import cli

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        result = CliRunner().invoke(cli, ["--help"], terminal_width=60)
    assert result.exception is None and result.exit_code == 0, result.output
    listed = result.output.split("Commands:")[1]
    for name in cli.lazy:
        assert f"  {name}  " in listed
    assert "..." in listed   # the long ones were shortened to the width


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


@pytest.mark.slow  # spawns kx
@pytest.mark.parametrize("args", [["--help"], ["datasets", "--help"], ["datasets", "list"],
                                  ["datasets", "list", "--json"], ["info"], ["info", "--json"],
                                  ["datasets", "ingest", "--help"], ["datasets", "documents", "--help"],
                                  ["datasets", "documents", "notes"], ["datasets", "documents", "nothing"]])
def test_commands_that_need_no_model_never_import_torch_or_numpy(args, tmp_path) -> None:
    loaded = top(loaded_after(args, tmp_path))
    assert sorted(loaded & HEAVY) == []
    assert sorted(loaded & OTHER_COMMANDS) == []
    assert "kx_tui.markdown_text" not in loaded  # a hit's snippet needs it; listings and --help do not


@pytest.mark.slow  # spawns kx
@pytest.mark.parametrize("args", [["--help"], ["datasets", "list", "--json"], ["info", "--json"]])
def test_help_and_json_draw_nothing_with_rich(args, tmp_path) -> None:
    assert "rich" not in top(loaded_after(args, tmp_path))


@pytest.mark.slow  # spawns kx
def test_a_query_imports_its_own_command_only(tmp_path) -> None:
    """A one-off query loads the indexes (numpy, voyager, whoosh) but no other command's modules."""
    loaded = top(loaded_after(["datasets", "query", "notes", "dataset", "--mode", "sparse"], tmp_path,
                                env={"KX_SERVE_EMBED_MODEL": "none"}))  # the dataset's test embedder is no model
    assert {"kx_tui.cli.root", "kx_tui.render", "whoosh"} <= loaded  # the probe ran the query
    assert sorted(loaded & (OTHER_COMMANDS | {"textual", "torch", "sentence_transformers", "onnxruntime"})) == []


@pytest.mark.slow
def test_a_cold_hybrid_query_imports_its_own_command_and_onnx_only(handbook_home, tmp_path) -> None:
    """The real model on the ONNX runtime (the session's export cache): torch, the TUI and the other commands
    stay out."""
    loaded = top(loaded_after(["datasets", "query", "handbook", "how many days of paid leave"], tmp_path,
                                env={"KX_HOME": str(handbook_home), "KX_MODEL_CACHE": os.environ["KX_MODEL_CACHE"]}))
    assert {"kx_tui.render", "onnxruntime", "tokenizers"} <= loaded  # the probe ran the query
    assert sorted(loaded & (OTHER_COMMANDS | {"textual", "torch", "sentence_transformers"})) == []


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
