"""The end-to-end half of tests/unit/test_folders.py (a model, processes or servers there):
Folders in one command: `kx datasets ingest NAME FOLDER` walks it with the watcher's own rules.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import Status

from .helpers import run_cli
from .unit.test_folders import _tree  # noqa: F401 - helpers and fixtures


@pytest.mark.slow
def test_cli_ingests_a_folder_and_lists_each_files_outcome(tmp_path: Path, kx_home: Path) -> None:
    root = _tree(tmp_path / "docs")
    (root / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    result = run_cli("datasets", "ingest", "tree", str(root), "--json")
    report = json.loads(result.stdout)
    outcomes = {r["name"]: r["status"] for r in report["results"]}
    assert outcomes == {"api/deep/errors": "added", "api/index": "added", "broken": "refused",
                        "guide/index": "added", "notes": "added"}
    assert result.code == 0, result.stderr  # a refused file found in a folder is reported, not failed
    assert report["refused"] == 1 and "refused   broken:" in result.stderr
    hits = json.loads(run_cli("datasets", "query", "tree", "bearer token endpoint", "--json", "-k", "1").stdout)
    assert hits["hits"][0]["document_name"] == "api/index"

    nothing = tmp_path / "nothing"
    nothing.mkdir()
    refused = run_cli("datasets", "ingest", "none", str(nothing), "--json")
    assert refused.code == 3 and json.loads(refused.stdout)["results"][0]["status"] == "refused"
    assert not (kx_home / "datasets" / "none").exists()


@pytest.mark.slow
def test_ingest_sync_makes_a_dataset_follow_its_folder(tmp_path: Path, kx_home: Path) -> None:
    """Run daily from a shell (cron): edits answer once, deleted files stop answering, renames keep history."""
    root = _tree(tmp_path / "docs")
    assert run_cli("datasets", "ingest", "tree", str(root)).code == 0
    assert run_cli("datasets", "ingest", "tree", "--text", "A note typed in, from no folder.").code == 0
    (root / "guide" / "index.md").write_text("# Guide\n\nRefunds are now granted within sixty days.")
    (root / "api" / "deep" / "errors.txt").unlink()
    (root / "notes.rst").rename(root / "guide" / "office.rst")

    synced = run_cli("datasets", "ingest", "tree", str(root), "--sync", "--json")
    report = json.loads(synced.stdout)
    assert synced.code == 0, synced.stderr
    assert [r["name"] for r in report["retired"]] == ["api/deep/errors"]
    assert [(r["old_name"], r["name"]) for r in report["renamed"]] == [("notes", "guide/office")]
    outcomes = {r["name"]: r["status"] for r in report["results"]}
    assert outcomes == {"api/index": "unchanged", "guide/index": "added", "guide/office": "unchanged"}

    def sparse(text: str, *extra: str) -> list[dict]:
        return json.loads(run_cli("datasets", "query", "tree", text, "--mode", "sparse", "--json", *extra).stdout)

    gone = sparse("error 429 too many requests")
    assert gone["hits"] == []
    assert any("--versions all" in note for note in gone["notes"])  # the words are indexed, just not searched
    assert [h["document_name"] for h in sparse("error 429 too many requests", "--versions", "all")["hits"]] \
        == ["api/deep/errors"]
    refunds = sparse("how many days for refunds")
    assert [h["document_name"] for h in refunds["hits"]] == ["guide/index"]
    assert "sixty" in refunds["hits"][0]["text"]
    office = sparse("office closes fridays")["hits"]
    assert [h["document_name"] for h in office] == ["guide/office"]
    assert sparse("typed in from no folder")["hits"]   # not from the folder: --sync leaves it alone

    human = run_cli("datasets", "ingest", "tree", str(root), "--sync")
    assert human.code == 0 and "retired" not in human.stdout   # nothing more left the folder

    (root / "guide" / "office.rst").unlink()
    human = run_cli("datasets", "ingest", "tree", str(root), "--sync")
    assert "retired   guide/office" in human.stdout

    needs_folder = run_cli("datasets", "ingest", "tree", "--text", "x", "--sync")
    assert needs_folder.code != 0 and "--sync makes a dataset follow a folder" in needs_folder.stderr

    # the folder emptied (or a share not mounted): --sync would retire everything; it refuses, changing nothing
    for path in sorted(root.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    before = {d["name"] for d in json.loads(run_cli("datasets", "documents", "tree", "--json").stdout)["documents"]}
    emptied = run_cli("datasets", "ingest", "tree", str(root), "--sync", "--json")
    assert emptied.code != 0 and "nothing was changed" in emptied.stderr and emptied.stdout == ""
    after = {d["name"] for d in json.loads(run_cli("datasets", "documents", "tree", "--json").stdout)["documents"]}
    assert after == before and sparse("how many days for refunds")["hits"]
    assert f"kx datasets retire tree --from {root}" in emptied.stderr   # the deliberate way, named

    # emptied on purpose: retire names what came from the folder and nothing else
    retired = run_cli("datasets", "retire", "tree", "--from", str(root), "--json")
    assert retired.code == 0, retired.stderr
    typed = {n for n in before if n.startswith("text-")}   # the --text note: no folder, no file
    assert len(typed) == 1
    assert sorted(json.loads(retired.stdout)["retired"]) == sorted(before - typed)
    assert sparse("how many days for refunds")["hits"] == []
    assert sparse("typed in from no folder")["hits"]   # not from the folder: still answers


@pytest.mark.slow
def test_retire_takes_documents_out_of_the_answers_on_purpose_all_or_nothing(tmp_path: Path, kx_home: Path) -> None:
    root = _tree(tmp_path / "docs")
    assert run_cli("datasets", "ingest", "tree", str(root)).code == 0

    def names(*extra: str) -> list[str]:
        page = json.loads(run_cli("datasets", "documents", "tree", "--json", *extra).stdout)["documents"]
        return sorted(d["name"] for d in page)

    everything = names()
    dry = run_cli("datasets", "retire", "tree", "api/*", "--dry-run")
    assert dry.code == 0 and "would retire 2 documents of 'tree'" in dry.stdout
    assert "  api/index" in dry.stdout and "  api/deep/errors" in dry.stdout
    assert names() == everything   # a dry run changes nothing

    partly = run_cli("datasets", "retire", "tree", "api/*", "no-such-*")
    assert partly.code == Status.NOT_FOUND.exit_code and "'no-such-*'" in partly.stderr, partly.stderr
    assert "nothing was retired" in partly.stderr and names() == everything   # all or nothing

    done = run_cli("datasets", "retire", "tree", "api/*", str(root / "notes.rst"))  # a name glob, a source path
    assert done.code == 0, done.stderr
    assert "retired 3 documents of 'tree'" in done.stdout and "brings it back" in done.stdout
    assert names() == ["guide/index"]
    assert names("--versions", "all") == everything   # still stored
    hits = json.loads(run_cli("datasets", "query", "tree", "bearer token endpoint", "--json").stdout)["hits"]
    assert all(h["document_name"] == "guide/index" for h in hits)

    again = run_cli("datasets", "retire", "tree", "api/index")   # already retired: not current, nothing to do
    assert again.code == Status.NOT_FOUND.exit_code and "not current" in again.stderr

    back = run_cli("datasets", "ingest", "tree", str(root))   # the same files again bring them back
    assert back.code == 0 and names() == everything

    nothing = run_cli("datasets", "retire", "tree")
    assert nothing.code == Status.INVALID_ARGUMENT.exit_code and "--from FOLDER" in nothing.stderr
    remote = run_cli("--gateway", "http://127.0.0.1:9", "datasets", "retire", "tree", "api/*")
    assert remote.code == Status.FAILED_PRECONDITION.exit_code and "without --gateway" in remote.stderr
    missing = run_cli("datasets", "retire", "no-dataset", "x")
    assert missing.code == Status.NOT_FOUND.exit_code and "no-dataset" in missing.stderr
