"""Messages that name the fix: an empty filtered answer names its filter, `kx info` says when the model is
prepared (issue 41 item 5; the fingerprint refusals are in tests/test_rebuild.py and test_cli_ingest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import run_cli

pytestmark = pytest.mark.slow


def test_an_empty_filtered_answer_names_the_filter_and_the_command_without_it(kx_home: Path) -> None:
    assert run_cli("datasets", "ingest", "notes", "--text", "The refund window is thirty days.").code == 0
    answer = run_cli("datasets", "query", "notes", "refund window", "--where", "type:pdf", "--mode", "sparse")
    assert answer.code == 0, answer.stderr
    assert "No passage matches the filter --where type:pdf. Try it without: kx datasets query notes " \
           "'refund window'" in answer.stdout
    unfiltered = run_cli("datasets", "query", "notes", "zebra crossings", "--mode", "sparse")
    assert "No passage matches. Try other words" in unfiltered.stdout


def test_kx_info_says_the_model_is_prepared_once_its_graph_is_there(kx_home: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    prepared = run_cli("info")   # the session's export cache holds the graph already
    assert prepared.code == 0 and "(prepared; loads on first use)" in prepared.stdout, prepared.stdout
    monkeypatch.setenv("KX_MODEL_CACHE", str(tmp_path / "empty-cache"))
    fresh = run_cli("info")
    assert "(prepared on first use)" in fresh.stdout and "when first used" not in fresh.stdout


def test_markdown_passages_print_as_text_and_raw_shows_the_stored_marks(kx_home: Path, tmp_path: Path) -> None:
    page = tmp_path / "refunds.md"
    page.write_text("# Refunds and Returns\n\n## The window\n\nUse the **RMA-7** form within [thirty days](x.md).\n")
    assert run_cli("datasets", "ingest", "hb", str(page)).code == 0
    shown = run_cli("datasets", "query", "hb", "RMA-7 form", "--mode", "sparse")
    assert shown.code == 0 and "Use the RMA-7 form within thirty days." in shown.stdout, shown.stdout
    assert "**" not in shown.stdout and "##" not in shown.stdout
    assert "refunds — Refunds and Returns" in shown.stdout   # the title: the first heading
    raw = run_cli("datasets", "query", "hb", "RMA-7 form", "--mode", "sparse", "--raw")
    assert "Use the **RMA-7** form within [thirty days](x.md)." in raw.stdout
