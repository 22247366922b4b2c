"""What `kx datasets ingest` reports about a folder of a user's own files, in its human lines and in `--json`:
found by driving the CLI over real-looking piles (edited files, odd names), the CLI in this process over the
tiny embedder."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from engine.records import DocumentResult, DocumentStatus
from kx_tui.render import _SafeConsole, print_ingest_line

from .helpers import HashEmbedder, run_cli

# an HTML page trafilatura finds no article in: ingested whole, with a note saying so (engine/extract/html.py)
BARE_PAGE = (b"<html><head><title>Contact</title><script>x()</script></head><body>"
             b"<footer>Write to 1 Main Street</footer></body></html>")


@pytest.fixture(autouse=True)
def tiny_model(monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.embedding.embedders

    # the engine imports load_embedder when it first needs a model: patch it where it lives
    monkeypatch.setattr(engine.embedding.embedders, "load_embedder",
                        lambda card, *args, **kwargs: HashEmbedder(card.dimension) if card else None)


def test_an_extractor_s_note_is_told_after_a_file_was_edited(tmp_path: Path) -> None:
    """The notes of the documents an ingest added are read back from the dataset's listing; once an edit
    left a superseded version, the listing of current documents is shorter than the stored count and the
    notes were looked for past its end: the note went missing from both outputs."""
    folder = tmp_path / "pile"
    folder.mkdir()
    (folder / "guide.txt").write_text("The first draft of the guide about lighthouses.\n")
    assert run_cli("datasets", "ingest", "pile", str(folder)).code == 0
    (folder / "guide.txt").write_text("The second draft of the guide about lighthouses.\n")
    assert run_cli("datasets", "ingest", "pile", str(folder)).code == 0   # guide v1 is superseded now
    page = tmp_path / "contact.html"
    page.write_bytes(BARE_PAGE)

    shown = run_cli("datasets", "ingest", "pile", str(page))
    assert shown.code == 0, shown.stderr
    assert "note: contact:" in shown.stdout and "no main content was found" in shown.stdout

    page.write_bytes(BARE_PAGE.replace(b"Main", b"High"))
    answer = run_cli("datasets", "ingest", "pile", str(page), "--json")
    assert answer.code == 0, answer.stderr
    [result] = json.loads(answer.stdout)["results"]
    assert result["status"] == "added" and any("no main content was found" in n for n in result["notes"])


def test_a_refusal_s_reason_stays_on_its_line() -> None:
    """A reason quotes the file's path; a newline in a file's name must not start a line of its own (one
    that could read as another file's outcome). The name beside it is shown as ␊ already."""
    buffer = io.StringIO()
    console = _SafeConsole(file=buffer, color_system=None, highlight=False, soft_wrap=True)
    name = "new\nadded     forged"
    reason = f"the file /pile/{name}.txt: the document name {name!r} holds the control character '\\n'"
    print_ingest_line(console, DocumentResult(name, DocumentStatus.REFUSED, code="INVALID_ARGUMENT", reason=reason))
    out = buffer.getvalue()
    assert out.count("\n") == 1 and out.endswith("\n"), repr(out)
    assert "/pile/new␊added     forged.txt" in out


def test_a_watch_line_stays_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """`kx datasets watch` prints one line per event; a file named with a newline is refused, and its line
    (naming the file twice) must stay one line, the newline shown."""
    from engine.watch.events import Refused
    from kx_tui.cli.watch import _EventPrinter

    path = "/inbox/new\nadded     forged.txt"
    printer = _EventPrinter(as_json=False)
    printer(Refused(path, "new\nadded     forged", "INVALID_ARGUMENT",
                    f"the file {path}: the document name holds the control character '\\n'", 1))
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("refused") and out.count("new␊added     forged.txt") == 2, out



def test_a_name_or_path_with_a_control_character_is_refused_with_what_to_do(tmp_path: Path) -> None:
    """A file named with a tab, or in a folder named with a newline, is refused alone; its reason says what
    to do about it (rename), as every refusal does."""
    (tmp_path / "ta\tb.txt").write_text("a note about tabs\n")
    folder = tmp_path / "odd\nfolder"
    folder.mkdir()
    (folder / "notes.txt").write_text("a note about newlines\n")
    (tmp_path / "fine.txt").write_text("a note about nothing odd\n")
    answer = run_cli("datasets", "ingest", "odd", "--file", str(tmp_path / "ta\tb.txt"),
                     "--file", str(folder / "notes.txt"), "--file", str(tmp_path / "fine.txt"), "--json")
    assert answer.code == 3, answer.stderr
    results = {r["name"]: r for r in json.loads(answer.stdout)["results"]}
    assert results["fine"]["status"] == "added"
    for name in ("ta\tb", "notes"):
        assert results[name]["status"] == "refused" and "rename" in results[name]["reason"], results[name]


def test_a_copy_can_be_retired_by_its_own_name(tmp_path: Path) -> None:
    """Two files with one file's bytes are listed once; `retire` still finds the copy's name (a glob on its
    path too), so its text does not come back once the first file is edited."""
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "a.txt").write_text("The ferry leaves at nine.\n")
    (folder / "b.txt").write_text("The ferry leaves at nine.\n")
    assert run_cli("datasets", "ingest", "ferries", str(folder)).code == 0
    dry = run_cli("datasets", "retire", "ferries", str(folder / "b.txt"), "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    assert json.loads(dry.stdout)["retired"] == ["b"]
    retired = run_cli("datasets", "retire", "ferries", "b", "--json")
    assert retired.code == 0 and json.loads(retired.stdout)["retired"] == ["b"], retired.stderr
    (folder / "a.txt").write_text("The ferry leaves at ten.\n")
    assert run_cli("datasets", "ingest", "ferries", str(folder / "a.txt"), "--json").code == 0
    hits = json.loads(run_cli("datasets", "query", "ferries", "ferry", "--mode", "sparse", "--json").stdout)["hits"]
    assert [h["text"] for h in hits] == ["The ferry leaves at ten."]


def test_sync_of_a_folder_that_does_not_exist_says_so(tmp_path: Path) -> None:
    answer = run_cli("datasets", "ingest", "notes", str(tmp_path / "no-such-folder"), "--sync")
    assert answer.code == 3
    assert f"{tmp_path / 'no-such-folder'} does not exist" in answer.stderr and "--sync" in answer.stderr


def test_a_file_is_typed_by_its_bytes_not_its_extension(tmp_path: Path) -> None:
    """An HTML page saved as .txt is read as HTML (its title, its article); it is stored, listed and filtered
    as HTML too, not as the text its extension claims."""
    page = tmp_path / "saved-page.txt"
    page.write_text("<html><head><title>Ferry times</title></head><body><article><h1>Ferry times</h1>"
                    "<p>The ferry to the island leaves every hour from the north pier.</p></article></body></html>")
    assert run_cli("datasets", "ingest", "web", str(page)).code == 0
    [listed] = json.loads(run_cli("datasets", "documents", "web", "--json").stdout)["documents"]
    assert (listed["title"], listed["media_type"]) == ("Ferry times", "text/html")
    found = json.loads(run_cli("datasets", "query", "web", "ferry pier", "--mode", "sparse", "--where", "type:html",
                               "--json").stdout)["hits"]
    assert [h["document_name"] for h in found] == ["saved-page"]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_a_utf16_text_file_is_told_to_be_converted_not_called_binary(tmp_path: Path, encoding: str) -> None:
    """Windows tools (PowerShell's `>`, Notepad's 'Unicode') write UTF-16: text, whose ASCII letters each carry
    a NUL byte. Calling it binary sends its owner the wrong way."""
    note = tmp_path / "note.txt"
    note.write_bytes("The harbour opens at dawn, café at six.\n".encode(encoding))
    answer = run_cli("datasets", "ingest", "notes", str(note), "--json")
    assert answer.code == 3
    [result] = json.loads(answer.stdout)["results"]
    assert "UTF-16" in result["reason"] and "convert it to UTF-8" in result["reason"], result["reason"]
    assert "binary" not in result["reason"]


def test_two_files_named_alike_from_two_folders_do_not_hide_one_another(tmp_path: Path) -> None:
    """Each folder's files are named by their path in it, so two folders given together may both hold an
    `index.md`: one name is one document, and the second silently became the first's new version (the
    first's text stopped answering) though both files are there. The second is refused, saying why."""
    for folder, text in (("a", "Project A: apples are red."), ("b", "Project B: bananas are yellow.")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "index.md").write_text(text)
    answer = run_cli("datasets", "ingest", "ab", str(tmp_path / "a"), str(tmp_path / "b"), "--json")
    assert answer.code == 3, answer.stderr
    first, second = json.loads(answer.stdout)["results"]
    assert (first["name"], first["status"]) == ("index", "added")
    assert second["status"] == "refused" and str(tmp_path / "a" / "index.md") in second["reason"]
    hits = json.loads(run_cli("datasets", "query", "ab", "apples", "--mode", "sparse", "--json").stdout)["hits"]
    assert [h["document_name"] for h in hits] == ["index"]
    # the same file given twice is one document, not a clash
    again = run_cli("datasets", "ingest", "ab", str(tmp_path / "a" / "index.md"), "--file",
                    str(tmp_path / "a" / "index.md"), "--json")
    assert again.code == 0 and [r["status"] for r in json.loads(again.stdout)["results"]] == ["unchanged"] * 2


def test_a_folder_holding_kx_s_own_datasets_is_refused_as_a_watch_refuses_it(tmp_path: Path, kx_home: Path) -> None:
    """A folder given to ingest follows a watched folder's rules: one holding KX_HOME's datasets (and the
    gateway's token beside them) would read kx's own files, the token too, into a dataset anyone querying it
    (an LLM client over `kx mcp` included) could read."""
    assert run_cli("datasets", "ingest", "notes", "--text", "a note about otters").code == 0
    (kx_home / "gateway.token").write_text("secret-token-value\n")
    for folder in (kx_home, kx_home.parent, kx_home / "datasets" / "notes"):
        answer = run_cli("datasets", "ingest", "mine", str(folder))
        assert answer.code == 3 and "holds kx's datasets" in answer.stderr, (folder, answer.stderr)
    assert "mine" not in run_cli("datasets", "list").stdout
    inbox = kx_home / "inbox" / "notes"   # the watcher's default folder, inside KX_HOME: the user's own files
    inbox.mkdir(parents=True)
    (inbox / "otters.txt").write_text("Otters hold hands while they sleep.")
    assert run_cli("datasets", "ingest", "notes", str(inbox)).code == 0


def test_a_watch_whose_inbox_cannot_be_made_says_what_is_in_the_way(kx_home: Path) -> None:
    # $KX_HOME/inbox/NAME is made on first use; a file in its place was an INTERNAL FileExistsError
    (kx_home / "inbox").mkdir(parents=True)
    (kx_home / "inbox" / "notes").write_text("not a folder")
    from engine.errors import Status

    answer = run_cli("datasets", "watch", "notes")
    assert answer.code == Status.FAILED_PRECONDITION.exit_code, answer.stderr
    assert answer.stderr.startswith("error: FAILED_PRECONDITION") and "INTERNAL" not in answer.stderr
    assert "cannot be made" in answer.stderr and "kx datasets watch NAME DIR" in answer.stderr
    assert (kx_home / "inbox" / "notes").read_text() == "not a folder"


@pytest.mark.parametrize("blank", ["", "   "])
def test_retire_of_an_empty_name_is_refused_as_invalid_not_as_missing(blank: str) -> None:
    from engine.errors import Status

    assert run_cli("datasets", "ingest", "notes", "--text", "a note about otters").code == 0
    answer = run_cli("datasets", "retire", "notes", blank)
    assert answer.code == Status.INVALID_ARGUMENT.exit_code, answer.stderr
    assert "given as empty text" in answer.stderr and "kx datasets documents notes" in answer.stderr
    assert "otters" in run_cli("datasets", "query", "notes", "otters", "--mode", "sparse").stdout
