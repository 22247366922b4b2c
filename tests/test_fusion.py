"""The end-to-end half of tests/unit/test_fusion.py (a model, processes or servers there):
Tests for engine.fusion against values worked out by hand in the comments.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .unit.test_fusion import ROOT  # noqa: F401 - helpers and fixtures


@pytest.mark.slow  # a fresh process
def test_import_does_not_pull_in_torch() -> None:
    code = "import sys, engine.fusion; sys.exit(1 if 'torch' in sys.modules else 0)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
