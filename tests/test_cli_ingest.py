"""End to end through the real `kx` CLI and the real bundled model."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from engine import Status

from .helpers import REPO, assert_dataset_consistent, catalogue_counts, kx_process, run_cli, run_kx

pytestmark = pytest.mark.slow


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _listing(name: str) -> dict:
    result = run_cli("datasets", "list", "--json")
    assert result.code == 0, result.stderr
    return {d["name"]: d for d in json.loads(result.stdout)}[name]


def test_ingest_files_and_text_then_reingest_and_list(tmp_path: Path, kx_home: Path) -> None:
    docs = tmp_path / "docs"
    files = [
        _write(docs, "refunds.md", "# Refunds\n\nYou get your money back within 30 days of purchase.\n\n"
               + "Returns need the RMA-7 form and a receipt. " * 40),
        _write(docs, "security.txt", "The KX-4021 hardware token is required for VPN access."),
        _write(docs, "leave.rst", "Leave\n=====\n\nAnnual leave is 25 days; up to five carry over."),
    ]
    args = ["datasets", "ingest", "hb", *[a for f in files for a in ("--file", str(f))], "--text", "A loose note."]
    first = run_cli(*args)
    assert first.code == 0, first.stderr
    lines = first.stdout.splitlines()
    assert [line.split()[0] for line in lines[:4]] == ["added"] * 4
    assert any(line.split()[1] == "refunds" and "passages)" in line for line in lines)
    assert "4 added" in lines[-1]
    listed = _listing("hb")
    assert listed["documents"] == 4
    assert listed["passages"] == catalogue_counts(kx_home, "hb")[1] > 4  # the long file is several passages
    assert listed["embed_model"].startswith("all-MiniLM-L6-v2@")

    again = run_cli(*args, "--json")
    assert again.code == 0, again.stderr
    report = json.loads(again.stdout)
    assert (report["added"], report["unchanged"], report["refused"]) == (0, 4, 0)
    assert _listing("hb")["documents"] == 4 and _listing("hb")["passages"] == listed["passages"]
    assert_dataset_consistent(kx_home, "hb")


def test_a_changed_chunk_size_is_refused_and_nothing_changes(tmp_path: Path, kx_home: Path) -> None:
    assert run_cli("datasets", "ingest", "hb", "--text", "Annual leave is 25 days.").code == 0
    before = catalogue_counts(kx_home, "hb")
    result = run_cli("datasets", "ingest", "hb", "--chunk-size", "800", "--text", "Something new.")
    assert result.code == Status.FAILED_PRECONDITION.exit_code == 5
    assert result.stderr.strip() == (
        "error: FAILED_PRECONDITION: dataset 'hb' was built under other index settings (chunk_size: 1000 -> 800); "
        "this command set chunk_size (flag). To use the dataset's own, drop those settings, or override them for "
        "one command: kx --set chunk_size=1000 datasets query hb \"your question\" (the same --set works before "
        "any kx command). To build a copy under the new settings: kx datasets rebuild hb --as NEW_NAME "
        "--set chunk_size=800"
    )
    os.environ["KX_STOPWORDS"] = "off"
    try:
        result = run_cli("datasets", "ingest", "hb", "--text", "Something new.")
    finally:
        del os.environ["KX_STOPWORDS"]
    assert result.code == 5 and "stopwords: on -> off" in result.stderr
    assert catalogue_counts(kx_home, "hb") == before


def test_bad_inputs_are_refused_by_name_and_the_rest_go_in(tmp_path: Path, kx_home: Path) -> None:
    good = _write(tmp_path, "good.md", "Core hours are 10:00 to 15:00.")
    binary = tmp_path / "tool.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    latin = tmp_path / "latin.txt"
    latin.write_bytes("na\xefve caf\xe9".encode("latin-1"))
    empty = _write(tmp_path, "empty.md", "")
    result = run_cli("datasets", "ingest", "hb", "--file", str(binary), "--file", str(latin), "--file", str(empty),
                     "--file", str(tmp_path / "nope.md"), "--file", str(good))
    assert result.code == Status.INVALID_ARGUMENT.exit_code
    out = result.stderr   # each refusal is one line on stderr
    assert "refused   tool:" in out and "binary" in out
    assert "refused   latin:" in out and "not valid UTF-8" in out
    assert "refused   empty:" in out and "empty or only whitespace" in out
    assert "refused   nope:" in out and "does not exist" in out
    assert "added     good (1 passage)" in result.stdout and "refused" not in result.stdout.splitlines()[0]
    *before, last = [line for line in result.stderr.strip().splitlines() if not line.startswith("refused ")]
    assert last == (
        "error: INVALID_ARGUMENT: 4 of 5 document(s) refused; the others were ingested (see the reasons above)")
    assert all(line.startswith(("preparing: ", "kx: ")) for line in before), before  # a first-use export
    assert _listing("hb")["documents"] == 1


@pytest.mark.parametrize("args, code, words", [
    (["datasets", "ingest", "../x", "--text", "hi"], 3, "dataset name '../x' is not allowed"),
    (["datasets", "ingest", "/etc", "--text", "hi"], 3, "is not allowed"),
    (["datasets", "ingest", "", "--text", "hi"], 3, "is not allowed"),
    (["datasets", "ingest", "x" * 200, "--text", "hi"], 3, "is not allowed"),
    (["datasets", "ingest", "a\x01b", "--text", "hi"], 3, "is not allowed"),
    (["datasets", "ingest", "fine"], 3, "nothing to ingest"),
    (["datasets", "ingest", "fine", "--text", "hi", "--sync"], 3, "--sync makes a dataset follow a folder"),
    (["--set", "chunk_size", "info"], 3, "--set expects NAME=VALUE"),
])
def test_command_errors_are_one_line_with_the_status_exit_code(kx_home: Path, args, code, words) -> None:
    result = run_cli(*args)
    assert result.code == code
    assert result.stderr.startswith(f"error: {Status.INVALID_ARGUMENT.name}: ")
    assert words in result.stderr and result.stderr.count("\n") == 1
    assert not (kx_home / "datasets").exists() or not any((kx_home / "datasets").iterdir())


def test_a_jsonl_bulk_import_prints_a_summary_not_thousands_of_lines(tmp_path: Path, kx_home: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(
        json.dumps({"_id": f"doc{i}", "title": f"Note {i}", "text": f"Item {i} is stored on shelf {i % 7}."}) + "\n"
        for i in range(120)))
    result = run_cli("datasets", "ingest", "bulk", "--jsonl", str(corpus))
    assert result.code == 0, result.stderr
    assert result.stdout.count("\n") == 1 and "120 added" in result.stdout
    assert _listing("bulk")["documents"] == 120


def test_the_real_kx_command_runs_from_a_shell(tmp_path: Path, kx_home: Path) -> None:
    sample = sorted((REPO / "samples" / "handbook").glob("*.md"))
    assert len(sample) >= 5
    result = run_kx("datasets", "ingest", "handbook", *map(str, sample))
    assert result.code == 0, result.stderr
    # no warnings; off a terminal only the plain progress line, at most every 5 s
    assert all(line.startswith("kx: ") for line in result.stderr.splitlines()), result.stderr
    listed = run_kx("datasets", "list")
    assert listed.code == 0
    assert listed.stdout.splitlines()[1].split()[:3] == ["handbook", str(len(sample)),
                                                         str(catalogue_counts(kx_home, "handbook")[1])]


def test_two_processes_ingesting_at_once_both_succeed_and_lose_nothing(tmp_path: Path, kx_home: Path) -> None:
    one = [_write(tmp_path / "one", f"a{i}.md", f"Alpha document {i}. " * 30) for i in range(4)]
    two = [_write(tmp_path / "two", f"b{i}.md", f"Beta document {i}. " * 30) for i in range(4)]
    shared = _write(tmp_path, "shared.md", "Both processes bring this same file.")
    procs = [kx_process("datasets", "ingest", "together", *map(str, files), str(shared), "--json")
             for files in (one, two)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    reports = [json.loads(o[0]) for o in outs]
    assert sorted(r["added"] for r in reports) == [4, 5]  # the shared file went in once
    assert sum(r["unchanged"] for r in reports) == 1
    assert catalogue_counts(kx_home, "together")[0] == 9
    assert_dataset_consistent(kx_home, "together")


def test_sigkill_mid_ingest_loses_no_committed_document(tmp_path: Path, kx_home: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(
        json.dumps({"_id": f"d{i}", "text": f"Record {i}: " + "the warehouse ships parcels every morning. " * 6})
        + "\n" for i in range(400)))
    args = ("datasets", "ingest", "crash", "--jsonl", str(corpus))
    proc = kx_process(*args, env={"KX_INGEST_COMMIT_PASSAGES": "8"})
    catalogue = kx_home / "datasets" / "crash" / "catalog.sqlite"
    deadline = time.monotonic() + 240
    committed = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if catalogue.exists():
            try:
                committed = catalogue_counts(kx_home, "crash")[0]
            except sqlite3.OperationalError:
                committed = 0
            if committed >= 24:
                break
        time.sleep(0.05)
    assert proc.poll() is None, "the ingest finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    survived = catalogue_counts(kx_home, "crash")[0]
    assert 24 <= survived < 400  # every commit seen before the kill is still there

    result = run_cli(*args, "--json")
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["unchanged"] == survived and report["added"] == 400 - survived
    assert catalogue_counts(kx_home, "crash") == (400, 400)
    assert_dataset_consistent(kx_home, "crash")
