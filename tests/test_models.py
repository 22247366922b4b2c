"""Embedding models: described from their files, found offline, and refused clearly.

Everything here is real: a tiny GPT-2 causal LM with random weights is built
in a temporary folder (no network, no downloads), described by
`engine.embedding.cards`, loaded by the real sentence-transformers embedder and driven
through the real `kx` CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine import Engine, KxError, Status, load_settings
from engine.embedding.cards import describe_model, model_card_for, resolve_model_path
from engine.records import Notice
from engine.text.inputs import from_text

from .helpers import REPO, CliResult, run_cli

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


@pytest.mark.slow  # builds a GPT-2 with transformers (torch): seconds
def test_a_plain_causal_lm_is_described_as_a_chat_model(tiny_chat_model: Path) -> None:
    card = describe_model(tiny_chat_model)
    assert card.causal_lm is True
    assert card.architecture == "GPT2LMHeadModel"
    assert card.dimension == 32
    assert card.pooling == "mean"
    assert card.normalized is False  # no Normalize module: a bare transformers folder
    assert card.name == "tiny-chat"
    assert card.model_id.startswith("tiny-chat@")
    assert card.path == tiny_chat_model


@pytest.mark.slow  # builds a GPT-2 with transformers (torch): seconds
def test_the_model_id_is_stable_and_follows_the_files(tiny_chat_model: Path, tmp_path: Path) -> None:
    first = describe_model(tiny_chat_model).model_id
    assert describe_model(tiny_chat_model).model_id == first

    # the same files in another place (same folder name) are the same model ...
    same = _copy_model(tiny_chat_model, tmp_path / "elsewhere" / tiny_chat_model.name)
    assert describe_model(same).model_id == first

    # ... and a changed config makes it another model, though the name stays
    changed = _copy_model(tiny_chat_model, tmp_path / "edited" / tiny_chat_model.name)
    config = json.loads((changed / "config.json").read_text())
    config["n_layer"] = 2
    (changed / "config.json").write_text(json.dumps(config, indent=2))
    edited = describe_model(changed)
    assert edited.name == "tiny-chat"
    assert edited.model_id != first
    assert edited.model_id.split("@")[0] == first.split("@")[0]


@pytest.mark.slow  # builds a GPT-2 with transformers (torch): seconds
def test_info_advises_a_dedicated_embedder_for_a_chat_model(tiny_chat_model: Path, monkeypatch) -> None:
    monkeypatch.setenv("KX_SERVE_EMBED_MODEL", str(tiny_chat_model))

    result = run_cli("info", "--json")
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["embed_model"]["causal_lm"] is True
    assert data["embed_model"]["architecture"] == "GPT2LMHeadModel"
    assert data["advisories"], "a chat model must come with an advisory"
    assert any("chat" in a and "dedicated embedder" in a for a in data["advisories"]), data["advisories"]

    human = run_cli("info")
    assert human.code == 0, human.stderr
    assert "chat / causal LM" in human.stdout
    advisory_lines = [line for line in human.stdout.splitlines() if line.startswith("advisory:")]
    assert len(advisory_lines) == 1 and "dedicated embedder" in advisory_lines[0], human.stdout
    assert "Traceback" not in result.stderr + human.stderr


@pytest.mark.slow  # builds a GPT-2 with transformers (torch): seconds
def test_ingest_with_a_chat_model_warns_once_and_still_adds(tiny_chat_model: Path, kx_home: Path,
                                                            monkeypatch) -> None:
    monkeypatch.setenv("KX_SERVE_EMBED_MODEL", str(tiny_chat_model))

    result = run_cli("datasets", "ingest", "chatty", "--text", "some words here")
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    advisories = [line for line in result.stderr.splitlines() if line.startswith("advisory:")]
    assert len(advisories) == 1, result.stderr
    assert "dedicated embedder" in advisories[0] and "chat" in advisories[0]
    assert "1 added" in result.stdout, result.stdout

    listed = run_cli("datasets", "list", "--json")
    assert listed.code == 0, listed.stderr
    (summary,) = json.loads(listed.stdout)
    assert summary["name"] == "chatty" and summary["documents"] == 1
    assert summary["embed_model"] == describe_model(tiny_chat_model).model_id

    as_json = run_cli("datasets", "ingest", "chatty", "--text", "hello world", "--json")
    assert as_json.code == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["added"] == 1 and report["documents"] == 2
    assert len(report["advisories"]) == 1 and "dedicated embedder" in report["advisories"][0]


@pytest.mark.slow  # builds a GPT-2 with transformers (torch): seconds
def test_the_engine_reports_the_advisory(tiny_chat_model: Path, monkeypatch) -> None:
    monkeypatch.setenv("KX_SERVE_EMBED_MODEL", str(tiny_chat_model))
    events: list[object] = []

    report = Engine(load_settings()).ingest("chatty", [from_text("the chat model")], on_event=events.append)

    assert report.count("added") == 1 and report.created and report.documents == 1
    assert len(report.advisories) == 1 and "dedicated embedder" in report.advisories[0]
    notices = [e for e in events if isinstance(e, Notice) and e.kind == "advisory"]
    assert [n.message for n in notices] == report.advisories
    assert report.to_dict()["advisories"] == report.advisories


@pytest.mark.slow  # builds a GPT-2 with transformers (torch): seconds
def test_a_model_id_is_found_in_the_local_hugging_face_cache(tiny_chat_model: Path, hub_cache: Path,
                                                            kx_home: Path) -> None:
    # huggingface_hub reads HF_HUB_CACHE once, when it is imported, and this
    # process imported it long ago; a fresh interpreter sees the cache as a user's would.
    env = _clean_env(HF_HUB_CACHE=str(hub_cache), HF_HUB_OFFLINE="1", KX_HOME=str(kx_home),
                     KX_SERVE_EMBED_MODEL="acme/tiny-chat")
    done = subprocess.run([sys.executable, "-c", _CACHE_CHECK], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])

    snapshot = hub_cache / "models--acme--tiny-chat" / "snapshots" / SNAPSHOT
    assert Path(found["path"]) == snapshot.resolve()
    assert found["name"] == "acme/tiny-chat" and found["info_name"] == "acme/tiny-chat"
    assert found["model_id"].startswith("acme/tiny-chat@")
    assert found["causal_lm"] is True
    # the same files are the same model, whether found by path or by id
    assert found["model_id"].split("@")[1] == describe_model(tiny_chat_model).model_id.split("@")[1]


@pytest.mark.slow  # builds a GPT-2 with transformers (torch): seconds
def test_a_cached_model_id_loads_and_ingests_in_a_real_process(kx_ingest_by_model_id: CliResult) -> None:
    result = kx_ingest_by_model_id
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert report["added"] == 1 and report["documents"] == 1 and report["created"] is True
    assert len(report["advisories"]) == 1 and "acme/tiny-chat" in report["advisories"][0]
    advisories = [line for line in result.stderr.splitlines() if line.startswith("advisory:")]
    assert len(advisories) == 1 and "dedicated embedder" in advisories[0], result.stderr


@pytest.mark.slow  # builds a GPT-2 with transformers (torch): seconds
def test_a_cached_model_id_prints_nothing_but_the_advisory_on_stderr(kx_ingest_by_model_id: CliResult) -> None:
    result = kx_ingest_by_model_id
    assert result.code == 0, result.stderr
    # no library noise: the advisory, and (when the load is slow) kx's own plain progress line
    lines = [line for line in result.stderr.strip().splitlines() if not line.startswith("kx: ")]
    assert len(lines) == 1 and lines[0].startswith("advisory:"), repr(result.stderr)


@pytest.mark.slow  # builds a GPT-2 with transformers (torch): seconds
def test_a_model_whose_weights_are_broken_is_a_failed_precondition(tiny_chat_model: Path, kx_home: Path,
                                                                  tmp_path: Path, monkeypatch) -> None:
    broken = _copy_model(tiny_chat_model, tmp_path / "broken-chat")
    weights = broken / "model.safetensors"
    assert weights.exists()
    weights.write_bytes(b"\xde\xad\xbe\xef not safetensors " * 64)
    assert describe_model(broken).causal_lm  # the files still describe a model ...
    monkeypatch.setenv("KX_SERVE_EMBED_MODEL", str(broken))

    result = run_cli("datasets", "ingest", "x", "--text", "some words here")

    assert result.code == 5, result.stderr  # ... that cannot be loaded
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("error: FAILED_PRECONDITION:")
    assert "could not be loaded" in errors[0] and "broken-chat" in errors[0]
    # the chat-model advisory may come first; nothing else reaches stderr
    assert all(line.startswith(("advisory:", "error:")) for line in result.stderr.strip().splitlines())
    _no_datasets_left(kx_home)
