"""Every failure a status: damaged or odd storage, an unusable KX_HOME, out-of-range numbers, odd names.

Each case was an `INTERNAL: unexpected ...` (exit 10) or a silent wrong
answer before; each is now a named status whose message says which path and
what to do, through the engine and the CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from engine import Engine, KxError, Status
from engine.backend import MAX_OFFSET
from engine.text.inputs import from_bytes, from_jsonl, from_text

from .helpers import kx_error, run_cli, small_engine

DOCS = ["Refunds are paid within 30 days of purchase.", "The VPN needs the KX-4021 hardware token.",
        "Annual leave is 25 days; five carry over.", "Parking in the garage is free after six."]


@pytest.fixture
def engine(kx_home: Path) -> Engine:
    engine = small_engine()
    engine.ingest("hb", [from_text(t) for t in DOCS])
    return engine


@pytest.mark.parametrize("damage", ["zero bytes", "another sqlite file"])
def test_an_emptied_or_replaced_catalogue_is_data_loss_everywhere(engine: Engine, kx_home: Path, damage: str) -> None:
    engine.close()
    catalogue = kx_home / "datasets" / "hb" / "catalog.sqlite"
    catalogue.unlink()
    if damage == "zero bytes":
        catalogue.write_bytes(b"")
    else:
        import sqlite3

        db = sqlite3.connect(catalogue)
        db.execute("CREATE TABLE notes (x)")
        db.commit()
        db.close()
    fresh = small_engine()
    for call in (lambda: fresh.list_documents("hb"), lambda: fresh.query("hb", "refunds", mode="sparse"),
                 lambda: fresh.dataset_summary("hb"),
                 lambda: fresh.ingest("hb", [from_text("a new note")])):  # never a fresh catalogue over it
        error = kx_error(call)
        assert error.status is Status.DATA_LOSS and str(catalogue) in error.message, error
    assert catalogue.stat().st_size == (0 if damage == "zero bytes" else catalogue.stat().st_size)
    result = run_cli("datasets", "documents", "hb")
    assert result.code == 12 and "DATA_LOSS" in result.stderr and "INTERNAL" not in result.stderr
    # a listing marks it instead of failing, so that one damaged dataset does not hide the others
    result = run_cli("datasets", "list", "--json")
    assert result.code == 0 and '"error": "DATA_LOSS: ' in result.stdout and str(catalogue) in result.stdout


def test_the_sparse_folder_replaced_by_a_file_is_named(engine: Engine, kx_home: Path) -> None:
    engine.close()
    folder = kx_home / "datasets" / "hb" / "sparse"
    shutil.rmtree(folder)
    folder.write_text("not a folder")
    fresh = small_engine()
    for call in (lambda: fresh.query("hb", "refunds", mode="sparse"),
                 lambda: fresh.ingest("hb", [from_text("one more note about refunds")])):
        error = kx_error(call)
        assert error.status is Status.FAILED_PRECONDITION and str(folder) in error.message
        assert "move that file away" in error.message
    folder.unlink()  # as the message says: the index is rebuilt from the catalogue
    assert small_engine().query("hb", "refunds", mode="sparse").hits


def test_the_dense_graph_replaced_by_a_folder_is_named(engine: Engine, kx_home: Path) -> None:
    engine.close()
    graph = kx_home / "datasets" / "hb" / "dense.voy"
    graph.unlink()
    graph.mkdir()
    error = kx_error(lambda: small_engine().query("hb", "refunds", mode="dense"))
    assert error.status is Status.FAILED_PRECONDITION and str(graph) in error.message
    graph.rmdir()
    assert small_engine().query("hb", "refunds", mode="dense").hits


def test_kx_home_in_proc_is_a_precondition_naming_the_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KX_HOME", "/proc")
    error = kx_error(lambda: small_engine().ingest("a", [from_text("hello")]))
    assert error.status is Status.FAILED_PRECONDITION and "/proc/datasets" in error.message
    assert "point KX_HOME" in error.message


def test_kx_home_that_is_a_file_is_a_precondition(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    afile = tmp_path / "home-file"
    afile.write_text("x")
    for home in (afile, afile / "below"):
        monkeypatch.setenv("KX_HOME", str(home))
        result = run_cli("datasets", "list")
        assert result.code == 5 and "FAILED_PRECONDITION" in result.stderr and "is not a folder" in result.stderr


@pytest.fixture
def read_only_home(engine: Engine, kx_home: Path, tmp_path: Path):
    """The same home, bind-mounted read-only (root and mount needed; skipped otherwise)."""
    engine.close()
    view = tmp_path / "ro"
    view.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    try:
        subprocess.run(["mount", "--bind", str(kx_home), str(view)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"mount --bind failed: {exc}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True, capture_output=True)
        yield view
    finally:
        if subprocess.run(["umount", str(view)], check=False, capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(view)], check=False, capture_output=True)  # a file still open


@pytest.mark.parametrize("offset", [10**23, MAX_OFFSET + 1, -1])
def test_an_offset_out_of_range_is_invalid_before_sqlite(engine: Engine, offset: int) -> None:
    error = kx_error(lambda: engine.list_documents("hb", offset=offset))
    assert error.status is Status.INVALID_ARGUMENT and "offset must be a whole number from 0" in error.message
    assert engine.list_documents("hb", offset=MAX_OFFSET) == []
    result = run_cli("datasets", "documents", "hb", "--offset", str(10**23))
    assert result.code == 3 and "INVALID_ARGUMENT" in result.stderr


def test_duplicate_and_unsafe_jsonl_ids_are_refused_with_their_lines(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    records = [{"_id": "a", "text": "first"}, {"_id": "b", "text": "second"}, {"_id": "a", "text": "again"},
               {"_id": "../../etc/passwd", "text": "sly"}, {"_id": "x\u0000y", "text": "nul"},
               {"_id": "a", "text": "thrice"}]
    corpus.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    docs = list(from_jsonl(corpus, 1 << 20))
    assert [d.error is None for d in docs] == [True, True, False, False, False, False]
    assert "line 3 repeats the id of line 1" in docs[2].error.message  # type: ignore[union-attr]
    assert "line 6 repeats the id of line 1" in docs[5].error.message  # type: ignore[union-attr]
    assert "corpus.jsonl:4" in docs[3].error.message and "'..'" in docs[3].error.message  # type: ignore[union-attr]
    assert "control character" in docs[4].error.message  # type: ignore[union-attr]


def test_a_record_or_text_that_is_not_unicode_is_refused_alone_and_named(hash_engine: Engine, tmp_path: Path) -> None:
    """JSON's unpaired "\\ud800" escape and command-line bytes that are not UTF-8 (a lone surrogate in Python)
    cannot be stored as text: that record or text is refused with the character named, the others go in; an
    empty record's reason names the record, not the whole file."""
    corpus = tmp_path / "t.jsonl"
    corpus.write_text('{"_id":"a","text":"alpha about okapis"}\n{"_id":"h","text":"\\ud800 lone"}\n'
                      '{"_id":"e","text":"  "}\n', encoding="utf-8")
    docs = list(from_jsonl(corpus, 1 << 20))
    assert [d.error is None for d in docs] == [True, False, True]
    assert "t.jsonl:2 holds \\ud800" in docs[1].error.message  # type: ignore[union-attr]
    report = hash_engine.ingest("recs", docs)
    assert [r.status for r in report.results] == ["added", "refused", "refused"]
    assert "record 'e' of" in report.results[2].reason and "empty" in report.results[2].reason
    # `kx datasets ingest --text` hands its argument to from_text as Python decoded it
    again = hash_engine.ingest("recs", [from_text("caf\udce9 about ocelots"), from_text("fine text", "fine")])
    assert [r.status for r in again.results] == ["refused", "added"]
    assert "\\xe9 at character 4" in again.results[0].reason
    assert {d.name for d in hash_engine.list_documents("recs")} == {"a", "fine"}


