"""What a fresh `kx` process imports: the probe the import-hygiene tests (and the agent's light --help) run."""

from __future__ import annotations

import json
import subprocess
import sys

from .helpers import REPO

PROBE = """
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
HEAVY = {"torch", "sentence_transformers", "transformers", "textual", "numpy", "onnxruntime", "tokenizers",
          "voyager", "whoosh", "pypdfium2", "trafilatura", "lxml", "yaml", "pymilvus", "milvus_lite", "ssl", "asyncio"}


# The other commands' modules and renderers: a command imports its own, not every command's (kx_tui/cli/root.py's
# lazy groups). rich.progress draws ingest and embed progress; uvicorn and mcp serve.
OTHER_COMMANDS = {"kx_tui.cli.watch", "kx_tui.cli.serve", "kx_tui.cli.mcp", "kx_tui.cli.embed",
                   "kx_tui.cli.agent", "kx_tui.cli.rebuild", "kx_tui.cli.models", "kx_tui.cli.completion",
                   "kx_tui.cli.progress", "kx_tui.tui.app", "rich.progress", "uvicorn", "mcp", "httpx"}


def loaded_after(args: list[str], tmp_path, env: dict[str, str] | None = None) -> set[str]:
    """The modules a fresh `kx ARGS` process holds when it is done, over a home with one real dataset."""
    env = {"KX_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", **(env or {})}
    # list and info over a real dataset, not an empty home
    if env["KX_HOME"] == str(tmp_path / "home") and not (tmp_path / "home").exists():
        from engine import Engine, load_settings
        from engine.text.inputs import from_text

        from .helpers import HashEmbedder

        Engine(load_settings({"home": str(tmp_path / "home")}), embedder=HashEmbedder()).ingest(
            "notes", [from_text("a dataset for list and info to describe")])
    proc = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


def top(modules: set[str]) -> set[str]:
    """Packages and their submodules alike: "rich.progress" stays itself, "numpy.core" counts as "numpy"."""
    return modules | {m.split(".")[0] for m in modules}
