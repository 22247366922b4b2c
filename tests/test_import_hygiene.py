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


def test_no_engine_module_imports_the_ui() -> None:
    offenders = [p.name for p in (REPO / "engine").glob("*.py")
                 if "kx_tui" in p.read_text() or "import textual" in p.read_text()]
    assert offenders == []
