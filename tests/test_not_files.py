"""The end-to-end half of tests/unit/test_not_files.py (a model, processes or servers there):
Files that are not files: devices, FIFOs, sockets and links out of a watched folder.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from engine.errors import Status

from .helpers import run_kx
from .unit.test_not_files import posix_only  # noqa: F401 - helpers and fixtures


@pytest.mark.slow  # spawns kx
@posix_only
def test_dev_zero_given_as_a_file_is_refused_at_once_by_the_cli(kx_home: Path) -> None:
    started = time.monotonic()
    result = run_kx("datasets", "ingest", "handbook", "--file", "/dev/zero", env={"KX_HOME": str(kx_home)},
                    timeout=60)
    assert result.code == Status.INVALID_ARGUMENT.exit_code, result.stderr
    assert "/dev/zero is a character device, not a regular file" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 60
    assert not (kx_home / "datasets" / "handbook").exists()  # nothing went in, no empty dataset left


@pytest.mark.slow  # spawns kx
@posix_only
def test_a_fifo_through_the_cli_does_not_hang(kx_home: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    note = tmp_path / "note.md"
    note.write_text("Lunch is served at noon on the third floor.")
    result = run_kx("datasets", "ingest", "notes", "--file", str(fifo), "--file", str(note),
                    env={"KX_HOME": str(kx_home)}, timeout=120)
    assert "FIFO (named pipe), not a regular file" in result.stdout + result.stderr
    assert "note" in result.stdout and result.code == Status.INVALID_ARGUMENT.exit_code  # the other one went in
    assert "Traceback" not in result.stderr
