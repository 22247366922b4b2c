"""One very large document goes in with progress that moves, and a stop while it is indexed loses nothing.

Round 2 found a single 15 MB JSONL record silent for 260 s (later ~17 s of
chunking, and today ~2 minutes of keyword indexing on a loaded 2-core
machine) before any progress, and an empty dataset left behind. Stage 1 now
reports a step on one document as `Progress.part` (cutting it into passages,
indexing its passages for keyword search); the CLI shows it as a bar or a
line. These tests use a ~1 MB record (the cost is linear, the shape is the
same) with the reporting interval set to 0, so every callback is an event.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import Engine, load_settings
from engine import ingest as ingest_module
from engine.records import DocumentStatus, Progress
from engine.text.inputs import from_jsonl

from .helpers import HashEmbedder

pytestmark = pytest.mark.slow  # a multi-megabyte document through both stages: tens of seconds

_WORDS = ("harbour lantern orchard velvet granite meadow copper falcon willow ember quartz saffron "
          "glacier thistle cobalt juniper marble tundra walnut cinder").split()


def _huge_record(path: Path, characters: int) -> str:
    paragraphs, size, i = [], 0, 0
    while size < characters:
        words = " ".join(_WORDS[(i * 7 + j) % len(_WORDS)] for j in range(60))
        paragraph = f"Paragraph {i} says: {words}."
        paragraphs.append(paragraph)
        size += len(paragraph) + 2
        i += 1
    text = "\n\n".join(paragraphs)
    path.write_text(json.dumps({"id": "huge", "title": "Huge", "text": text}) + "\n")
    return text


class _Stop(Exception):
    pass


def test_one_huge_record_reports_its_cutting_and_its_indexing(kx_home: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest_module, "PART_SECONDS", 0.0)
    _huge_record(tmp_path / "huge.jsonl", 1_000_000)
    engine = Engine(load_settings({}), embedder=HashEmbedder())
    parts: list[Progress] = []
    report = engine.ingest("big", list(from_jsonl(tmp_path / "huge.jsonl", 50 * 2**20)),
                           on_event=lambda e: parts.append(e) if isinstance(e, Progress) and e.part else None)
    assert [r.status for r in report.results] == [DocumentStatus.ADDED]
    cutting = [p for p in parts if p.part.startswith("cutting huge")]
    indexing = [p for p in parts if p.part.startswith("indexing") and "keyword search" in p.part]
    assert len(cutting) >= 3 and len(indexing) >= 3
    for steps in (cutting, indexing):
        done = [p.part_done for p in steps]
        assert done == sorted(done) and all(0 <= p.part_done <= p.part_total for p in steps)
        assert steps[-1].part_done > steps[0].part_done
    # the indexing step reports both halves: adding the passages, then whoosh writing the commit's postings
    assert any(p.part_done > p.part_total // 2 for p in indexing)
    hits = engine.query("big", "orchard velvet granite", mode="sparse", k=3).hits
    assert hits and hits[0].document_name == "huge"


def test_a_stop_while_a_first_huge_document_is_indexed_keeps_it_and_the_next_ingest_finishes(
        kx_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest_module, "PART_SECONDS", 0.0)
    _huge_record(tmp_path / "huge.jsonl", 400_000)
    engine = Engine(load_settings({}), embedder=HashEmbedder())

    def stop_mid_indexing(event: object) -> None:
        if isinstance(event, Progress) and event.part.startswith("indexing") and event.part_done > 0:
            raise _Stop  # as the CLI's handler raises Interrupted after Ctrl-C

    with pytest.raises(_Stop):
        engine.ingest("big", list(from_jsonl(tmp_path / "huge.jsonl", 50 * 2**20)), on_event=stop_mid_indexing)
    # committed to the catalogue before the stop: the new dataset is kept, not discarded as empty
    assert engine.dataset_summary("big").documents == 1
    again = engine.ingest("big", list(from_jsonl(tmp_path / "huge.jsonl", 50 * 2**20)))
    assert [r.status for r in again.results] == [DocumentStatus.UNCHANGED]
    folder = kx_home / "datasets" / "big"
    sparse = json.loads((folder / "sparse.json").read_text())
    dense = json.loads((folder / "dense.json").read_text())
    passages = engine.dataset_summary("big").passages
    assert sparse["watermark"] == dense["watermark"] and dense["count"] == passages  # both caught up
    hits = engine.query("big", "orchard velvet granite", mode="sparse", k=3).hits
    assert hits and hits[0].document_name == "huge"
