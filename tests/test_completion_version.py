"""`kx --version` and `kx completion bash|zsh|fish`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from engine.version import __version__

from .helpers import REPO, run_cli


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


@pytest.mark.parametrize(("shell", "marker"), [("bash", "complete -F _kx_completion kx"),
                                               ("zsh", "#compdef kx"), ("fish", "complete --no-files --command kx")])
def test_completion_prints_each_shells_script(shell: str, marker: str) -> None:
    result = run_cli("completion", shell)
    assert result.code == 0 and marker in result.stdout
    assert ("_KX_COMPLETE" in result.stdout) == (shell != "bash")   # bash's answers without calling kx


@pytest.mark.slow
def test_the_completion_answers_commands_options_and_choices() -> None:
    assert "datasets" in _complete("kx dat", 1) and "mcp" in _complete("kx m", 1)
    assert _complete("kx datasets query notes --mode ", 5) == ["hybrid", "dense", "sparse"]
    assert "--allow-ingest" in _complete("kx mcp --allow", 2)
    assert _complete("kx completion ", 2) == ["bash", "zsh", "fish"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("kx") is None, reason="needs bash and kx on PATH")
def test_bash_sources_the_script_and_completes() -> None:
    """What a user's shell does: source the script, then ask its function for `kx datasets q<TAB>`."""
    script = run_cli("completion", "bash").stdout
    # bash calls the function with the command, the word being completed and the one before it
    probe = script + ('\nCOMP_WORDS=(kx datasets q); COMP_CWORD=2; _kx_completion kx q datasets; '
                      'printf "%s\\n" "${COMPREPLY[@]}"\n')
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c", probe], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
    assert out.stdout.split() == ["query"], out.stderr
