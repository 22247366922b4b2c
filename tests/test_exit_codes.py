"""The README's exit-code table, row by row, through the real CLI and the real model.

Rows tested elsewhere, named in the table: the watcher's refused file (tests/test_watch.py
test_cli_watch_json_lines_then_sigterm_exits_zero), a stop by Ctrl-C / SIGTERM (tests/test_stopping.py),
one exit code per status (tests/test_cli_ingest.py test_command_errors_are_one_line_with_the_status_exit_code).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import Status

from .helpers import run_cli

pytestmark = pytest.mark.slow


def _folder(root: Path) -> Path:
    """Two readable files and two that no parser reads (a PDF that is not one, a binary file)."""
    root.mkdir(parents=True)
    (root / "leave.md").write_text("# Leave\n\nAnnual leave is 25 days; five carry over.", encoding="utf-8")
    (root / "vpn.txt").write_text("The KX-4021 hardware token is required for VPN access.", encoding="utf-8")
    (root / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    (root / "tool.bin").write_bytes(bytes(range(256)) * 4)
    return root


def _refusal_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("refused")]


def test_refused_files_found_in_a_folder_are_reported_not_failed(tmp_path: Path, kx_home: Path) -> None:
    docs = _folder(tmp_path / "docs")
    result = run_cli("datasets", "ingest", "docs", str(docs), "--json")
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["added"], report["refused"]) == (2, 2)
    lines = _refusal_lines(result.stderr)
    assert len(lines) == 2 and any("broken" in line for line in lines) and any("tool" in line for line in lines)
    assert "error:" not in result.stderr

    plain = run_cli("datasets", "ingest", "docs", str(docs))   # the nightly run: unchanged and refused, exit 0
    assert plain.code == 0, plain.stderr
    assert len(_refusal_lines(plain.stderr)) == 2 and "refused" not in plain.stdout.splitlines()[0]
    assert "0 added" in plain.stdout and "2 unchanged, 2 refused" in plain.stdout

    synced = run_cli("datasets", "ingest", "docs", str(docs), "--sync")   # the same rule with --sync
    assert synced.code == 0, synced.stderr

    strict = run_cli("datasets", "ingest", "docs", str(docs), "--strict")
    assert strict.code == Status.INVALID_ARGUMENT.exit_code
    assert strict.stderr.splitlines()[-1].startswith("error: INVALID_ARGUMENT: 2 of 4 document(s) refused")


def test_a_refused_file_named_explicitly_fails_even_beside_a_folder(tmp_path: Path, kx_home: Path) -> None:
    docs = _folder(tmp_path / "docs")
    named = tmp_path / "named.bin"
    named.write_bytes(bytes(range(256)) * 4)
    result = run_cli("datasets", "ingest", "docs", str(docs), "--file", str(named))
    assert result.code == Status.INVALID_ARGUMENT.exit_code
    last = result.stderr.splitlines()[-1]
    assert "3 of 5 document(s) refused; the others were ingested; 1 of them named explicitly" in last
    assert len(_refusal_lines(result.stderr)) == 3


def test_an_ingest_that_stores_nothing_fails_whatever_the_source(tmp_path: Path, kx_home: Path) -> None:
    unreadable = tmp_path / "unreadable"
    unreadable.mkdir()
    (unreadable / "tool.bin").write_bytes(bytes(range(256)) * 4)
    result = run_cli("datasets", "ingest", "none", str(unreadable), "--json")
    assert result.code == Status.INVALID_ARGUMENT.exit_code
    assert "1 of 1 document(s) refused; nothing was ingested" in result.stderr
    assert json.loads(result.stdout)["refused"] == 1
    assert not (kx_home / "datasets" / "none").exists()


def test_a_usage_error_exits_2(kx_home: Path) -> None:
    assert run_cli("datasets", "ingest", "docs", "--no-such-flag").code == 2
    assert run_cli("datasets", "query").code == 2
