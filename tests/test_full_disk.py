"""A full disk: RESOURCE_EXHAUSTED naming the path, nothing committed lost, the same ingest completes later.

KX_HOME lives on a small tmpfs (needs root for `mount`; skipped with the
reason otherwise — CI runs as root). A ballast file takes part of it, so
"freeing space" is deleting the ballast. Documents are ingested in batches
until the disk refuses one; then the dataset must answer from what was
committed, and after the ballast goes the very same batch must go in with
nothing doubled. The tiny test embedder keeps the fill fast: the failure
is in storage, not in the model.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from engine import Engine, KxError, Status, load_settings
from engine.text.inputs import from_text

from .helpers import HashEmbedder, assert_dataset_consistent, catalogue_counts

pytestmark = pytest.mark.slow  # mounts a tmpfs and fills it: tens of seconds

MOUNT_BYTES = 12 * 2**20
BALLAST_BYTES = 8 * 2**20  # what "freeing space" frees: whoosh needs about twice its size to merge


@pytest.fixture
def small_disk(tmp_path: Path):
    if os.name != "posix" or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for KX_HOME needs root (CI runs as root)")
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={MOUNT_BYTES}", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _batch(number: int, size: int = 10) -> list:
    # distinct words per document, so every one is new bytes and BM25 can find it by its own tag
    return [from_text(f"record {number}-{i} tag{number}x{i} " + " ".join(f"w{number}_{i}_{j}" for j in range(200)),
                      name=f"doc-{number}-{i}") for i in range(size)]


def test_a_full_disk_is_resource_exhausted_and_loses_nothing(small_disk: Path) -> None:
    home = small_disk / "home"
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\0" * BALLAST_BYTES)
    settings = load_settings({"home": str(home), "chunk_size": 1000, "chunk_overlap": 100,
                              "ingest_commit_passages": 64})
    engine = Engine(settings, embedder=HashEmbedder(dimension=384))
    batches, failed = 0, None
    for number in range(200):
        try:
            engine.ingest("notes", _batch(number))
            batches += 1
        except KxError as exc:
            failed = (number, exc)
            break
    assert failed is not None, "the disk never filled up"
    number, error = failed
    assert batches >= 1, error.message
    assert error.status is Status.RESOURCE_EXHAUSTED
    assert error.message.startswith("disk full") and str(small_disk) in error.message, error.message

    # what was committed stays queryable, and is whole
    docs, passages = catalogue_counts(home, "notes")
    assert docs >= batches * 10
    hit = engine.query("notes", "tag0x3", mode="sparse", k=1).hits[0]
    assert hit.document_name == "doc-0-3"
    assert engine.query("notes", "record", mode="dense", k=3).hits

    # room again: the same batch goes in, nothing doubled
    ballast.unlink()
    report = engine.ingest("notes", _batch(number))
    assert {r.status for r in report.results} <= {"added", "unchanged"}
    assert report.documents == (batches + 1) * 10
    found = engine.query("notes", f"tag{number}x9", mode="sparse", k=1).hits[0]
    assert found.document_name == f"doc-{number}-9"
    engine.close()
    assert_dataset_consistent(home, "notes", unique_names=True)
    assert catalogue_counts(home, "notes")[0] == (batches + 1) * 10
