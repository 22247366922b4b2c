"""The end-to-end half of tests/unit/test_provenance.py (a model, processes or servers there):
Provenance on every passage: pages, section paths and document titles, from extraction to every surface.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import Engine, KxError, Status

from .helpers import inject_extraction, run_cli
from .unit.test_provenance import (  # noqa: F401 - helpers and fixtures
    HEADINGS,
    PAGE_STARTS,
    PAGES,
    PAPER,
    PAPER_BYTES,
    PAPER_TEXT,
    _expected_pages,
    _expected_section,
    _paper_extractor,
    paper,
    served,
)


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
        assert hit["section"] == _expected_section(hit["char_start"])
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
        return _paper_extractor(doc)

    inject_extraction(monkeypatch, extractor)
    report = served.ingest_documents("papers", [PAPER_BYTES, "# Returns\n\nLoggers come back in two days."],
                                     names=["cold-chains", "returns"], media_types=["application/pdf", "text/markdown"])
    assert report.count("added") == 2
    assert seen == {"cold-chains": "application/pdf", "returns": "text/markdown"}

    result = served.query_dataset("papers", text="forty shipments from two carriers", mode="sparse", k=3)
    top = result.hits[0]
    assert (top.document_name, top.document_title) == ("cold-chains", "Cold chains, watched")
    assert (top.page_start, top.page_end) == _expected_pages(top.char_start, top.char_end)
    assert top.section == _expected_section(top.char_start) == "3 Model › 3.2 Validation"
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
