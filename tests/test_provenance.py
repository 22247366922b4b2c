"""Provenance on every passage: pages, section paths and document titles, from extraction to every surface.

The extractors themselves are tested with their formats; here an `Extracted`
built by hand (pages and headings known exactly) is handed to ingest, so
each test can say which page and section every passage must carry.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console

from engine import Engine, KxError, Status, load_settings
from engine.embedded.catalogue.schema import SCHEMA_VERSION
from engine.embedded.dataset import Dataset
from engine.extract import Extracted, Section, page_span, section_path
from engine.records import Hit, QueryResult
from engine.text.inputs import from_bytes, from_file, from_jsonl, from_text

from .data.paper import PAGE_STARTS, PAGES, PAPER_BYTES, PAPER_TEXT, expected_section, paper_extractor
from .helpers import HashEmbedder, inject_extraction, run_cli, serving


def test_page_span_maps_character_ranges_to_one_based_pages():
    pages = (0, 100, 250)  # page 1: [0,100), page 2: [100,250), page 3: [250, ...)
    assert page_span(pages, 0, 50) == (1, 1)
    assert page_span(pages, 90, 100) == (1, 1)      # end is exclusive
    assert page_span(pages, 90, 101) == (1, 2)
    assert page_span(pages, 100, 400) == (2, 3)
    assert page_span(None, 0, 10) == (None, None)


def test_section_path_follows_heading_levels():
    sections = (Section(0, 1, "1 Intro"), Section(50, 1, "3 Model"), Section(80, 2, "3.1 LRS model"),
                Section(120, 3, "Proof"), Section(160, 2, "3.2 Other"))
    assert section_path(sections, 10) == "1 Intro"
    assert section_path(sections, 80) == "3 Model › 3.1 LRS model"
    assert section_path(sections, 130) == "3 Model › 3.1 LRS model › Proof"
    assert section_path(sections, 170) == "3 Model › 3.2 Other"
    assert section_path((Section(5, 1, "Late"),), 0) is None


@pytest.fixture
def paper(monkeypatch: pytest.MonkeyPatch) -> None:
    inject_extraction(monkeypatch, paper_extractor)


def _expected_pages(start: int, end: int) -> tuple[int, int]:
    """Worked without page_span: every page whose characters overlap [start, end)."""
    bounds = list(PAGE_STARTS) + [len(PAPER_TEXT)]
    touched = [i + 1 for i in range(len(PAGES)) if bounds[i] < end and start < bounds[i + 1]]
    return touched[0], touched[-1]


def test_ingest_stores_pages_and_section_for_every_passage(hash_engine: Engine, paper) -> None:
    report = hash_engine.ingest("papers", [from_bytes(PAPER_BYTES, "cold-chains", "application/pdf"),
                                           from_text("A plain note with no pages and no headings.", "note")])
    assert [r.status for r in report.results] == ["added", "added"]
    catalogue = Dataset(hash_engine.settings, "papers").reading()
    try:
        doc = catalogue.document(report.results[0].ref)
        assert (doc.title, doc.page_count, doc.extractor) == ("Cold chains, watched", 3, "fake-pdf/1")
        assert doc.note_list == ["outline from bookmarks"]
        passages = catalogue.passages_of(doc.ref)
        assert len(passages) > 3
        for p in passages:
            assert PAPER_TEXT[p.char_start:p.char_end] == p.text
            assert (p.page_start, p.page_end) == _expected_pages(p.char_start, p.char_end)
            assert p.section == expected_section(p.char_start)
        assert {p.page_start for p in passages} == {1, 2, 3}
        assert any(p.page_end > p.page_start for p in passages)  # one passage runs over a page break
        assert {p.section for p in passages} >= {"1 Introduction", "3 Model › 3.1 LRS model"}
        # the text ranges index into is the extracted text, kept with the document
        assert catalogue.document_text(doc.ref) == PAPER_TEXT
        note = catalogue.document(report.results[1].ref)
        assert (note.title, note.page_count) == (None, None)
        assert [(p.page_start, p.page_end, p.section) for p in catalogue.passages_of(note.ref)] == [(None,) * 3]
        # a text document's text is its bytes: not stored twice
        stored = catalogue._db.execute("SELECT doc_ref FROM texts").fetchall()
        assert stored == [(doc.ref,)]
    finally:
        catalogue.close()


def test_a_hit_says_its_pages_section_and_title(hash_engine: Engine, paper) -> None:
    hash_engine.ingest("papers", [from_bytes(PAPER_BYTES, "cold-chains", "application/pdf")])
    hits = hash_engine.query("papers", "lagged regression smoother weighs", mode="sparse", k=3).hits
    for hit in hits:
        assert (hit.page_start, hit.page_end) == _expected_pages(hit.char_start, hit.char_end)
        assert hit.section == expected_section(hit.char_start)
    hit = next(h for h in hits if h.section == "3 Model › 3.1 LRS model")  # one starts under the heading
    assert "lagged regression smoother" in hit.text
    assert hit.page_start == hit.page_end == 2
    assert (hit.document_name, hit.document_title) == ("cold-chains", "Cold chains, watched")
    assert hit.provenance == "p. 2 · 3 Model › 3.1 LRS model"
    assert hash_engine.document_text("papers", hit.document_ref)[hit.char_start:hit.char_end] == hit.text


def test_the_stored_text_outlives_a_changed_extractor(hash_engine: Engine, monkeypatch) -> None:
    """Ranges of old hits stay true: the passage view reads the stored text, never a new extraction."""
    inject_extraction(monkeypatch, paper_extractor)
    hash_engine.ingest("papers", [from_bytes(PAPER_BYTES, "cold-chains", "application/pdf")])
    before = hash_engine.query("papers", "forty shipments two carriers", mode="sparse", k=1).hits[0]
    shifted = Extracted(text="A new extractor puts a preface first.\n" + PAPER_TEXT, media_type="application/pdf")
    inject_extraction(monkeypatch, lambda doc: shifted)
    text = hash_engine.document_text("papers", before.document_ref)
    assert text == PAPER_TEXT
    assert text[before.char_start:before.char_end] == before.text
    assert (before.page_start, before.section) == (3, "3 Model › 3.2 Validation")


def _hit(**fields) -> Hit:
    base = dict(rank=1, score=0.5, text="The lagged regression smoother.", passage_ref="p" * 64,
                document_ref="d" * 64, document_name="guide/index", chunk_index=2, chunk_count=12, char_start=10,
                char_end=40, dense_rank=1, dense_score=0.5, sparse_rank=None, sparse_score=None, fused_score=0.01,
                fused_rank=1, mmr_moved=0)
    return Hit(**{**base, **fields})


def _printed(*hits: Hit) -> list[str]:
    from kx_tui.render import print_query

    console = Console(record=True, width=300, color_system=None)
    print_query(console, QueryResult("papers", "q", "hybrid", True, 10, 10, list(hits)), lambda _text: [])
    return [line for line in console.export_text().splitlines() if line.lstrip().startswith("1 ")]


def test_the_human_line_puts_pages_and_section_after_the_chunk_label() -> None:
    spread, = _printed(_hit(page_start=6, page_end=7, section="3 Model › 3.1 LRS model"))
    assert "guide/index  [chunk 3/12] p. 6–7 · 3 Model › 3.1 LRS model  chars 10–40" in spread
    single, = _printed(_hit(page_start=6, page_end=6))
    assert "[chunk 3/12] p. 6  chars 10–40" in single
    section_only, = _printed(_hit(section="Install"))
    assert "[chunk 3/12] Install  chars" in section_only
    bare, = _printed(_hit())
    assert "guide/index  [chunk 3/12]  chars 10–40" in bare
    titled, = _printed(_hit(document_title="Getting started"))
    assert "guide/index — Getting started  [chunk 3/12]" in titled
    same, = _printed(_hit(document_name="install", document_title="Install"))
    assert "install  [chunk 3/12]" in same and "— Install" not in same  # a title that only repeats the name


# The schema of round 1 (engine/embedded/store.py at 7c2d6c9), as catalogues on users' disks hold it.
ROUND1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE blobs (ref TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE documents (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, ref TEXT NOT NULL UNIQUE REFERENCES blobs(ref), name TEXT NOT NULL,
    source_path TEXT, size INTEGER NOT NULL, media_type TEXT NOT NULL, ingested_at REAL NOT NULL,
    text_length INTEGER NOT NULL, passage_count INTEGER NOT NULL
);
CREATE INDEX documents_by_name ON documents(name);
CREATE TABLE passages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, ref TEXT NOT NULL UNIQUE, doc_ref TEXT NOT NULL REFERENCES documents(ref),
    chunk_index INTEGER NOT NULL, chunk_count INTEGER NOT NULL, char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL, text TEXT NOT NULL, vector BLOB NOT NULL
);
CREATE INDEX passages_by_doc ON passages(doc_ref, chunk_index);
"""


