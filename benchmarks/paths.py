"""Where the benchmarks read collections and keep what they build (common.py and vector_cache.py share it)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data"
# Datasets and cached vectors built by one benchmark are reused by the next
# (embedding SciFact costs minutes); KX_BENCH_DIR moves them out of the
# checkout, deleting the folder starts from scratch.
BENCH_DIR = Path(os.environ.get("KX_BENCH_DIR") or REPO / "benchmarks" / "out")
HOME = BENCH_DIR / "home"
