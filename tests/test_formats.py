"""The one table of formats (engine/formats.py) and what is derived from it: detection by name and the
mislabelled-binary refusal, the worker extractors, a file's media type, `--where type:KIND` in-process and in
the gateway's schema; and, through the real gateway, every registered kind selecting its documents."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import httpx
import pytest

from engine import Engine, load_settings
from engine.errors import KxError
from engine.extract import EXTRACTORS
from engine.extract.detect import detect_format
from engine.filters import OCR_TYPE, parse_where
from engine.formats import ACCEPTED, FORMATS, MARKDOWN, SUFFIX_MEDIA, TEXT, TYPE_KINDS
from engine.server.schema import WHERE_PATTERN
from engine.text.inputs import DocumentInput, from_bytes, from_file

from . import office_files, scans
from .helpers import HashEmbedder, serving


def test_each_media_type_suffix_and_kind_is_declared_once() -> None:
    media = [m.type for fmt in FORMATS.values() for m in fmt.media]
    suffixes = [s for fmt in FORMATS.values() for s in fmt.suffixes]
    kinds = [*(k for fmt in FORMATS.values() for k in fmt.kinds),
             *(k for fmt in FORMATS.values() for m in fmt.media for k in m.kinds)]
    for declared in (media, suffixes, kinds):
        assert len(declared) == len(set(declared)), sorted(declared)
    assert OCR_TYPE not in kinds and set(TYPE_KINDS) == set(kinds)


def test_a_file_gets_the_media_type_its_name_ending_declares(tmp_path: Path) -> None:
    for suffix, media in SUFFIX_MEDIA.items():
        path = tmp_path / f"file{suffix}"
        path.write_bytes(b"words")
        assert from_file(path, 100).media_type == media, suffix
    assert ".docx" in SUFFIX_MEDIA and ".pdf" in SUFFIX_MEDIA and ".rst" in SUFFIX_MEDIA


def test_detection_by_name_follows_the_table_and_a_mislabelled_binary_is_refused_by_its_label() -> None:
    for fmt in FORMATS.values():
        claims = [DocumentInput("f", b"<p>plain words</p>", f"/x/f{suffix}") for suffix in fmt.suffixes]
        claims += [from_bytes(b"<p>plain words</p>", "f", media) for media in fmt.media_types if fmt.by_name]
        for doc in claims:
            if fmt.binary:
                with pytest.raises(KxError) as caught:
                    detect_format(doc)
                assert f"named or typed as {fmt.label} but its bytes are not one" in caught.value.message
            else:  # text by name (a fragment counts as HTML only where the name or type says HTML)
                assert detect_format(doc) == (fmt.id if fmt.by_name else TEXT), (fmt.id, doc.source_path)
    assert detect_format(DocumentInput("f", b"<p>words</p>", "/x/f.md")) == MARKDOWN


def test_the_worker_extractors_are_the_tables_and_each_names_a_function() -> None:
    assert EXTRACTORS == {fmt.id: fmt.extractor for fmt in FORMATS.values() if fmt.extractor}
    for spec in EXTRACTORS.values():
        module, function = spec.split(":")
        found = importlib.util.find_spec(module)  # found, not imported: the parsers stay out of this process
        assert found is not None and found.origin is not None, spec
        assert re.search(rf"^def {function}\(", Path(found.origin).read_text(), re.MULTILINE), spec


def test_every_kind_selects_its_formats_media_types_in_process_and_in_the_gateways_schema() -> None:
    for kind, media in TYPE_KINDS.items():
        assert parse_where([f"type:{kind}"]).media_types == media, kind
        assert re.fullmatch(WHERE_PATTERN, f"type:{kind}"), kind
    for fmt in FORMATS.values():
        for kind in fmt.kinds:
            assert TYPE_KINDS[kind] == fmt.media_types
    assert re.fullmatch(WHERE_PATTERN, f"type:{OCR_TYPE}")
    with pytest.raises(KxError, match="type is one of"):
        parse_where(["type:odx"])
    assert not re.fullmatch(WHERE_PATTERN, "type:odx")


def test_the_accepted_list_names_every_format() -> None:
    with pytest.raises(KxError) as caught:
        from engine.text.inputs import extract_text

        extract_text(from_bytes(b"\x00\x01binary", "blob"))
    assert ACCEPTED in caught.value.message
    for shown in ("PDF", ".png", ".docx", ".pptx", ".xlsx", ".odt", ".odp", "CSV/TSV", "HTML", "EPUB", ".md",
                  ".txt", "JSONL"):
        assert shown in ACCEPTED, shown


# --- every registered kind through the real gateway ---------------------------------------------------------

def _one_of_each(folder: Path) -> dict[str, str]:
    """A tiny file of every format and every image type, each saying "harbour"; name -> its media type."""
    folder.mkdir()
    line = "The harbour wall was mended in {}."
    image = scans.page_image([line.format("May")], size=30, page=(620, 160))
    files = {
        "paper.pdf": scans.text_pdf(line.format("June")), "photo.png": scans.png(image),
        "photo2.jpg": scans.jpeg(image), "photo3.tif": scans.tiff([image]),
        "minutes.html": f"<html><body><p>{line.format('July')}</p></body></html>".encode(),
        "notes.md": f"# Notes\n\n{line.format('August')}\n".encode(), "table.csv": b"month,place\nMay,harbour\n",
        "table2.tsv": b"month\tplace\nJune\tharbour\n", "plain.txt": line.format("March").encode(),
        "guide.rst": f"Guide\n=====\n\n{line.format('April')}\n".encode(),
    }
    for name, kind in (("photo4.webp", "WEBP"), ("photo5.bmp", "BMP")):
        import io

        out = io.BytesIO()
        image.save(out, format=kind)
        files[name] = out.getvalue()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    office_files.docx(folder / "letter.docx")
    office_files.pptx(folder / "deck.pptx")
    office_files.xlsx(folder / "book.xlsx")
    office_files.odt(folder / "tides.odt")
    office_files.odp(folder / "ferry.odp")
    office_files.epub(folder / "book2.epub")
    media = {path.stem: SUFFIX_MEDIA[path.suffix] for path in folder.iterdir()}
    (folder / "records.jsonl").write_text(json.dumps({"_id": "rec1", "text": line.format("October")}) + "\n")
    return {**media, "rec1": "application/x-kx-record+json"}


@pytest.fixture(scope="module")
def one_of_each(tmp_path_factory: pytest.TempPathFactory):
    """(an engine, name -> media type): one dataset holding a file of each kind, read by the real extractors
    in their worker processes (OCR for the images), built once; the tiny embedder, as `type:` needs no model."""
    from engine.text.inputs import from_jsonl

    home = tmp_path_factory.mktemp("formats-home")
    folder = home.parent / "formats-files"
    media = _one_of_each(folder)
    engine = Engine(load_settings({"home": str(home)}, env={}), embedder=HashEmbedder())
    docs = [from_file(p, 10**7) for p in sorted(folder.iterdir()) if p.suffix != ".jsonl"]
    report = engine.ingest("formats", [*docs, *from_jsonl(folder / "records.jsonl", 10**7)])
    assert all(r.status.value == "added" for r in report.results), [(r.name, r.reason) for r in report.results]
    yield engine, media
    engine.close()


@pytest.mark.slow
def test_every_registered_kind_selects_its_documents_in_process_and_through_the_gateway(one_of_each) -> None:
    engine, media = one_of_each
    images = {name for name, m in media.items() if m.startswith("image/")}
    with serving(engine) as (url, token):
        for kind in [*TYPE_KINDS, OCR_TYPE]:
            wanted = images if kind == OCR_TYPE else {name for name, m in media.items() if m in TYPE_KINDS[kind]}
            assert wanted, f"no document of kind {kind!r} in the dataset: add one to _one_of_each"
            options = {"k": 100, "mode": "hybrid", "rerank": False, "where": [f"type:{kind}"]}
            here = engine.query("formats", "harbour", **options)  # type: ignore[arg-type]
            assert {hit.document_name for hit in here.hits} == wanted, kind
            answer = httpx.post(f"{url}/v1/datasets/formats/query", json={"text": "harbour", **options},
                                headers={"Authorization": f"Bearer {token}"}, timeout=60)
            assert answer.status_code == 200, (kind, answer.text)
            assert {hit["document_name"] for hit in answer.json()["hits"]} == wanted, kind