ROUND1_DOCUMENT_COLUMNS = "seq, ref, name, source_path, size, media_type, ingested_at, text_length, passage_count"


ROUND1_PASSAGE_COLUMNS = "seq, ref, doc_ref, chunk_index, chunk_count, char_start, char_end, text, vector"


# Front matter stays body text in round 1: a new Markdown extractor would cut it, and
# the old passages' ranges must still point into the text they were cut from.
FRONT_MATTER_NOTE = "---\ntitle: Returns\n---\nReturned loggers are checked for damage within two days."


def _as_round1(catalogue_path: Path) -> None:
    """Rewrite a catalogue as round 1 wrote it: its schema, its rows (seqs kept, so the indexes still fit)."""
    old = catalogue_path.with_name("round1.sqlite")
    db = sqlite3.connect(old)
    db.executescript(ROUND1_SCHEMA)
    db.execute("ATTACH DATABASE ? AS new", (str(catalogue_path),))
    db.execute("INSERT INTO meta SELECT key, CASE key WHEN 'schema_version' THEN '1' ELSE value END FROM new.meta")
    db.execute("INSERT INTO blobs SELECT ref, data FROM new.blobs")
    db.execute(f"INSERT INTO documents SELECT {ROUND1_DOCUMENT_COLUMNS} FROM new.documents")
    db.execute(f"INSERT INTO passages SELECT {ROUND1_PASSAGE_COLUMNS} FROM new.passages")
    db.commit()
    db.execute("DETACH DATABASE new")
    db.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{catalogue_path}{suffix}").unlink(missing_ok=True)
    old.rename(catalogue_path)


