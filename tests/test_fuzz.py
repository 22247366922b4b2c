"""The end-to-end half of tests/unit/test_fuzz.py (a model, processes or servers there):
Fuzzing with hypothesis: CLI argument lists, JSONL lines, file bytes and gateway requests.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given

from engine.text.inputs import from_file

from .helpers import needs_shared
from .unit.test_fuzz import (  # noqa: F401 - helpers and fixtures
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
