"""Slides, spreadsheets, CSV and OpenDocument: files written by their own writers, read by kx's extractors."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from engine.errors import KxError, Status
from engine.extract import extract, page_span, section_path
from engine.extract.detect import detect_format
from engine.records import DocumentSummary
from engine.text.inputs import from_bytes, from_file

from . import office_files


def _read(path: Path):
    return extract(from_file(path, 10**8))


def test_a_pptx_slide_is_a_page_its_title_the_section_and_its_notes_marked(tmp_path: Path) -> None:
    extracted = _read(office_files.pptx(tmp_path / "deck.pptx"))
    text = extracted.text
    assert extracted.page_count == 2 and extracted.title == "Quarterly harbour report"
    crane = text.index("The new crane arrives in March")
    assert page_span(extracted.page_starts, crane, crane + 10) == (1, 1)
    assert section_path(extracted.sections, crane) == "Quarterly harbour report"
    assert "Notes: Remind the board about the dredging contract." in text[:extracted.page_starts[1]]
    trawlers = text.index("Three trawlers are laid up")  # the slide with an external hyperlink: read, not followed
    assert page_span(extracted.page_starts, trawlers, trawlers + 5) == (2, 2)
    assert section_path(extracted.sections, trawlers) == "Fleet status"
    assert "127.0.0.1" not in text


def test_an_xlsx_sheet_is_a_section_and_each_row_names_its_columns(tmp_path: Path) -> None:
    extracted = _read(office_files.xlsx(tmp_path / "book.xlsx"))
    assert [s.title for s in extracted.sections] == ["Revenue", "Staff"]
    assert "Year: 1999; Revenue: 42.5; City: Lyon" in extracted.text
    assert "Year: 2000; Revenue: 85; City: Nantes" in extracted.text  # the formula's cached value
    ada = extracted.text.index("Name: Ada Quayle; Role: Harbour master")
    assert section_path(extracted.sections, ada) == "Staff"


def test_csv_and_tsv_rows_become_records_with_their_header() -> None:
    data = b'name,town,note\nAda,Lyon,"likes ""tides"", boats"\n\nBob,Nantes,\n'
    extracted = extract(from_bytes(data, "people.csv", "text/csv"))
    assert extracted.text.splitlines() == ["name; town; note", 'name: Ada; town: Lyon; note: likes "tides", boats',
                                           "name: Bob; town: Nantes"]
    tsv = extract(from_bytes(b"a\tb\n1\t2\n", "t.tsv", "text/tab-separated-values"))
    assert tsv.text.splitlines()[1] == "a: 1; b: 2" and tsv.media_type == "text/tab-separated-values"


def test_odt_headings_are_sections_and_odp_slides_pages_with_notes(tmp_path: Path) -> None:
    text = _read(office_files.odt(tmp_path / "tides.odt"))
    quay = text.text.index("northern quay")
    assert section_path(text.sections, quay) == "Tide tables" and text.title == "Tide tables"
    slides = _read(office_files.odp(tmp_path / "ferry.odp"))
    assert slides.page_count == 2 and [s.title for s in slides.sections] == ["Ferry timetable", "Lighthouse"]
    assert "Notes: Check with the captain." in slides.text[:slides.page_starts[1]]
    lamp = slides.text.index("The lamp was replaced")
    assert page_span(slides.page_starts, lamp, lamp + 3) == (2, 2)


def test_an_xlsx_with_a_million_empty_rows_is_read_whole(tmp_path: Path) -> None:
    extracted = _read(office_files.xlsx_with_empty_rows(tmp_path / "empty.xlsx"))
    assert extracted.text == "Empty\nlast row"


@pytest.mark.parametrize("name, member", [("bomb.pptx", "ppt/presentation.xml"), ("bomb.xlsx", "xl/workbook.xml")])
def test_zip_bombs_in_office_clothing_are_refused_before_they_inflate(name: str, member: str) -> None:
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive, archive.open(member, "w") as handle:
        for _ in range(64):
            handle.write(bytes(2**20))
    with pytest.raises(KxError) as caught:
        extract(from_bytes(bomb.getvalue(), name))
    assert caught.value.status == Status.RESOURCE_EXHAUSTED and "ZIP bomb" in caught.value.message


def test_an_entity_in_office_xml_is_never_expanded(tmp_path: Path) -> None:
    source = office_files.odt(tmp_path / "tides.odt")
    with zipfile.ZipFile(source) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    members["content.xml"] = members["content.xml"].replace(
        b"<?xml version='1.0' encoding='UTF-8'?>",
        b"<?xml version='1.0' encoding='UTF-8'?><!DOCTYPE x [<!ENTITY e SYSTEM 'file:///etc/passwd'>]>").replace(
        b"six in the morning.", b"six in the morning &e;.")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for n, data in members.items():
            archive.writestr(n, data)
    extracted = extract(from_bytes(out.getvalue(), "tides.odt"))
    assert "root:" not in extracted.text and "six in the morning" in extracted.text


def test_formats_come_from_the_bytes_and_a_renamed_one_is_refused(tmp_path: Path) -> None:
    assert detect_format(from_file(office_files.pptx(tmp_path / "deck.bin"), 10**8)) == "pptx"
    assert detect_format(from_file(office_files.xlsx(tmp_path / "book.bin"), 10**8)) == "xlsx"
    assert detect_format(from_file(office_files.odp(tmp_path / "f.bin"), 10**8)) == "odp"
    with pytest.raises(KxError, match="named or typed as an Excel"):
        detect_format(from_bytes(b"just text", "book.xlsx"))


def test_the_document_view_says_a_document_was_read_by_ocr() -> None:
    from rich.console import Console

    from kx_tui.tui.screens.document_text import provenance_table

    def shown(extractor: str | None) -> str:
        console = Console(width=120, record=True)
        console.print(provenance_table(DocumentSummary(name="scan", ref="ab" * 32, media_type="application/pdf",
                                                       pages=2, passages=3, ingested_at=0.0, source_path=None,
                                                       extractor=extractor)))
        return console.export_text()

    assert "OCR (mean confidence 0.93" in shown("pdf/x/1+ocr/rapidocr-1.4.4/PP-OCRv4;confidence=0.931")
    assert "OCR" not in shown("pdf/x/1")


def test_a_workers_reports_reach_the_ingest_progress_before_its_outcome(monkeypatch: pytest.MonkeyPatch) -> None:
    """OCR's 'reading scan.pdf: OCR page 3/12' travels from the worker process to `extract_many`'s listener, and the
    CLI's plain progress line shows it as the reading stage's part."""
    from engine import load_settings
    from engine.extract import EXTRACTORS, extract_many
    from engine.records import Progress as StageProgress
    from kx_tui.cli.progress import PipelineProgress

    monkeypatch.setitem(EXTRACTORS, "pdf", "tests.extract_faults:reporting")
    heard: list[tuple[str, int, int]] = []
    docs = [from_bytes(b"%PDF-1.7 pretend", "scan.pdf", "application/pdf")]
    out = list(extract_many(docs, load_settings(), on_progress=lambda *news: heard.append(news)))
    assert heard == [(f"reading scan.pdf: OCR page {n + 1}/3", n, 3) for n in range(3)]
    assert out[0][1].text == "%PDF-1.7 pretend"
    from rich.console import Console

    progress = PipelineProgress(Console(file=io.StringIO()), enabled=True, clock=lambda: 0.0)
    progress.update(StageProgress("reading", 0, 4, part="reading scan.pdf: OCR page 3/12", part_done=2,
                                  part_total=12))
    assert "reading scan.pdf: OCR page 3/12" in progress.line()


def test_pages_read_with_low_confidence_are_named_in_a_note() -> None:
    from engine.extract.ocr import OcrPage, low_confidence_notes, mean_confidence

    pages = {1: OcrPage("clear text here", 0.97, 1, 1.0), 2: OcrPage("sm*dged", 0.55, 1, 1.0),
             3: OcrPage("", 0.0, 0, 1.0)}
    (note,) = low_confidence_notes("scan.pdf", pages)
    assert "page 2 (0.55)" in note and "low confidence" in note and "page 1" not in note
    assert 0.55 < mean_confidence(list(pages.values())) < 0.97
    assert low_confidence_notes("scan.pdf", {1: pages[1]}) == ()


def test_every_type_the_engine_reads_is_one_the_gateways_schema_takes() -> None:
    import re

    from engine.filters import OCR_TYPE
    from engine.formats import TYPE_KINDS
    from engine.server.schema import WHERE_PATTERN

    for kind in [*TYPE_KINDS, OCR_TYPE]:
        assert re.fullmatch(WHERE_PATTERN, f"type:{kind}"), kind
    for value in ("yes", "no"):
        assert re.fullmatch(WHERE_PATTERN, f"ocr:{value}")
