"""Folders in one command: `kx datasets ingest NAME FOLDER` walks it with the watcher's own rules.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engine import Engine, Status
from engine.records import DocumentStatus
from engine.text.folders import document_name, folder_documents, is_ignored, leaf_names
from engine.text.inputs import from_file

from .helpers import run_cli


def _tree(root: Path) -> Path:
    files = {
        "guide/index.md": "# Guide\n\nThe guide explains how refunds are granted within thirty days.",
        "api/index.md": "# API\n\nThe endpoint /v2/tokens issues a bearer token for one hour.",
        "api/deep/errors.txt": "Error 429 means too many requests; back off and retry.",
        "notes.rst": "Notes\n=====\n\nThe office closes at five on Fridays.",
        ".hidden/secret.md": "never ingested",
        "guide/.draft.md": "never ingested either",
        "guide/index.md~": "an editor backup",
        "api/download.part": "half a download",
    }
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_the_watcher_and_folder_ingest_share_one_rule_set() -> None:
    import engine.watch.intake as watch

    assert watch.is_ignored is is_ignored and watch.document_name is document_name
    assert document_name("guide/index.md") == "guide/index"


def test_a_nested_folder_is_walked_with_the_watchers_rules_and_names(tmp_path: Path) -> None:
    docs = folder_documents(_tree(tmp_path / "docs"), 1 << 20)
    assert [d.name for d in docs] == ["notes", "api/index", "api/deep/errors", "guide/index"]  # walk order
    assert all(d.error is None and d.source_path and d.source_path.startswith(str(tmp_path)) for d in docs)


def test_folder_ingest_names_two_index_files_apart(tmp_path: Path, hash_engine: Engine) -> None:
    report = hash_engine.ingest("tree", folder_documents(_tree(tmp_path / "docs"), 1 << 20))
    assert report.count(DocumentStatus.ADDED) == 4
    names = sorted(d.name for d in hash_engine.list_documents("tree"))
    assert names == ["api/deep/errors", "api/index", "guide/index", "notes"]
    again = hash_engine.ingest("tree", folder_documents(tmp_path / "docs", 1 << 20))
    assert again.count(DocumentStatus.UNCHANGED) == 4


def test_a_folder_with_nothing_readable_makes_no_dataset(tmp_path: Path, hash_engine: Engine, kx_home: Path) -> None:
    empty = tmp_path / "empty"
    (empty / ".git").mkdir(parents=True)
    (empty / ".git" / "HEAD").write_text("ref: main")
    docs = folder_documents(empty, 1 << 20)
    assert len(docs) == 1 and docs[0].error is not None and "holds no files" in docs[0].error.message
    report = hash_engine.ingest("nothing", docs)
    assert report.count(DocumentStatus.REFUSED) == 1 and not report.created
    assert not (kx_home / "datasets" / "nothing").exists()
    assert [s.name for s in hash_engine.list_datasets()] == []


def test_ignored_names_are_the_watchers() -> None:
    assert is_ignored(".git/config") and is_ignored("a/#x#") and is_ignored("x.swp") and not is_ignored("a/b.md")


# -- a file name that is not UTF-8 ------------------------------------------------------------------------


def _latin1_named(folder: Path, text: str) -> Path:
    """A file named `café.txt` in Latin-1 (byte 0xE9): Python hands its name over with a surrogate escape."""
    path = folder / os.fsdecode(b"caf\xe9.txt")
    path.write_text(text)
    return path


def test_a_file_name_that_is_not_utf8_is_refused_alone_and_the_folder_goes_in(tmp_path: Path,
                                                                               hash_engine: Engine) -> None:
    folder = tmp_path / "f1"
    folder.mkdir()
    _latin1_named(folder, "A latin name file about servals.")
    (folder / "good.txt").write_text("A good file about caracals.")
    report = hash_engine.ingest("sur5", folder_documents(folder, 1 << 20))
    by_status = {r.status: r for r in report.results}
    refused = by_status[DocumentStatus.REFUSED]
    assert (refused.name, refused.code) == ("caf\ufffd", "INVALID_ARGUMENT")
    assert refused.source_path == str(folder / "caf\ufffd.txt")
    assert "not valid UTF-8" in refused.reason and "rename the file" in refused.reason
    json.dumps(report.to_dict(), ensure_ascii=False).encode("utf-8")   # prints and serialises as it is
    assert by_status[DocumentStatus.ADDED].name == "good"
    assert [h.document_name for h in hash_engine.query("sur5", "caracals", mode="sparse").hits] == ["good"]


def test_a_single_file_whose_name_is_not_utf8_is_refused_and_makes_no_dataset(tmp_path: Path, hash_engine: Engine,
                                                                              kx_home: Path) -> None:
    doc = from_file(_latin1_named(tmp_path, "Servals."), 1 << 20)
    assert doc.error is not None and doc.error.status is Status.INVALID_ARGUMENT and doc.name == "caf\ufffd"
    report = hash_engine.ingest("one", [doc])
    assert report.count(DocumentStatus.REFUSED) == 1 and not (kx_home / "datasets" / "one").exists()


# -- two files with one stem ------------------------------------------------------------------------------


def test_files_sharing_a_stem_keep_their_extensions_and_a_lone_file_does_not(tmp_path: Path,
                                                                             hash_engine: Engine) -> None:
    folder = tmp_path / "f2"
    (folder / "sub").mkdir(parents=True)
    (folder / "report.md").write_text("report text about giraffes")
    (folder / "report.txt").write_text("report text about hippos")
    (folder / "sub" / "report.rst").write_text("a report alone in its folder, about zebras")  # another folder
    report = hash_engine.ingest("col1", folder_documents(folder, 1 << 20))
    assert sorted((r.name, r.status) for r in report.results) == [
        ("report.md", DocumentStatus.ADDED), ("report.txt", DocumentStatus.ADDED), ("sub/report", DocumentStatus.ADDED)]
    assert [h.document_name for h in hash_engine.query("col1", "giraffes", mode="sparse").hits] == ["report.md"]
    assert [h.document_name for h in hash_engine.query("col1", "hippos", mode="sparse").hits] == ["report.txt"]
    assert len(hash_engine.list_documents("col1")) == 3   # none is a version of another


def test_names_kept_whole_never_meet_a_shortened_one() -> None:
    # a.md.txt would be `a.md`, the name a.md keeps beside a.txt: it keeps its extension too
    assert leaf_names(["a.md", "a.txt", "a.md.txt", "b.md", "b"]) == {
        "a.md": "a.md", "a.txt": "a.txt", "a.md.txt": "a.md.txt", "b.md": "b.md", "b": "b"}
    assert leaf_names(["x.md", "x.md.txt"]) == {"x.md": "x", "x.md.txt": "x.md"}   # no clash: today's names
    assert document_name("guide/report.md", ["report.txt", "index.md"]) == "guide/report.md"


def test_a_second_file_with_the_stem_renames_the_first_with_sync_instead_of_superseding_it(
        tmp_path: Path, hash_engine: Engine) -> None:
    from engine.watch.events import Renamed
    from engine.watch.reconcile import reconcile

    folder = tmp_path / "f2"
    folder.mkdir()
    (folder / "report.md").write_text("report text about giraffes")
    hash_engine.ingest("col1", folder_documents(folder, 1 << 20))
    assert [d.name for d in hash_engine.list_documents("col1")] == ["report"]   # alone: the name it always had
    (folder / "report.txt").write_text("report text about hippos")
    events: list = []
    reconcile(hash_engine, "col1", str(folder.resolve()), events.append)   # what `ingest --sync` does first
    assert [(e.old_name, e.name) for e in events if isinstance(e, Renamed)] == [("report", "report.md")]
    report = hash_engine.ingest("col1", folder_documents(folder, 1 << 20))
    assert sorted((r.name, r.status) for r in report.results) == [
        ("report.md", DocumentStatus.UNCHANGED), ("report.txt", DocumentStatus.ADDED)]
    assert sorted(d.name for d in hash_engine.list_documents("col1")) == ["report.md", "report.txt"]
    assert [h.document_name for h in hash_engine.query("col1", "giraffes", mode="sparse").hits] == ["report.md"]


# -- links ------------------------------------------------------------------------------------------------


def test_folder_ingest_refuses_links_out_of_the_folder_as_the_watcher_does(tmp_path: Path,
                                                                            hash_engine: Engine) -> None:
    folder, elsewhere = tmp_path / "f3", tmp_path / "elsewhere"
    (folder / "inner").mkdir(parents=True)
    elsewhere.mkdir()
    (folder / "inner" / "i.txt").write_text("inner about okapis")
    (elsewhere / "out.txt").write_text("outside about quokkas")
    (folder / "out.txt").symlink_to(elsewhere / "out.txt")
    (folder / "outdir").symlink_to(elsewhere, target_is_directory=True)
    (folder / "alias.txt").symlink_to(folder / "inner" / "i.txt")   # a link that stays inside is read
    report = hash_engine.ingest("sl1", folder_documents(folder, 1 << 20))
    results = {r.name: r for r in report.results}
    assert {name: r.status for name, r in results.items()} == {
        "alias": DocumentStatus.ADDED, "inner/i": DocumentStatus.UNCHANGED,   # the same bytes as alias
        "out": DocumentStatus.REFUSED, "outdir": DocumentStatus.REFUSED}
    for name, real in (("out", elsewhere / "out.txt"), ("outdir", elsewhere)):
        assert results[name].code == "PERMISSION_DENIED"
        assert f"is a link to {real}, outside the folder {folder}" in results[name].reason
    assert hash_engine.query("sl1", "quokkas", mode="sparse").hits == []
    (tmp_path / "via-link").symlink_to(folder, target_is_directory=True)   # the folder itself given by a link
    again = hash_engine.ingest("sl1", folder_documents(tmp_path / "via-link", 1 << 20))
    assert sorted(r.name for r in again.results if r.status is DocumentStatus.REFUSED) == ["out", "outdir"]


# -- refusals of the same bytes ---------------------------------------------------------------------------


def test_files_refused_for_the_same_bytes_each_name_their_own_file(tmp_path: Path, hash_engine: Engine) -> None:
    folder = tmp_path / "f4"
    folder.mkdir()
    for name in ("a.txt", "b.txt", "c.md"):
        (folder / name).write_text("")
    report = hash_engine.ingest("x", folder_documents(folder, 1 << 20))
    assert {r.name: r.reason for r in report.results} == {
        name: f"{folder / file} is empty or only whitespace; there is nothing to index"
        for name, file in (("a", "a.txt"), ("b", "b.txt"), ("c", "c.md"))}


# -- copies: one file's bytes under a second name -------------------------------------------------------------


def _synced(engine: Engine, name: str, folder: Path) -> None:
    """What `kx datasets ingest NAME FOLDER --sync` does: reconcile the folder, then ingest it."""
    from engine.watch.reconcile import reconcile

    reconcile(engine, name, str(folder.resolve()), lambda _event: None)
    engine.ingest(name, folder_documents(folder, 1 << 20))


def test_a_deleted_file_whose_copy_stays_never_answers_again(tmp_path: Path, hash_engine: Engine) -> None:
    """Two files with the same bytes are one document shown under one name; the other name's lineage holds
    the same bytes unseen. Deleting that file and later editing the copy must not bring the deleted file's
    text back as a current document."""
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "ferry.txt").write_text("Ferry timetable version one: boats leave at nine.")
    (folder / "ferry-copy.txt").write_text("Ferry timetable version one: boats leave at nine.")
    (folder / "train.txt").write_text("Trains run every hour.")
    _synced(hash_engine, "f8", folder)
    (folder / "ferry.txt").unlink()
    _synced(hash_engine, "f8", folder)
    (folder / "ferry-copy.txt").write_text("Ferry timetable version two: boats leave at ten.")
    _synced(hash_engine, "f8", folder)

    assert sorted(d.name for d in hash_engine.list_documents("f8")) == ["ferry-copy", "train"]
    texts = [h.text for h in hash_engine.query("f8", "ferry timetable boats", mode="sparse").hits]
    assert texts == ["Ferry timetable version two: boats leave at ten."]


def test_a_copy_shown_under_its_own_name_shows_its_own_file(tmp_path: Path, hash_engine: Engine) -> None:
    """Once the first file is edited, the bytes it shared answer under the copy's name: with the copy's path,
    not the first file's (which now holds other text)."""
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "a.txt").write_text("The refund window is thirty days.")
    (folder / "b.txt").write_text("The refund window is thirty days.")
    _synced(hash_engine, "dup", folder)
    (folder / "a.txt").write_text("The refund window is sixty days now.")
    _synced(hash_engine, "dup", folder)

    shown = {d.name: d.source_path for d in hash_engine.list_documents("dup")}
    assert shown == {"a": str((folder / "a.txt").resolve()), "b": str((folder / "b.txt").resolve())}
    hits = {h.document_name: h.source_path for h in hash_engine.query("dup", "refund window", mode="sparse").hits}
    assert hits == shown


def test_sync_leaves_jsonl_records_alone_though_their_file_is_in_the_folder(tmp_path: Path,
                                                                            hash_engine: Engine) -> None:
    """Records ingested with --jsonl keep their JSONL file as source path; a --sync of the folder holding that
    file must not take them for files that left it (retired) or were renamed (into the file's own name)."""
    from engine.text.inputs import from_jsonl

    folder = tmp_path / "j"
    folder.mkdir()
    records = folder / "r.jsonl"
    records.write_text('{"_id": "a", "text": "a record about owls"}\n{"_id": "b", "text": "a record about bees"}\n')
    (folder / "note.txt").write_text("a note about falcons")
    hash_engine.ingest("jl", from_jsonl(records, 1 << 20))
    _synced(hash_engine, "jl", folder)
    assert sorted(d.name for d in hash_engine.list_documents("jl")) == ["a", "b", "note", "r"]
    assert [h.document_name for h in hash_engine.query("jl", "owls", mode="sparse").hits][0] == "a"


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
