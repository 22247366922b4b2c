"""Fuzzing with hypothesis: CLI argument lists, JSONL lines, file bytes and gateway requests.

A fast slice runs by default (25 inputs per target); `--fuzz-examples N`
(or KX_FUZZ_EXAMPLES=N) runs N per target, KX_FUZZ_SEED picks the seed.
Every target counts the inputs it really ran and asserts: no traceback, no
INTERNAL error, no HTTP 500, every refusal a KxError status. The model is
the tiny test embedder (the inputs, not the model, are under test), and
commands that would run until stopped (`serve`, `watch`, the TUI) return
at once.

The end-to-end half (a model, processes or servers); the rest is tests/unit/test_fuzz.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given

from engine.text.inputs import from_file

from ..helpers import needs_shared
from ..unit.test_fuzz import (  # noqa: F401 - helpers and fixtures
    DOCS,
    STATUS_NAMES,
    _assert_refusals_are_statuses,
    _engine,
    _file_bytes,
    _fresh_random,
    _real_files,
    budget,
)


@pytest.mark.slow  # ~2 s of extraction per run even at the fast slice
@needs_shared("docs")
def test_file_bytes_random_and_mutated_real_files(tmp_path: Path, budget) -> None:
    engine, ran, originals = _engine(), [], _real_files()

    @budget
    @given(case=_file_bytes(originals))
    def probe(case) -> None:
        data, suffix = case
        path = tmp_path / f"fuzzed{suffix}"
        path.write_bytes(data)
        doc = from_file(path, 1 << 20)
        ran.append(1)
        _fresh_random()
        _assert_refusals_are_statuses(engine.ingest("files", [doc]))

    probe()
    engine.close()
    print(f"\nfuzz: {len(ran)} inputs")
    assert ran
