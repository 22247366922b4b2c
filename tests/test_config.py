"""Settings: one precedence, clear refusals, and `kx info` saying where each value came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import KxError, Status, load_settings

from .helpers import run_cli


def test_defaults_apply_when_nothing_is_set(kx_home: Path) -> None:
    s = load_settings()
    assert (s.chunk_size, s.chunk_overlap, s.rrf_k, s.default_k, s.max_k) == (1000, 200, 60, 10, 64)
    assert s.home == kx_home
    assert s.sources["chunk_size"] == "default"
    assert s.sources["home"] == "env KX_HOME"


def test_precedence_is_defaults_then_file_then_env_then_flags(kx_home: Path, monkeypatch) -> None:
    kx_home.mkdir(parents=True)
    (kx_home / "config.toml").write_text("chunk_size = 800\nchunk_overlap = 100\nrrf_k = 30\nstopwords = false\n")
    monkeypatch.setenv("KX_CHUNK_OVERLAP", "150")
    monkeypatch.setenv("KX_RRF_K", "40")
    s = load_settings({"rrf_k": "50"})
    assert s.chunk_size == 800 and s.sources["chunk_size"].startswith("config file")
    assert s.chunk_overlap == 150 and s.sources["chunk_overlap"] == "env KX_CHUNK_OVERLAP"
    assert s.rrf_k == 50 and s.sources["rrf_k"] == "flag"
    assert s.stopwords is False
    assert s.max_k == 64 and s.sources["max_k"] == "default"


@pytest.mark.parametrize("env, value, named", [
    ("KX_CHUNK_SIZE", "abc", "chunk_size"),
    ("KX_STOPWORDS", "maybe", "stopwords"),
    ("KX_MMR_LAMBDA", "1.5", "mmr_lambda"),
    ("KX_MAX_K", "0", "max_k"),
    ("KX_BM25_B", "nan", "bm25_b"),
])
def test_a_malformed_value_is_invalid_argument_naming_the_setting(monkeypatch, env, value, named) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(KxError) as caught:
        load_settings()
    assert caught.value.status is Status.INVALID_ARGUMENT
    assert named in caught.value.message and env in caught.value.message


def test_overlap_must_be_smaller_than_size(monkeypatch) -> None:
    monkeypatch.setenv("KX_CHUNK_SIZE", "300")
    monkeypatch.setenv("KX_CHUNK_OVERLAP", "300")
    with pytest.raises(KxError) as caught:
        load_settings()
    assert caught.value.status is Status.INVALID_ARGUMENT
    assert "chunk_overlap" in caught.value.message and "chunk_size" in caught.value.message


def test_a_broken_or_unknown_config_file_is_named(kx_home: Path) -> None:
    kx_home.mkdir(parents=True)
    (kx_home / "config.toml").write_text("chunk_size = [\n")
    with pytest.raises(KxError, match="config.toml is not valid TOML"):
        load_settings()
    (kx_home / "config.toml").write_text("chunk_sise = 10\n")
    with pytest.raises(KxError, match="unknown setting.*chunk_sise"):
        load_settings()


def test_kx_info_prints_every_value_and_its_source(kx_home: Path, monkeypatch) -> None:
    monkeypatch.setenv("KX_CHUNK_SIZE", "900")
    result = run_cli("--set", "rrf_k=70", "info", "--json")
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    rows = {row["name"]: row for row in data["settings"]}
    assert {"home", "embed_model", "chunk_size", "chunk_overlap", "stopwords", "rrf_k", "mmr_lambda", "rerank",
            "bm25_k1", "bm25_b", "default_k", "max_k"} <= set(rows)
    assert rows["chunk_size"]["value"] == 900 and rows["chunk_size"]["source"] == "env KX_CHUNK_SIZE"
    assert rows["rrf_k"]["value"] == 70 and rows["rrf_k"]["source"] == "flag"
    assert rows["max_k"]["source"] == "default"
    assert data["embed_model"]["dimension"] == 384 and data["embed_model"]["pooling"] == "mean"

    human = run_cli("info")
    assert human.code == 0
    assert "env KX_CHUNK_SIZE" in human.stdout and "all-MiniLM-L6-v2" in human.stdout


def test_cli_reports_a_malformed_setting_as_one_line(monkeypatch) -> None:
    monkeypatch.setenv("KX_CHUNK_SIZE", "abc")
    result = run_cli("datasets", "list")
    assert result.code == Status.INVALID_ARGUMENT.exit_code
    assert result.stderr.startswith("error: INVALID_ARGUMENT: setting chunk_size")
    assert "Traceback" not in result.stderr


def test_every_setting_is_declared_once_on_its_settings_field() -> None:
    """SPECS (what `kx info`, `--set` and config.toml know) are read off the Settings fields, so a new field
    without its declaration, or a declaration without its field, cannot happen."""
    import dataclasses

    from engine.config import AREAS, SPEC_BY_NAME, SPECS, Settings

    names = [f.name for f in dataclasses.fields(Settings) if f.name != "sources"]
    assert [spec.name for spec in SPECS] == names and set(SPEC_BY_NAME) == set(names)
    assert {spec.area for spec in SPECS} == set(AREAS)
    assert len({spec.env for spec in SPECS}) == len(SPECS)
    described = load_settings().describe()
    assert [row["name"] for row in described] == names


def test_the_readme_settings_table_is_the_declared_one() -> None:
    """The README's table is generated from the declarations (`python -m engine.config`): a setting added,
    renamed or re-documented in engine/config.py shows here until the README is regenerated."""
    from engine.config import settings_table

    from .helpers import REPO

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.index("<!-- settings: generated from engine/config.py")
    start = readme.index("\n", start) + 1
    end = readme.index("<!-- end of settings -->", start)
    assert readme[start:end] == settings_table(), "regenerate the README's table: python -m engine.config"


def test_every_environment_name_is_the_settings_own_name_but_embed_models() -> None:
    """KX_ + the field's name in capitals: a setting added is named by its declaration, not by hand."""
    from engine.config import ENV, SPECS, env_name_of

    for spec in SPECS:
        assert spec.env == ("KX_SERVE_EMBED_MODEL" if spec.name == "embed_model" else env_name_of(spec.name))
        assert getattr(ENV, spec.name) == spec.env
    # the names users set, unchanged by the rule
    assert (ENV.home, ENV.max_document_bytes, ENV.mmr_duplicate_threshold) == (
        "KX_HOME", "KX_MAX_DOCUMENT_BYTES", "KX_MMR_DUPLICATE_THRESHOLD")
    assert load_settings(env={"KX_SERVE_EMBED_MODEL": "none", "KX_MAX_K": "7"}).max_k == 7
