"""Issue 22 end to end with the real model, once on the embedded backend and once on milvus-lite.

One scenario per backend, as a user meets it: a nested folder ingested in one
command (`guide/index` and `api/index` apart), a folder with nothing readable
refused whole (no dataset made), `--where type:pdf` and `name:` globs giving k
hits from a corpus where the filtered passages are under 5 %, and a watched
folder whose file is edited twice (newest only by default, all three with
versions="all"), deleted (retired) and restored, then renamed (its lineage and
version count carried over). The rebuild to int8 is the embedded backend's
(tests/test_rebuild.py); Milvus refuses it, saying why (tests/test_milvus.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine import load_settings
from engine.open_backend import open_backend
from engine.records import DocumentStatus
from engine.text.folders import folder_documents
from engine.watch.events import Ingested, Renamed, Retired, Unchanged
from engine.watch.watcher import FolderWatcher

from .helpers import SHARED_DOCS, EventLog, needs_shared

PDF = SHARED_DOCS / "pdf" / "crazyones.pdf"
TOPICS = ["Invoices are paid by the finance team within thirty days of receipt.",
          "The canteen serves soup and bread every weekday at noon.",
          "Printers on the second floor need a badge to release a job."]


def _tree(root: Path) -> Path:
    files = {"guide/index.md": "# Guide\n\nRefunds are granted within thirty days of purchase.",
             "api/index.md": "# API\n\nThe endpoint /v2/tokens issues a bearer token valid for one hour."}
    files.update({f"notes/{i:03d}.md": f"{TOPICS[i % 3]} Note {i}." for i in range(150)})
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / "papers").mkdir()
    shutil.copy(PDF, root / "papers" / "crazyones.pdf")
    return root


@pytest.mark.slow
@needs_shared("docs", "pdf", "crazyones.pdf")
@pytest.mark.parametrize("kind", ["embedded", "milvus-lite"])
def test_datasets_follow_their_files_end_to_end(kind: str, tmp_path: Path, real_embedder) -> None:
    store = {} if kind == "embedded" else {"backend": "milvus", "milvus_uri": str(tmp_path / "milvus.db")}
    backend = open_backend(load_settings({"chunk_size": 200, "chunk_overlap": 40, **store}), embedder=real_embedder)
    try:
        _folders_and_filters(backend, tmp_path)
        _watched_files(backend, tmp_path / "drop")
    finally:
        backend.close()
        if store:
            from milvus_lite.server_manager import server_manager_instance

            server_manager_instance.release_server(store["milvus_uri"])


def _folders_and_filters(backend, tmp_path: Path) -> None:
    report = backend.ingest("tree", folder_documents(_tree(tmp_path / "docs"), 1 << 24))
    assert report.count(DocumentStatus.ADDED) == 153 and report.created
    names = {d.name for d in backend.list_documents("tree", limit=1000)}
    assert {"guide/index", "api/index", "papers/crazyones", "notes/000"} <= names
    assert backend.query("tree", "how do I get a bearer token", k=1).hits[0].document_name == "api/index"
    assert backend.query("tree", "refund window", k=1).hits[0].document_name == "guide/index"

    pdf_passages = next(r.passages for r in report.results if r.name == "papers/crazyones")
    assert 5 <= pdf_passages and pdf_passages / report.passages < 0.05   # the filtered set: under 5 %
    for mode in ("hybrid", "dense", "sparse"):
        plain = backend.query("tree", "the crazy ones who think they can change the world", k=5, mode=mode)
        pdf = backend.query("tree", "the crazy ones who think they can change the world", k=5, mode=mode,
                            where=["type:pdf"])
        assert len(pdf) == 5 and {h.document_name for h in pdf} == {"papers/crazyones"}, mode
        notes = backend.query("tree", "soup in the canteen, a note", k=5, mode=mode, where=["name:notes/01*"])
        assert len(notes) == 5 and all(h.document_name.startswith("notes/01") for h in notes), mode
        assert len(plain) == 5
    empty = tmp_path / "empty"
    (empty / ".git").mkdir(parents=True)
    (empty / ".git" / "HEAD").write_text("ref: main")
    refused = backend.ingest("nothing", folder_documents(empty, 1 << 20))
    assert refused.count(DocumentStatus.REFUSED) == 1 and not refused.created
    assert [s.name for s in backend.list_datasets()] == ["tree"]   # the refused folder made no dataset


def _watched_files(backend, drop: Path) -> None:
    drop.mkdir()
    log = EventLog()
    watcher = FolderWatcher(backend, "inbox", drop, log, settle_seconds=0.2)
    watcher.start()
    try:
        (drop / "other.md").write_text("The library lends laptops to visitors for a day.")
        hours = ["The office opens at eight in the morning.", "The office opens at nine in the morning.",
                 "The office opens at ten in the morning."]
        for i, text in enumerate(hours, start=1):   # a watched file edited twice
            (drop / "hours.md").write_text(text)
            log.wait_for(lambda l, i=i: l.paths(Ingested).count("hours.md") == i, f"version {i}", timeout=60)
        latest = backend.query("inbox", "when does the office open", k=5)
        assert latest.hits[0].text == hours[2] and latest.hits[0].version == 3
        assert [h.text for h in latest if h.document_name == "hours"] == [hours[2]]
        every = backend.query("inbox", "when does the office open", k=5, versions="all")
        assert sorted((h.version, h.text) for h in every if h.document_name == "hours") == \
            [(1, hours[0]), (2, hours[1]), (3, hours[2])]

        (drop / "hours.md").unlink()   # deleted: stops answering
        log.wait_for(lambda l: [e.name for e in l.of(Retired)] == ["hours"], "hours retired", timeout=60)
        assert all(h.document_name != "hours" for h in backend.query("inbox", "when does the office open", k=5))
        (drop / "hours.md").write_text(hours[2])   # restored: answers again
        log.wait_for(lambda l: "hours.md" in l.paths(Unchanged), "hours restored", timeout=60)
        assert backend.query("inbox", "when does the office open", k=1).hits[0].text == hours[2]

        (drop / "hours.md").rename(drop / "opening-hours.md")   # renamed: the lineage goes along
        log.wait_for(lambda l: [(e.old_name, e.name) for e in l.of(Renamed)] == [("hours", "opening-hours")]
                     and "opening-hours.md" in l.paths(Unchanged), "renamed", timeout=60)
        top = backend.query("inbox", "when does the office open", k=1).hits[0]
        assert (top.document_name, top.version, top.text) == ("opening-hours", 3, hours[2])
        assert top.source_path == str(drop / "opening-hours.md")
        stored = [(d.name, d.version) for d in backend.list_documents("inbox", versions="all")]
        assert sorted(stored) == [("opening-hours", 1), ("opening-hours", 2), ("opening-hours", 3), ("other", 1)]
        assert backend.dataset_summary("inbox").documents == 2
        assert [e.name for e in log.of(Retired)] == ["hours"]   # the rename retired nothing
    finally:
        assert watcher.stop(timeout=30)