def _columns(catalogue_path: Path, table: str) -> set[str]:
    db = sqlite3.connect(f"file:{catalogue_path}?mode=ro", uri=True)
    try:
        return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
    finally:
        db.close()


def test_a_round1_catalogue_stays_queryable_and_is_migrated_by_the_next_writer(
        kx_home: Path, tmp_path: Path, monkeypatch) -> None:
    settings = load_settings({"chunk_size": 200, "chunk_overlap": 40})
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"_id": "r1", "title": "Carriers", "text": "Two carriers ship the loggers."}) + "\n")
    note = tmp_path / "returns.md"
    note.write_text(FRONT_MATTER_NOTE)
    # round 1 cut Markdown from its raw text, front matter included: ingest it that way here
    from engine.embedded.catalogue.documents import text_of_bytes
    from engine.extract import Extracted
    inject_extraction(monkeypatch, lambda doc: Extracted(text_of_bytes(doc.data, doc.media_type), doc.media_type)
                      if doc.name == "returns" else None)
    first = Engine(settings, embedder=HashEmbedder())
    first.ingest("old", [from_bytes("\ufeffCalibrated loggers drift less than 0.1 degrees a year.".encode(),
                                    "calibration"), from_file(note, 10**6), *from_jsonl(corpus, 10**6)])
    first.close()
    path = Dataset(settings, "old").catalogue_path
    _as_round1(path)
    assert "page_start" not in _columns(path, "passages")

    # read-only: answered from the old file as it is, the new fields null, nothing migrated
    reader = Engine(settings, embedder=HashEmbedder())
    hits = {h.document_name: h for h in reader.query("old", "loggers damage drift carriers", mode="sparse").hits}
    assert set(hits) == {"calibration", "returns", "r1"}
    for hit in hits.values():
        assert (hit.page_start, hit.page_end, hit.section, hit.document_title) == (None, None, None, None)
        assert reader.document_text("old", hit.document_ref)[hit.char_start:hit.char_end] == hit.text
    assert reader.document_text("old", hits["returns"].document_ref) == FRONT_MATTER_NOTE
    assert reader.document_text("old", hits["calibration"].document_ref).startswith("Calibrated")  # BOM dropped
    assert reader.document_text("old", hits["r1"].document_ref) == "Carriers\n\nTwo carriers ship the loggers."
    reader.close()
    assert "page_start" not in _columns(path, "passages") and not _columns(path, "texts")

    # the next writer migrates in place; old documents keep their text and ranges
    inject_extraction(monkeypatch, paper_extractor)
    writer = Engine(settings, embedder=HashEmbedder())
    report = writer.ingest("old", [from_bytes(PAPER_BYTES, "cold-chains", "application/pdf")])
    assert report.count("added") == 1 and report.documents == 4
    assert {"page_start", "page_end", "section"} <= _columns(path, "passages")
    assert {"title", "page_count", "extractor", "notes"} <= _columns(path, "documents")
    catalogue = Dataset(settings, "old").reading()
    assert catalogue.schema_version == SCHEMA_VERSION
    catalogue.close()
    after = {h.document_name: h for h in writer.query("old", "loggers damage drift carriers", mode="sparse",
                                                      k=20).hits}
    where = ("passage_ref", "document_ref", "text", "chunk", "char_start", "char_end", "page_start", "page_end",
             "section", "document_title")
    for name, hit in hits.items():  # the same passages, with the same (null) provenance
        assert {f: after[name].to_dict()[f] for f in where} == {f: hit.to_dict()[f] for f in where}
    assert writer.document_text("old", hits["returns"].document_ref) == FRONT_MATTER_NOTE
    assert after["cold-chains"].page_start is not None and after["cold-chains"].document_title
    writer.close()
    # and a second writer finds nothing left to migrate
    again = Engine(settings, embedder=HashEmbedder())
    again.ingest("old", [from_text("One more note about loggers.")])
    again.close()


