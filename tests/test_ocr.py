"""OCR end to end: scans and images made here from known text, ingested through the real CLI, found by queries.

One ingest for the module (the real model, the real worker processes, RapidOCR's bundled models): a two-page
scanned PDF (one column, then two columns under a title), a mixed PDF (a text page, then a scanned one), a
page photographed sideways, a two-page TIFF, and beside them the hostile ones (a 20,000 × 20,000 PNG, a TIFF
bomb, a 500-page scan, a truncated JPEG), and a Markdown file, slides, a workbook and an OpenDocument text that
must go in whatever the others do.
Few pages are read (OCR costs seconds of CPU a page): CI pays for seven.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engine import Engine, load_settings

from . import office_files, scans
from .helpers import run_cli

pytestmark = pytest.mark.slow

TWO_COLUMN_TITLE = "Minutes of the harbour board"


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory, model_cache: Path):
    """(home, the ingest's JSON report, its exit code, the folder of files)."""
    from PIL import Image

    folder = tmp_path_factory.mktemp("scans")
    home = tmp_path_factory.mktemp("scans-home")
    first = scans.page_image(scans.PARAGRAPHS, size=26)
    second = scans.page_image(scans.HARBOUR, size=22, columns=2, title=TWO_COLUMN_TITLE)
    (folder / "minutes.pdf").write_bytes(scans.scanned_pdf([first, second]))
    orchard = scans.page_image(scans.ORCHARD, size=26, page=(1240, 600))
    (folder / "mixed.pdf").write_bytes(scans.with_text_page(
        scans.scanned_pdf([orchard]), "This page has a real text layer about the ledger of the customs house.", at=0))
    lighthouse = scans.page_image(scans.LIGHTHOUSE, size=26, page=(1240, 500))
    (folder / "sideways.png").write_bytes(scans.png(lighthouse.rotate(90, expand=True)))
    (folder / "pages.tiff").write_bytes(scans.tiff([lighthouse, orchard]))
    # hostile
    (folder / "huge.png").write_bytes(scans.png(Image.new("1", (20_000, 20_000), 1)))
    (folder / "bomb.tiff").write_bytes(scans.tiff_bomb())
    small = scans.page_image(scans.LIGHTHOUSE, size=20, page=(620, 300)).convert("L")
    (folder / "long-scan.pdf").write_bytes(scans.scanned_pdf([small] * 500))
    photo = scans.jpeg(first)
    (folder / "truncated.jpg").write_bytes(photo[: len(photo) // 3])
    (folder / "notes.md").write_text("# Notes\n\nThe ferry timetable changes in October.\n", encoding="utf-8")
    office_files.pptx(folder / "deck.pptx")
    office_files.xlsx(folder / "book.xlsx")
    office_files.odt(folder / "tides.odt")
    with pytest.MonkeyPatch.context() as patch:
        for key in [k for k in os.environ if k.startswith("KX_")]:
            patch.delenv(key)
        patch.setenv("KX_MODEL_CACHE", str(model_cache))
        result = run_cli("--home", str(home), "--set", "extract_timeout=120", "datasets", "ingest", "scans",
                         str(folder), "--json")
    assert result.stdout, result.stderr
    return home, json.loads(result.stdout), result.code, folder


def _results(report: dict) -> dict[str, dict]:
    return {Path(r["source_path"] or r["name"]).name: r for r in report["results"]}


def _query(home: Path, question: str, *where: str) -> list[dict]:
    args = [a for clause in where for a in ("--where", clause)]
    result = run_cli("--home", str(home), "datasets", "query", "scans", question, "--json", "-k", "3", *args)
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)["hits"]


def test_scans_and_images_go_in_and_hostile_ones_are_refused_with_a_reason(ingested) -> None:
    _home, report, code, _folder = ingested
    results = _results(report)
    for name in ("minutes.pdf", "mixed.pdf", "sideways.png", "pages.tiff", "notes.md", "deck.pptx", "book.xlsx",
                 "tides.odt"):
        assert results[name]["status"] == "added", results[name]
    refused = {name: results[name]["reason"] for name in
               ("huge.png", "bomb.tiff", "long-scan.pdf", "truncated.jpg")}
    assert all(results[n]["status"] == "refused" for n in refused), results
    assert "20,000 × 20,000 pixels" in refused["huge.png"] and "decompression bomb" in refused["huge.png"]
    assert "pixel" in refused["bomb.tiff"]
    assert "500 scanned pages" in refused["long-scan.pdf"] and "KX_EXTRACT_TIMEOUT" in refused["long-scan.pdf"]
    assert "truncated" in refused["truncated.jpg"] or "damaged" in refused["truncated.jpg"]
    assert code == 0  # refusals among files found in a folder are reported, not failed (without --strict)


@pytest.mark.parametrize("question, document, page", [
    ("who will ask the county for an emergency grant", "minutes", 1),
    ("when will the northern quay be dredged", "minutes", 2),           # the two-column page
    ("children pressed the apples into juice for the winter fair", "mixed", 2),  # the scanned page
    ("the ledger of the customs house", "mixed", 1),                    # the text-layer page
    ("how many ships did the lighthouse keeper count in the storm", "sideways", 1),
    ("children pressed the apples into juice", "pages", 2),             # the TIFF's second page
])
def test_a_query_finds_the_sentence_on_its_page_marked_ocr(ingested, question: str, document: str,
                                                           page: int) -> None:
    home = ingested[0]
    hits = [h for h in _query(home, question) if h["document_name"] == document]
    assert hits, f"{document} is not among the hits for {question!r}"
    assert hits[0]["page_start"] <= page <= hits[0]["page_end"]
    assert hits[0]["ocr"] is True and hits[0]["ocr_confidence"] > 0.8


@pytest.mark.parametrize("question, document, page, section", [
    ("when does the new crane arrive", "deck", 1, "Quarterly harbour report"),
    ("what was the revenue in Nantes in 2000", "book", None, "Revenue"),
    ("high water at the northern quay", "tides", None, "Tide tables"),
])
def test_slides_sheets_and_opendocument_are_found_with_their_page_and_section(ingested, question: str,
                                                                              document: str, page: int | None,
                                                                              section: str) -> None:
    hits = [h for h in _query(ingested[0], question) if h["document_name"] == document]
    assert hits, f"{document} is not among the hits for {question!r}"
    assert hits[0]["page_start"] == page and hits[0]["section"] == section and hits[0]["ocr"] is False


def test_ocr_reads_the_rendered_pages_with_at_least_97_percent_word_accuracy(ingested, real_embedder) -> None:
    home = ingested[0]
    engine = Engine(load_settings({"home": str(home)}, env={}), embedder=real_embedder)
    try:
        documents = {d.name: d for d in engine.list_documents("scans")}
        minutes = engine.document_text("scans", documents["minutes"].ref)
        source = " ".join(scans.PARAGRAPHS) + " " + TWO_COLUMN_TITLE + " " + " ".join(scans.HARBOUR)
        assert scans.word_accuracy(source, minutes) >= 0.97, minutes
        # reading order: the title, then the left column before the right one
        assert minutes.index(TWO_COLUMN_TITLE) < minutes.index("northern quay") < minutes.index("tide tables")
        sideways = engine.document_text("scans", documents["sideways"].ref)
        assert scans.word_accuracy(" ".join(scans.LIGHTHOUSE), sideways) >= 0.97, sideways
        tiff = engine.document_text("scans", documents["pages"].ref)
        assert scans.word_accuracy(" ".join(scans.LIGHTHOUSE + scans.ORCHARD), tiff) >= 0.97, tiff
    finally:
        engine.close()


def test_documents_say_what_was_read_by_ocr_and_where_filters_on_it(ingested) -> None:
    home = ingested[0]
    listed = run_cli("--home", str(home), "datasets", "documents", "scans", "--json")
    documents = {d["name"]: d for d in json.loads(listed.stdout)["documents"]}
    assert documents["minutes"]["ocr"] is True and 0.8 < documents["minutes"]["ocr_confidence"] <= 1.0
    assert "+ocr/rapidocr-" in documents["minutes"]["extractor"]
    assert documents["sideways"]["media_type"] == "image/png" and documents["pages"]["media_type"] == "image/tiff"
    assert documents["notes"]["ocr"] is False and documents["notes"]["ocr_confidence"] is None
    question = "the ferry timetable and the lighthouse"
    not_ocr = {h["document_name"] for h in _query(home, question, "ocr:no")}
    assert "notes" in not_ocr and not_ocr <= {"notes", "deck", "book", "tides"}
    assert "notes" not in {h["document_name"] for h in _query(home, question, "ocr:yes")}
    assert "notes" not in {h["document_name"] for h in _query(home, question, "type:ocr")}
    assert {h["document_name"] for h in _query(home, question, "type:image")} <= {"sideways", "pages"}


def test_the_same_scan_again_is_not_read_again(ingested, model_cache: Path) -> None:
    home, _report, _code, folder = ingested
    again = run_cli("--home", str(home), "datasets", "ingest", "scans", str(folder / "minutes.pdf"), "--json")
    assert json.loads(again.stdout)["results"][0]["status"] == "unchanged"


def test_with_ocr_off_scans_and_images_are_refused_saying_how_to_read_them(ingested, tmp_path: Path) -> None:
    folder = ingested[3]
    result = run_cli("--home", str(tmp_path / "off"), "--set", "ocr=off", "datasets", "ingest", "off",
                     str(folder / "sideways.png"), str(folder / "minutes.pdf"), str(folder / "notes.md"), "--json")
    results = _results(json.loads(result.stdout))
    assert "ocr = off" in results["sideways.png"]["reason"]
    assert "no text layer" in results["minutes.pdf"]["reason"]
    assert "ocr = auto" in results["minutes.pdf"]["reason"]
    assert results["notes.md"]["status"] == "added"
