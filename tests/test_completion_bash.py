"""`kx completion bash` in a real bash: the script is sourced and its function driven through COMP_WORDS,
COMP_CWORD, COMP_LINE and COMP_POINT as bash's programmable completion sets them, over a real KX_HOME."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine import Engine, load_settings
from engine.text.inputs import from_text

from .helpers import HashEmbedder, run_cli, serving

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _comp_words(line: str) -> list[str]:
    """COMP_WORDS as bash makes them: words split at blanks, and '=' and ':' (COMP_WORDBREAKS) words of their
    own; a blank at the end starts an empty word."""
    words = [piece for word in line.split() for piece in re.findall(r"[=:]+|[^=:]+", word)]
    return [*words, ""] if line.endswith(" ") or not words else words


def complete(line: str, env: dict[str, str] | None = None, cwd: Path | None = None,
             script: str | None = None) -> list[str]:
    """What bash offers for `line` (the cursor at its end), the completion script sourced."""
    script = script if script is not None else run_cli("completion", "bash").stdout
    words = _comp_words(line)
    probe = (f"{script}\nCOMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
             f"COMP_LINE={shlex.quote(line)}; COMP_POINT={len(line)}\n"
             '_kx_completion kx "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
             'printf "%s\\n" "${COMPREPLY[@]}"\n')
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c", probe], capture_output=True, text=True,
                         timeout=60, env={**os.environ, **(env or {})}, cwd=cwd)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    return [line for line in out.stdout.splitlines() if line]


@pytest.fixture
def homes(kx_home: Path, tmp_path: Path, hash_engine: Engine) -> Path:
    for name in ("handbook", "hr-policies", "notes"):
        hash_engine.ingest(name, [from_text(f"A note for {name}.")])
    (kx_home / "datasets" / "not-a-dataset").mkdir()   # no catalogue: not listed, as `kx datasets list` skips it
    return kx_home


@pytest.mark.parametrize("command", ["datasets query", "datasets documents", "datasets embed", "datasets rebuild",
                                     "datasets watch", "datasets ingest", "datasets retire", "datasets check",
                                     "eval", "agent run --dataset", "agent run -d"])
def test_each_command_that_takes_a_dataset_completes_its_name(homes: Path, command: str) -> None:
    assert complete(f"kx {command} ") == ["handbook", "hr-policies", "notes"]
    assert complete(f"kx {command} h") == ["handbook", "hr-policies"]


def test_home_on_the_line_wins_and_a_missing_home_offers_nothing(homes: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-home"   # a second home with a dataset of its own
    Engine(load_settings({"home": str(other)}), embedder=HashEmbedder()).ingest("elsewhere", [from_text("x")])
    assert complete(f"kx --home {other} datasets query ") == ["elsewhere"]
    assert complete(f"kx --home={other} datasets query ") == ["elsewhere"]
    assert complete("kx datasets query ", env={"KX_HOME": str(tmp_path / "none")}) == []


def test_modes_choices_where_kinds_settings_and_models(homes: Path) -> None:
    assert complete("kx datasets query notes --mode ") == ["hybrid", "dense", "sparse"]
    assert complete("kx datasets query notes --mode=d") == ["dense"]
    assert complete("kx datasets query notes --where ") == ["name:", "type:", "after:", "before:", "pages:", "ref:"]
    assert complete("kx datasets query notes --where type:p") == ["pdf"]   # bash's word is "p", after the ':'
    assert complete("kx datasets query notes --where ty") == ["type:"]
    assert complete("kx --set chunk_") == ["chunk_size=", "chunk_overlap="]
    assert complete("kx --set embed_model=default") == ["default", "default-int8"]   # bash's word: after '='
    assert complete("kx datasets rebuild notes --as n8 --set embed_model=") == ["default", "default-int8", "none"]
    assert complete("kx --set stopwords=o") == ["on", "off"]
    assert complete("kx models prepare --model def") == ["default", "default-int8"]
    assert complete("kx datasets q") == ["query"]
    assert complete("kx datasets ingest notes --s") == ["--sync", "--strict"]
    assert complete("kx completion ") == ["bash", "zsh", "fish"]


def test_folders_where_a_folder_is_expected_files_where_files_are(homes: Path, tmp_path: Path) -> None:
    tmp_path = tmp_path / "work"
    (tmp_path / "inbox").mkdir(parents=True)
    (tmp_path / "index.md").write_text("# Index")
    assert complete("kx datasets watch notes ", cwd=tmp_path) == ["inbox"]
    assert complete("kx datasets watch notes i", cwd=tmp_path) == ["inbox"]
    assert complete("kx mcp --allow-path ", cwd=tmp_path) == ["inbox"]
    assert complete("kx datasets retire notes --from i", cwd=tmp_path) == ["inbox"]
    assert sorted(complete("kx datasets ingest notes i", cwd=tmp_path)) == ["inbox", "index.md"]


def test_through_a_gateway_the_names_come_from_it(homes: Path, tmp_path: Path) -> None:
    """With --gateway the script asks `kx --gateway URL datasets list --names` (a real gateway on loopback)."""
    engine = Engine(load_settings({"home": str(homes)}), embedder=HashEmbedder())
    try:
        with serving(engine) as (url, token):
            bin_dir = tmp_path / "bin"
            bin_dir.mkdir()
            kx = bin_dir / "kx"   # the kx of this checkout, as the user's PATH would hold it
            kx.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m kx_tui \"$@\"\n")
            kx.chmod(0o755)
            env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "KX_HOME": str(tmp_path / "elsewhere"),
                   "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
            assert complete(f"kx --gateway {url} --token {token} datasets query h", env=env) == \
                ["handbook", "hr-policies"]
    finally:
        engine.close()


def _click_complete(shell: str, words: str, cword: int, env: dict[str, str]) -> list[str]:
    """What click's callback answers (the path zsh's and fish's scripts take at each TAB)."""
    out = subprocess.run([sys.executable, "-m", "kx_tui"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **env, "_KX_COMPLETE": f"{shell}_complete", "COMP_WORDS": words,
                              "COMP_CWORD": str(cword), "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    return out.stdout.splitlines()


def test_zsh_and_fish_through_click_complete_datasets_and_folders_too(homes: Path) -> None:
    zsh = _click_complete("zsh", "kx datasets query h", 3, {"KX_HOME": str(homes)})
    assert [line for line in zsh if line not in ("plain", "_")] == ["handbook", "hr-policies"]
    assert _click_complete("bash", "kx mcp --allow-path ", 3, {}) == ["dir,"]
    assert "plain,embed_model=default-int8" in _click_complete("bash", "kx --set embed_model=d", 2, {})