@pytest.fixture
def served(hash_engine: Engine):
    """The gateway app on a real loopback socket, in this process (so the injected extraction applies)."""
    from engine import KxClient

    with serving(hash_engine, "test-token") as (url, token):  # the wire tests send this token by hand
        client = KxClient(url, token=token, timeout=60)
        yield client
        client.close()


@pytest.mark.slow
def test_the_cli_shows_pages_and_section_through_the_real_model(tmp_path: Path, paper, monkeypatch) -> None:
    monkeypatch.setenv("KX_CHUNK_SIZE", "200")  # several passages from a one-page-sized paper
    monkeypatch.setenv("KX_CHUNK_OVERLAP", "40")
    pdf = tmp_path / "cold-chains.pdf"
    pdf.write_bytes(PAPER_BYTES)
    added = run_cli("datasets", "ingest", "papers", str(pdf), "--json")
    assert added.code == 0, added.stderr
    assert json.loads(added.stdout)["added"] == 1
    answer = run_cli("datasets", "query", "papers", "--text", "which carriers were the shipments validated on",
                     "--json")
    assert answer.code == 0, answer.stderr
    hits = json.loads(answer.stdout)["hits"]
    for hit in hits:
        assert {"page_start", "page_end", "section", "document_title", "source_path"} <= set(hit)
        assert (hit["page_start"], hit["page_end"]) == _expected_pages(hit["char_start"], hit["char_end"])
        assert hit["section"] == expected_section(hit["char_start"])
        assert hit["document_title"] == "Cold chains, watched" and hit["source_path"] == str(pdf.resolve())
    assert hits[0]["section"] == "3 Model › 3.2 Validation" and hits[0]["page_start"] == 3
    human = run_cli("datasets", "query", "papers", "--text", "which carriers were the shipments validated on")
    first = next(line for line in human.stdout.splitlines() if line.lstrip().startswith("1 "))
    assert "cold-chains — Cold chains, watched" in first
    assert f"{hits[0]['chunk']} p. 3 · 3 Model › 3.2 Validation  chars" in first