def _deep_page(depth: int) -> bytes:
    return ("<html><head><title>Deep page</title></head><body>" + "<div>" * depth
            + "<h2>Refunds</h2><p>Refunds are paid within 30 days.</p><script>var x = '<p>no</p>';</script>"
            + "<p hidden>secret</p>" + "</div>" * depth + "</body></html>").encode()


def test_a_page_nested_200000_deep_is_extracted_with_a_flat_pass() -> None:
    from engine.extract.html import extract_html

    page = extract_html(_deep_page(200_000), "deep.html")  # was: "an HTML page with no visible text"
    assert page.text == "Deep page\n\nRefunds\n\nRefunds are paid within 30 days."
    assert [s.title for s in page.sections] == ["Refunds"]
    assert "nest deeper than 256 levels" in page.notes[0] and "flat pass" in page.notes[0]


def test_a_page_over_the_tree_size_goes_in_with_the_flat_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.extract import html

    monkeypatch.setattr(html, "FLAT_ABOVE_BYTES", 10_000)  # a 40 MB page behaves so at the real 8 MB
    body = "".join(f"<p>Paragraph {i} of a very long saved page.</p>" for i in range(1000))
    page = html.extract_html(f"<html><body><nav>menu</nav>{body}</body></html>".encode(), "big.html")
    assert "Paragraph 999 of a very long saved page." in page.text
    assert "over the 0 MB above which main-content detection" in page.notes[0]


