"""Human output never hands stored data's control characters to the terminal (kx_tui/render.py's
terminal_safe and its Console): a file name or a document holding an escape sequence is shown, not obeyed.
`--json` stays exact."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path

import pytest

from engine.records import DocumentResult, DocumentStatus
from kx_tui.render import _SafeConsole, print_ingest_line, terminal_safe

from .helpers import HashEmbedder, run_cli

# what a terminal obeys: C0 but newline and tab, DEL, C1 (U+009B: a one-byte CSI), the bidi overrides
# and isolates
OBEYED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
NAME = "red\x1b[31mX\x1b[0m\x1b]0;PWNED\x07"
TEXT = "content with \x1b]0;PWNED2\x07 and \x1b[2J clear \x9b2J screen \u202eabout manatees\r\n"


@pytest.mark.parametrize("char", ["\x1b", "\x07", "\x00", "\x08", "\r", "\x7f", "\x9b", "\x85", "\u202e",
                                  "\u2067"])
def test_terminal_safe_shows_each_control_character_as_one_visible_one(char: str) -> None:
    shown = terminal_safe(f"a{char}b")
    assert len(shown) == 3 and shown[0] + shown[2] == "ab"   # one for one: offsets into a passage still fit
    assert not OBEYED.search(shown) and shown[1].isprintable()


def test_terminal_safe_keeps_text_and_layout() -> None:
    assert terminal_safe("Grüße, 東京 — naïve\ttab") == "Grüße, 東京 — naïve␉tab"   # a name: the tab shown
    assert terminal_safe("one\ntwo\tthree\r\n", keep_layout=True) == "one\ntwo\tthree \n"   # a passage
    assert terminal_safe("\x1b[31m") == "␛[31m"


@pytest.fixture
def stored(monkeypatch: pytest.MonkeyPatch, kx_home: Path, tmp_path: Path) -> Path:
    """Datasets 'esc' and 'esc2' (files whose text holds escapes: a name holding them is refused at ingest,
    tests/test_failure_statuses.py), the real CLI over the tiny embedder; returns the folder holding
    the first file."""
    import engine.embedding.embedders

    monkeypatch.setattr(engine.embedding.embedders, "load_embedder",
                        lambda card, *args, **kwargs: HashEmbedder(card.dimension) if card else None)
    folder = tmp_path / "esc"
    folder.mkdir()
    (folder / "escape.txt").write_text(f"escape test about narwhals {NAME}\n")
    (tmp_path / "notes.txt").write_text(TEXT, newline="")
    for name, path in (("esc", folder), ("esc2", tmp_path / "notes.txt")):
        made = run_cli("datasets", "ingest", name, str(path), "--json")   # made by the CLI: its fingerprint
        assert made.code == 0, made.stderr
    return folder


@pytest.mark.parametrize("args", [
    ["datasets", "documents", "esc"],
    ["datasets", "documents", "esc2"],
    ["datasets", "query", "esc", "narwhals", "--mode", "sparse"],
    ["datasets", "query", "esc2", "manatees", "--mode", "sparse"],
    ["datasets", "query", "esc2", "manatees"],
    ["datasets", "list"],
    ["datasets", "ingest", "new", "FOLDER/nope\x1b[31m"],      # a refusal quoting the path, and the error line
    ["datasets", "ingest", "new", f"FOLDER/{NAME}"],            # the same, from a path on the command line
])
def test_human_output_shows_stored_escapes_and_obeys_none(stored: Path, args: list[str]) -> None:
    result = run_cli(*(a.replace("FOLDER", str(stored)) for a in args))
    shown = result.stdout + result.stderr
    assert "Traceback" not in shown
    assert not OBEYED.search(shown), repr(shown)
    if args[1] not in ("list", "documents"):   # names hold no escapes (refused at ingest); text and paths may
        assert "␛[31m" in shown or "␛]0;PWNED2␇" in shown   # shown, visibly: not dropped
    if args[:3] == ["datasets", "query", "esc2"]:
        assert "␛]0;PWNED2␇ and ␛[2J" in shown and "manatees" in shown


def test_json_output_stays_exact(stored: Path) -> None:
    listed = json.loads(run_cli("datasets", "documents", "esc", "--json").stdout)["documents"]
    assert [d["name"] for d in listed] == ["escape"]
    hits = json.loads(run_cli("datasets", "query", "esc2", "manatees", "--mode", "sparse", "--json").stdout)["hits"]
    assert "\x1b]0;PWNED2\x07 and \x1b[2J clear \x9b2J screen \u202eabout" in hits[0]["text"]


def test_on_a_terminal_only_kx_s_own_styles_are_escape_sequences() -> None:
    buffer = io.StringIO()   # as a terminal would be: styles go out as SGR sequences
    console = _SafeConsole(file=buffer, force_terminal=True, color_system="standard", highlight=False, soft_wrap=True)
    print_ingest_line(console, DocumentResult(NAME, DocumentStatus.ADDED, passages=1))
    out = buffer.getvalue()
    assert "\x1b[" in out   # the status's colour
    assert not OBEYED.search(re.sub(r"\x1b\[[0-9;]*m", "", out)), repr(out)
    assert "red␛[31mX␛[0m␛]0;PWNED␇" in out



def test_the_tui_shows_stored_escapes_too(stored: Path) -> None:
    """Textual drops only BEL, BS, VT, FF and CR from text (textual/content.py) and writes ESC through; the TUI's
    views of stored names, titles and text go through terminal_safe."""
    from rich.console import Console as RichConsole

    from engine.records import DocumentSummary, Hit, PassageSpan, QueryResult, RetrievalMode
    from kx_tui.tui.screens.compare import passage_card
    from kx_tui.tui.screens.document_table import COLUMNS
    from kx_tui.tui.screens.document_text import blocks
    from kx_tui.tui.widgets.results import hit_header

    answer = json.loads(run_cli("datasets", "query", "esc2", "manatees", "--mode", "sparse", "--json").stdout)
    hit = Hit.from_dict(answer["hits"][0])
    listed = json.loads(run_cli("datasets", "documents", "esc", "--json").stdout)["documents"][0]
    fields = {f.name for f in dataclasses.fields(DocumentSummary)}  # the JSON adds derived keys (ocr, ...)
    document = DocumentSummary(**{**{k: v for k, v in listed.items() if k in fields},
                                  "notes": tuple(listed.get("notes") or ())})
    shown = {"results line": hit_header(hit, [hit], 0).plain,
             "documents table": " ".join(str(cell(document)) for _key, _heading, cell, _sort in COLUMNS),
             "document text": "".join(block.plain for _span, block in blocks(hit.text, [PassageSpan("p", 0, 1, 0, 9)]))}
    console = RichConsole(file=io.StringIO(), width=200, color_system=None)
    result = QueryResult("esc2", "manatees", RetrievalMode.SPARSE, True, 10, 10, [hit])
    console.print(passage_card(hit.passage_ref, {"sparse": result}))
    shown["compare card"] = console.file.getvalue()   # type: ignore[attr-defined]
    for where, text in shown.items():
        assert not OBEYED.search(text.replace("\n", "")), (where, text)
        # names hold no escapes (refused at ingest): the passage's own text carries them
        assert where in ("documents table", "results line") or "␛" in text, (where, text)
