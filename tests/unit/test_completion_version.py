"""`kx --version` and `kx completion bash|zsh|fish`."""

from __future__ import annotations

import os
import subprocess
import sys

from engine.version import __version__

from ..helpers import REPO, run_cli


def test_version_is_the_package_metadata() -> None:
    result = run_cli("--version")
    assert result.code == 0 and result.stdout == f"kx {__version__}\n"


def test_completion_refuses_another_shell() -> None:
    result = run_cli("completion", "tcsh")
    assert result.code == 2 and "'tcsh' is not one of 'bash', 'zsh', 'fish'" in result.stderr


def _complete(words: str, cword: int) -> list[str]:
    env = {**os.environ, "_KX_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(cword),
           "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "kx_tui"], env=env, capture_output=True, text=True, timeout=120,
                         cwd=REPO).stdout
    return [line.split(",", 1)[1] for line in out.splitlines()]