def test_a_symlink_loop_is_called_a_loop(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    error = from_file_error(tmp_path / "a")
    assert "never reaches a file" in error and "loop" in error and "not followed here" not in error


def from_file_error(path: Path) -> str:
    from engine.text.inputs import from_file

    doc = from_file(path, 1 << 20)
    assert doc.error is not None
    return doc.error.message


def test_a_document_name_no_document_may_have_is_refused_on_every_way_in(hash_engine: Engine,
                                                                          tmp_path: Path) -> None:
    """The gateway's name rule in the engine itself (so MCP, the watcher and the CLI's files and --text keep it
    too): a name with a control character or a '..' segment is refused alone; a file name whose bytes are not
    UTF-8 is refused with a printable name instead of INTERNAL aborting the whole command."""
    from engine.text.folders import folder_documents

    folder = tmp_path / "names"
    folder.mkdir()
    (folder / "good.txt").write_text("good file about caracals")
    (folder / "new\nline.txt").write_text("newline file about penguins")
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "wb") as handle:   # a Latin-1 name
        handle.write(b"latin name file about servals")
    odd = ["../x", "a\tb", "/etc/x", "dir/", "invoice\u202etxt.exe", "csi\u009b2J"]
    docs = folder_documents(folder, 1 << 20) + [from_text(f"text {i}", name) for i, name in enumerate(odd)]
    docs += [from_bytes(b"typed", "typed", media_type="text/plain\n"), from_bytes(b"fine", "fine", "text/plain")]
    report = hash_engine.ingest("names", docs)
    outcome = {r.name: r.status for r in report.results}
    assert outcome == {"good": "added", "new\nline": "refused", "caf\ufffd": "refused",
                       **{name: "refused" for name in odd}, "typed": "refused", "fine": "added"}, outcome
    reasons = {r.name: r.reason for r in report.results}
    assert "not valid UTF-8" in reasons["caf\ufffd"] and "control character" in reasons["new\nline"]
    assert "'..'" in reasons["../x"]
    assert json.dumps(report.to_dict())   # every name and path printable as JSON
    assert "media type" in reasons["typed"]
    assert sorted(d.name for d in hash_engine.list_documents("names")) == ["fine", "good"]


def _garble_indexes(kx_home: Path, which: tuple[str, ...]) -> None:
    """Overwrite the sparse index's segments and/or the dense graph with random bytes (their sizes kept)."""
    folder = kx_home / "datasets" / "hb"
    files = ([p for p in (folder / "sparse").iterdir() if p.suffix == ".seg"] if "sparse" in which else []) \
        + ([folder / "dense.voy"] if "dense" in which else [])
    assert files
    for path in files:
        path.write_bytes(os.urandom(path.stat().st_size))


