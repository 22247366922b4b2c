"""The engine is headless, and commands that need no model import neither torch nor numpy."""

from __future__ import annotations

import json
import subprocess
import sys

from ..helpers import REPO

_PROBE = """
import json, sys
from kx_tui.cli.root import main
try:
    main({args!r})
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


# What no command below needs: the model runtimes, the TUI, numpy (no arithmetic), ssl (no network), the
# indexes, the extractors, asyncio (only the servers and the TUI run an event loop).
_HEAVY = {"torch", "sentence_transformers", "transformers", "textual", "numpy", "onnxruntime", "tokenizers",
          "voyager", "whoosh", "pypdfium2", "trafilatura", "lxml", "yaml", "pymilvus", "milvus_lite", "ssl", "asyncio"}


# The other commands' modules and renderers: a command imports its own, not every command's (kx_tui/cli/root.py's
# lazy groups). rich.progress draws ingest and embed progress; uvicorn and mcp serve.
_OTHER_COMMANDS = {"kx_tui.cli.watch", "kx_tui.cli.serve", "kx_tui.cli.mcp", "kx_tui.cli.embed",
                   "kx_tui.cli.agent", "kx_tui.cli.rebuild", "kx_tui.cli.models", "kx_tui.cli.completion",
                   "kx_tui.cli.progress", "kx_tui.tui.app", "rich.progress", "uvicorn", "mcp", "httpx"}


def _loaded_after(args: list[str], tmp_path, env: dict[str, str] | None = None) -> set[str]:
    """The modules a fresh `kx ARGS` process holds when it is done, over a home with one real dataset."""
    env = {"KX_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", **(env or {})}
    # list and info over a real dataset, not an empty home
    if env["KX_HOME"] == str(tmp_path / "home") and not (tmp_path / "home").exists():
        from engine import Engine, load_settings
        from engine.text.inputs import from_text

        from ..helpers import HashEmbedder

        Engine(load_settings({"home": str(tmp_path / "home")}), embedder=HashEmbedder()).ingest(
            "notes", [from_text("a dataset for list and info to describe")])
    proc = subprocess.run([sys.executable, "-c", _PROBE.format(args=args)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


def _top(modules: set[str]) -> set[str]:
    """Packages and their submodules alike: "rich.progress" stays itself, "numpy.core" counts as "numpy"."""
    return modules | {m.split(".")[0] for m in modules}


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