@pytest.mark.slow  # a server on loopback
def test_bytes_with_a_media_type_go_through_the_sdk_and_hits_come_back_with_provenance(
        served, monkeypatch) -> None:
    import httpx

    seen: dict[str, str] = {}

    def extractor(doc):
        seen[doc.name] = doc.media_type
        return paper_extractor(doc)

    inject_extraction(monkeypatch, extractor)
    report = served.ingest_documents("papers", [PAPER_BYTES, "# Returns\n\nLoggers come back in two days."],
                                     names=["cold-chains", "returns"], media_types=["application/pdf", "text/markdown"])
    assert report.count("added") == 2
    assert seen == {"cold-chains": "application/pdf", "returns": "text/markdown"}

    result = served.query_dataset("papers", text="forty shipments from two carriers", mode="sparse", k=3)
    top = result.hits[0]
    assert (top.document_name, top.document_title) == ("cold-chains", "Cold chains, watched")
    assert (top.page_start, top.page_end) == _expected_pages(top.char_start, top.char_end)
    assert top.section == expected_section(top.char_start) == "3 Model › 3.2 Validation"
    assert served.document_text("papers", top.document_ref)[top.char_start:top.char_end] == top.text

    # the wire names, and the schema that documents them
    raw = httpx.post(f"{served.url}/v1/datasets/papers/query", headers={"Authorization": "Bearer test-token"},
                     json={"text": "forty shipments from two carriers", "mode": "sparse", "k": 1}).json()["hits"][0]
    assert (raw["page_start"], raw["page_end"], raw["section"]) == (3, 3, "3 Model › 3.2 Validation")
    assert raw["document_title"] == "Cold chains, watched" and raw["source_path"] is None
    schema = httpx.get(f"{served.url}/openapi.json", headers={"Authorization": "Bearer test-token"}).json()
    assert set(schema["components"]["schemas"]["HitOut"]["properties"]) == set(raw)
    query_200 = schema["paths"]["/v1/datasets/{name}/query"]["post"]["responses"]["200"]
    assert query_200["content"]["application/json"]["schema"]["$ref"].endswith("/QueryOut")

    with pytest.raises(KxError) as caught:
        served.ingest_documents("papers", [b"x"], media_types=["text/plain", "text/plain"])
    assert caught.value.status is Status.INVALID_ARGUMENT and "media_types: expected 1, got 2" in caught.value.message


@pytest.mark.slow  # a server on loopback
def test_the_seeds_query_dataset_takes_k_and_mode_from_the_server(served, hash_engine: Engine) -> None:
    """KxClient.query_dataset (the seed's API) sends no k or mode unless given: the gateway's default_k and
    default_mode answer, as for every other client."""
    served.ingest_documents("many", [f"note {i} about the parking garage" for i in range(14)])
    result = served.query_dataset("many", text="parking garage")
    assert len(result.hits) == hash_engine.settings.default_k == 10
    assert result.mode == hash_engine.settings.default_mode.value
    assert len(served.query_dataset("many", text="parking garage", k=3).hits) == 3
