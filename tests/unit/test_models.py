"""Embedding models: described from their files, found offline, and refused clearly.

Everything here is real: a tiny GPT-2 causal LM with random weights is built
in a temporary folder (no network, no downloads), described by
`engine.embedding.cards`, loaded by the real sentence-transformers embedder and driven
through the real `kx` CLI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine import KxError, Status
from engine.embedding.cards import model_card_for, resolve_model_path

from ..helpers import REPO, CliResult, run_cli

VOCAB = ["[UNK]", "[PAD]", "[EOS]", "some", "words", "here", "hello", "world", "the", "a", "chat", "model"]


SNAPSHOT = "0123456789abcdef0123456789abcdef01234567"  # a 40-hex-digit commit hash


@pytest.fixture(scope="module")
def tiny_chat_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain GPT-2 causal LM (no modules.json, like a chat model), random weights, 32 dims."""
    import transformers
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    folder = tmp_path_factory.mktemp("models") / "tiny-chat"
    eos, pad = VOCAB.index("[EOS]"), VOCAB.index("[PAD]")  # GPT-2's own ids (50256) lie outside this vocab
    config = transformers.GPT2Config(n_embd=32, n_layer=1, n_head=2, n_positions=64, vocab_size=len(VOCAB),
                                     bos_token_id=eos, eos_token_id=eos, pad_token_id=pad)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)

    tokenizer = Tokenizer(WordLevel({word: i for i, word in enumerate(VOCAB)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", eos_token="[EOS]",
    )
    fast.save_pretrained(folder)
    assert (folder / "config.json").exists() and not (folder / "modules.json").exists()
    return folder


def _copy_model(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


@pytest.fixture(scope="module")
def hub_cache(tiny_chat_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local Hugging Face cache holding the tiny model as acme/tiny-chat, as a download would leave it."""
    hub = tmp_path_factory.mktemp("hf") / "hub"
    repo = hub / "models--acme--tiny-chat"
    _copy_model(tiny_chat_model, repo / "snapshots" / SNAPSHOT)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(SNAPSHOT)
    return hub


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without kx or Hugging Face settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KX_", "HF_", "HUGGINGFACE_", "TRANSFORMERS_"))}
    env.update(extra)
    return env


def _error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one error line on stderr, got: {stderr!r}"
    return lines[0]


def _no_datasets_left(kx_home: Path) -> None:
    root = kx_home / "datasets"
    assert not root.exists() or not any(root.iterdir()), f"left behind: {list(root.iterdir())}"


def test_the_bundled_default_is_a_normalised_sentence_embedder() -> None:
    card = model_card_for("default")
    assert card is not None
    assert card.causal_lm is False
    assert card.dimension == 384
    assert card.pooling == "mean"
    assert card.normalized is True
    assert card.model_id.startswith("all-MiniLM-L6-v2@")
    assert model_card_for("none") is None


_CACHE_CHECK = """
import json
from engine import Engine, load_settings
from engine.embedding.cards import model_card_for, resolve_model_path
card = model_card_for("acme/tiny-chat")
print(json.dumps({
    "path": str(resolve_model_path("acme/tiny-chat")),
    "name": card.name,
    "model_id": card.model_id,
    "causal_lm": card.causal_lm,
    "info_name": Engine(load_settings()).info()["embed_model"]["name"],
}))
"""


@pytest.fixture(scope="module")
def kx_ingest_by_model_id(hub_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> CliResult:
    """`kx datasets ingest` run as a user runs it, its model named by id from the local cache (run once)."""
    env = _clean_env(HF_HUB_CACHE=str(hub_cache), KX_HOME=str(tmp_path_factory.mktemp("kx-home-by-id")),
                     KX_SERVE_EMBED_MODEL="acme/tiny-chat")
    done = subprocess.run([sys.executable, "-m", "kx_tui", "datasets", "ingest", "chatty", "--text",
                           "some words here", "--json"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    return CliResult(done.returncode, done.stdout, done.stderr)


def test_a_model_id_not_in_the_cache_is_a_failed_precondition(kx_home: Path, monkeypatch) -> None:
    monkeypatch.setenv("KX_SERVE_EMBED_MODEL", "acme/not-there")

    result = run_cli("datasets", "ingest", "x", "--text", "hi")

    assert result.code == Status.FAILED_PRECONDITION.exit_code == 5
    line = _error_line(result.stderr)
    assert line.startswith("error: FAILED_PRECONDITION:")
    assert "local Hugging Face cache" in line and "KX_SERVE_EMBED_MODEL" in line and "acme/not-there" in line
    assert "Traceback" not in result.stderr
    _no_datasets_left(kx_home)

    with pytest.raises(KxError) as caught:
        resolve_model_path("acme/not-there")
    assert caught.value.status is Status.FAILED_PRECONDITION


def test_a_missing_model_folder_is_a_failed_precondition(kx_home: Path, tmp_path: Path, monkeypatch) -> None:
    missing = tmp_path / "no-such-model"
    monkeypatch.setenv("KX_SERVE_EMBED_MODEL", str(missing))

    result = run_cli("datasets", "ingest", "x", "--text", "hi")

    assert result.code == 5
    line = _error_line(result.stderr)
    assert line.startswith("error: FAILED_PRECONDITION:")
    assert str(missing) in line and "does not exist" in line and "KX_SERVE_EMBED_MODEL" in line
    assert "Traceback" not in result.stderr
    _no_datasets_left(kx_home)


def test_no_model_refuses_text_ingest_naming_the_setting(kx_home: Path, monkeypatch) -> None:
    monkeypatch.setenv("KX_SERVE_EMBED_MODEL", "none")

    result = run_cli("datasets", "ingest", "x", "--text", "hi")

    assert result.code == 5
    line = _error_line(result.stderr)
    assert line.startswith("error: FAILED_PRECONDITION:")
    assert "KX_SERVE_EMBED_MODEL" in line
    assert "Traceback" not in result.stderr
    _no_datasets_left(kx_home)