def test_damaged_indexes_on_a_read_only_home_are_a_precondition_not_internal(read_only_home: Path, kx_home: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _garble_indexes(kx_home, ("sparse", "dense"))
    monkeypatch.setenv("KX_HOME", str(read_only_home))
    engine = small_engine()
    for mode in ("sparse", "hybrid", "dense"):
        error = kx_error(lambda: engine.query("hb", "refunds", mode=mode))
        assert error.status is Status.FAILED_PRECONDITION, (mode, error)
        # not "not embedded" (they are), not whoosh's EINVAL: what is wrong, why it stays so, what to do
        assert "damaged or missing" in error.message and "read-only home" in error.message, error
        assert "not embedded" not in error.message and "writable KX_HOME" in error.message
    assert len(engine.list_documents("hb")) == len(DOCS)   # the catalogue still reads
    engine.close()
    result = run_cli("datasets", "query", "hb", "refunds", "--mode", "sparse")
    assert result.code == Status.FAILED_PRECONDITION.exit_code and "INTERNAL" not in result.stderr


def test_one_damaged_index_on_a_read_only_home_leaves_the_other_answering(read_only_home: Path, kx_home: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _garble_indexes(kx_home, ("sparse",))
    monkeypatch.setenv("KX_HOME", str(read_only_home))
    engine = small_engine()
    assert engine.query("hb", "refunds", mode="dense").hits
    error = kx_error(lambda: engine.query("hb", "refunds", mode="sparse"))
    assert error.status is Status.FAILED_PRECONDITION and "keyword index" in error.message, error
    engine.close()


def test_a_damaged_dense_graph_on_a_read_only_home_is_said_with_keyword_answers(
        read_only_home: Path, kx_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _garble_indexes(kx_home, ("dense",))
    monkeypatch.setenv("KX_HOME", str(read_only_home))
    engine = small_engine()
    assert engine.query("hb", "refunds", mode="sparse").hits
    answer = engine.query("hb", "refunds", mode="hybrid")
    with pytest.raises(KxError) as err:   # dense alone: said, not "the passages are not embedded yet"
        engine.query("hb", "refunds", mode="dense")
    engine.close()
    assert answer.hits and any("dense index" in note and "damaged or missing" in note for note in answer.notes)
    assert not any("embedding continues" in note for note in answer.notes)
    assert err.value.status is Status.FAILED_PRECONDITION and "damaged or missing" in err.value.message
    assert "not embedded" not in err.value.message


@pytest.mark.slow  # mounts a bind mount
def test_a_read_only_home_still_lists_reads_and_queries(read_only_home: Path, kx_home: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # the indexes behind the catalogue: a query would normally catch them up, which needs a write
    sidecar = kx_home / "datasets" / "hb" / "sparse.json"
    meta = json.loads(sidecar.read_text())
    meta["watermark"] = 1
    sidecar.write_text(json.dumps(meta))
    monkeypatch.setenv("KX_HOME", str(read_only_home))
    engine = small_engine()
    assert [s.name for s in engine.list_datasets()] == ["hb"]
    assert len(engine.list_documents("hb")) == len(DOCS)
    answer = engine.query("hb", "refunds", mode="dense")
    assert answer.hits and any("read-only file system" in note for note in answer.notes)
    for args in (["datasets", "list"], ["datasets", "documents", "hb"]):
        assert run_cli(*args).code == 0
    error = kx_error(lambda: engine.ingest("hb", [from_text("a new note")]))
    engine.close()
    assert error.status is Status.FAILED_PRECONDITION and "read-only file system" in error.message
    assert str(read_only_home / "datasets" / "hb") in error.message and "point KX_HOME" in error.message


def test_a_deep_page_goes_in_through_the_engine_and_is_found(engine: Engine) -> None:
    from engine.text.inputs import from_bytes

    report = engine.ingest("hb", [from_bytes(_deep_page(20_000), "deep", media_type="text/html")])
    assert [r.status for r in report.results] == ["added"]
    hits = engine.query("hb", "refunds paid within 30 days", mode="sparse").hits
    assert "deep" in [hit.document_name for hit in hits]
