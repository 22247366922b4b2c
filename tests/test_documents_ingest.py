"""Real documents through the real CLI and model: one batch of good and hostile files, then queries.

The batch is ingested once for the module (the real model embeds it); every
test reads the same dataset. Extraction-side provenance is checked through
the character ranges hits carry: `page_span` over the PDF's page starts.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import pytest

from engine import Status
from engine.extract import EXTRACTORS, extract, page_span
from engine.text.inputs import from_file

from .helpers import SHARED_DOCS as DOCS
from .helpers import assert_dataset_consistent, blank_pdf, needs_shared, run_cli

pytestmark = [pytest.mark.slow, needs_shared("docs")]

GOOD = ["pdf/1601.03642.pdf", "pdf/crazyones.pdf", "docx/headers.docx", "docx/lists.docx", "docx/notes.docx",
        "docx/comments.docx", "html/theguardian.com.academics.html", "html/reuters.com.parasite.html",
        "html/scmp.com.playbook.html"]


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory):
    """(home, the ingest's JSON report, its exit code) for one batch of good and bad files."""
    folder = tmp_path_factory.mktemp("documents")
    home = folder / "home"
    paper = (DOCS / "pdf" / "1601.03642.pdf").read_bytes()
    (folder / "truncated.pdf").write_bytes(paper[: len(paper) // 2])
    (folder / "noise.pdf").write_bytes(os.urandom(20_000))
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive, \
            archive.open("word/document.xml", "w") as member:
        for _ in range(64):
            member.write(bytes(2**20))
    (folder / "bomb.docx").write_bytes(bomb.getvalue())
    (folder / "sleepy.pdf").write_bytes(blank_pdf(1))
    (folder / "crashy.pdf").write_bytes(blank_pdf(1))
    (folder / "guide.md").write_text("---\ntitle: Colour guide\n---\n# Colours\n\n## Named colours\n\n"
                                     "Vermilion is the colour of the front door.\n", encoding="utf-8")
    bad = ["pdf/r6-user-password.pdf", "pdf/libreoffice-writer-password.pdf"]
    paths = [str(DOCS / p) for p in GOOD[:3]] + [str(folder / "truncated.pdf"), str(folder / "sleepy.pdf")] \
        + [str(DOCS / p) for p in GOOD[3:6] + bad] \
        + [str(folder / n) for n in ("noise.pdf", "bomb.docx", "crashy.pdf")] \
        + [str(DOCS / p) for p in GOOD[6:]] + [str(folder / "guide.md")]
    with pytest.MonkeyPatch.context() as patch:
        for key in [k for k in os.environ if k.startswith("KX_")]:
            patch.delenv(key)
        patch.setitem(EXTRACTORS, "pdf", "tests.extract_faults:by_name")  # reads real PDFs, hangs or crashes on cue
        result = run_cli("--home", str(home), "--set", "extract_timeout=4", "datasets", "ingest", "docs", *paths,
                         "--json")
    return home, json.loads(result.stdout), result.code


def _query(home: Path, text: str, k: int = 5) -> list[dict]:
    result = run_cli("--home", str(home), "datasets", "query", "docs", "--text", text, "--mode", "sparse",
                     "--k", str(k), "--json")
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)["hits"]


def test_good_files_go_in_and_hostile_ones_are_refused_with_reasons(batch) -> None:
    home, report, code = batch
    by_name = {r["name"]: r for r in report["results"]}
    added = {name for name, r in by_name.items() if r["status"] == "added"}
    assert added == {Path(p).stem for p in GOOD} | {"guide"}
    reasons = {name: (r["code"], r["reason"]) for name, r in by_name.items() if r["status"] == "refused"}
    assert set(reasons) == {"r6-user-password", "libreoffice-writer-password", "truncated", "noise", "bomb",
                            "sleepy", "crashy"}
    assert "password-protected" in reasons["r6-user-password"][1]
    assert "password-protected" in reasons["libreoffice-writer-password"][1]
    assert "damaged or truncated" in reasons["truncated"][1]
    assert "its bytes are not one" in reasons["noise"][1]
    assert reasons["bomb"][0] == "RESOURCE_EXHAUSTED" and "refused before unpacking" in reasons["bomb"][1]
    assert reasons["sleepy"] == ("RESOURCE_EXHAUSTED", reasons["sleepy"][1])
    assert "extraction took longer than 4 s (KX_EXTRACT_TIMEOUT)" in reasons["sleepy"][1]
    assert "extractor crashed" in reasons["crashy"][1]
    first_refused = next(r for r in report["results"] if r["status"] == "refused")
    assert code == Status[first_refused["code"]].exit_code  # partial refusal: the exit code as for text files
    assert report["documents"] == len(added)
    assert_dataset_consistent(home, "docs")


def test_a_sentence_on_page_four_is_found_with_a_range_on_page_four(batch) -> None:
    home = batch[0]
    hits = _query(home, "chatbots participate in chat rooms as autonomous agents")
    top = hits[0]
    assert top["document_name"] == "1601.03642"
    extracted = extract(from_file(DOCS / "pdf" / "1601.03642.pdf", 50 * 2**20))
    assert "Chatbots are computer programs" in " ".join(top["text"].split())
    first, last = page_span(extracted.page_starts, top["char_start"], top["char_end"])
    assert first <= 4 <= last


def test_the_ligature_words_match_through_sparse_search(batch) -> None:
    hits = _query(batch[0], "definition field machine learning Mitchell experience")
    assert hits and hits[0]["document_name"] == "1601.03642"
    assert "definition of the field" in " ".join(hits[0]["text"].split())


def test_docx_lists_notes_and_no_comments_are_searchable_as_a_reader_sees(batch) -> None:
    home = batch[0]
    assert _query(home, "endnote end document")[0]["document_name"] == "notes"
    assert _query(home, "Different list adjacent")[0]["document_name"] == "lists"
    assert all(h["document_name"] != "comments" for h in _query(home, "left something multiple", k=20))
    assert _query(home, "paragraph comment")[0]["document_name"] == "comments"  # its body text is there


def test_web_pages_give_their_article_and_not_their_navigation(batch) -> None:
    home = batch[0]
    assert _query(home, "UCU general secretary casualisation")[0]["document_name"] == "theguardian.com.academics"
    assert _query(home, "Screen Actors Guild ensemble Parasite")[0]["document_name"] == "reuters.com.parasite"
    assert _query(home, "Tsai Ing-wen playbook")[0]["document_name"] == "scmp.com.playbook"
    for chrome in ("switch to the Australia edition", "Discover Thomson Reuters", "Directory of sites"):
        hits = _query(home, chrome, k=20)
        assert not [h for h in hits if chrome.lower() in " ".join(h["text"].split()).lower()], chrome


def test_markdown_front_matter_is_not_indexed(batch) -> None:
    home = batch[0]
    assert _query(home, "vermilion front door")[0]["document_name"] == "guide"
    assert all("title:" not in h["text"] for h in _query(home, "colour guide title", k=20))


def test_hit_ranges_index_the_extracted_text_the_passage_view_shows(batch) -> None:
    from engine import Engine, load_settings

    home = batch[0]
    engine = Engine(load_settings({"home": str(home)}))
    for query, name in (("chatbots autonomous agents", "1601.03642"), ("vermilion front door", "guide"),
                        ("endnote end document", "notes")):
        hit = _query(home, query)[0]
        assert hit["document_name"] == name
        text = engine.document_text("docs", hit["document_ref"])
        assert text[hit["char_start"]:hit["char_end"]] == hit["text"]
    assert not engine.document_text("docs", _query(home, "vermilion")[0]["document_ref"]).startswith("---")
