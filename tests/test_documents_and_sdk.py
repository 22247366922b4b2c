"""Listing a dataset's documents (CLI, gateway, SDK) and the SDK shaped like the seed's snippet.

The gateway here is the real ASGI app under a real uvicorn server on a
loopback port, run in a thread of this process so it can share the test's
engine (the tiny HashEmbedder, or the real model for the seed's snippet).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from engine import Engine, KxClient, KxError, Status, load_settings
from engine.records import Hit, QueryResult
from engine.text.inputs import from_file, from_text
from kx_tui.tui.app import SAMPLES

from .helpers import HashEmbedder, run_cli, serving


def _ingest_handbook(engine: Engine) -> None:
    engine.ingest("handbook", [from_file(f, engine.settings.max_document_bytes) for f in sorted(SAMPLES.glob("*.md"))])
    engine.ingest("handbook", [from_text("Staff parking is free in the north lot after six.", name="parking")])


@pytest.fixture
def handbook(kx_home: Path) -> Engine:
    engine = Engine(load_settings({"chunk_size": 400, "chunk_overlap": 80}), embedder=HashEmbedder())
    _ingest_handbook(engine)
    yield engine
    engine.close()


def test_list_documents_pages_in_ingest_order_with_their_provenance(handbook: Engine) -> None:
    everything = handbook.list_documents("handbook")
    assert [d.name for d in everything] == [f.stem for f in sorted(SAMPLES.glob("*.md"))] + ["parking"]
    first = everything[0]
    assert first.media_type == "text/markdown" and first.source_path.endswith(".md") and first.size > 0
    assert first.passages == len(handbook.document_passages("handbook", first.ref)) > 1
    assert everything[-1].source_path is None and everything[-1].passages == 1
    assert handbook.list_documents("handbook", offset=2, limit=3) == everything[2:5]
    assert handbook.list_documents("handbook", offset=99) == []
    for offset, limit in ((-1, 10), (0, 0), (0, 1001), (True, 10)):
        with pytest.raises(KxError) as caught:
            handbook.list_documents("handbook", offset=offset, limit=limit)
        assert caught.value.code == "INVALID_ARGUMENT"
    with pytest.raises(KxError) as caught:
        handbook.list_documents("nothing-here")
    assert caught.value.code == "NOT_FOUND" and "kx datasets ingest" in caught.value.message


def test_document_passages_lie_where_their_text_is(handbook: Engine) -> None:
    doc = handbook.list_documents("handbook")[0]
    text = handbook.document_text("handbook", doc.ref)
    spans = handbook.document_passages("handbook", doc.ref)
    assert [s.chunk_index for s in spans] == list(range(doc.passages))
    assert spans[0].char_start == 0 and 0 < spans[-1].char_end <= len(text)
    assert all(a.char_start < b.char_start < a.char_end for a, b in zip(spans, spans[1:]))  # overlapping, in order
    hits = handbook.query("handbook", "refund", k=64, mode="sparse")
    by_ref = {s.ref: s for s in spans}
    for hit in hits:
        if hit.document_ref == doc.ref:
            span = by_ref[hit.passage_ref]
            assert (span.char_start, span.char_end) == (hit.char_start, hit.char_end)
    with pytest.raises(KxError) as caught:
        handbook.document_passages("handbook", "0" * 64)
    assert caught.value.code == "NOT_FOUND"


def test_the_documents_command_prints_a_table_and_json(handbook: Engine) -> None:
    listed = run_cli("datasets", "documents", "handbook")
    assert listed.code == 0, listed.stderr
    for doc in handbook.list_documents("handbook"):
        assert doc.name in listed.stdout
    assert "handbook: documents 1–7 of 7" in listed.stdout
    page = run_cli("datasets", "documents", "handbook", "--offset", "2", "--limit", "3", "--json")
    assert page.code == 0, page.stderr
    data = json.loads(page.stdout)
    assert (data["dataset"], data["offset"], data["limit"], data["total"]) == ("handbook", 2, 3, 7)
    assert data["documents"] == [d.to_dict() for d in handbook.list_documents("handbook", offset=2, limit=3)]
    more = run_cli("datasets", "documents", "handbook", "--limit", "2")
    assert "--offset 2 for the next ones" in more.stdout
    missing = run_cli("datasets", "documents", "nope")
    assert missing.code == Status.NOT_FOUND.exit_code and missing.stderr.startswith("error: NOT_FOUND: ")
    bad = run_cli("datasets", "documents", "handbook", "--limit", "0")
    assert bad.code == 2 and "--limit" in bad.stderr


def test_a_query_result_is_the_sequence_of_its_hits(handbook: Engine) -> None:
    result = handbook.query("handbook", "refund within days", k=5)
    assert isinstance(result, QueryResult) and len(result) == len(result.hits) == 5
    assert result[0] is result.hits[0] and result[-1] is result.hits[-1] and result[1:3] == result.hits[1:3]
    assert list(result) == result.hits and result.hits[2] in result
    with pytest.raises(IndexError):
        result[5]
    empty = handbook.query("handbook", "zyxwvut", k=5, mode="sparse")
    assert len(empty) == 0 and not empty and list(empty) == []


def test_kx_error_code_is_the_status_name() -> None:
    for status in Status:
        error = KxError(status, "what to do next")
        assert error.code == status.name and error.to_dict() == {"code": status.name, "message": "what to do next"}


@pytest.mark.slow  # a server on loopback
def test_documents_through_the_gateway_cli_http_and_sdk(handbook: Engine) -> None:
    local = run_cli("datasets", "documents", "handbook", "--json")
    with serving(handbook) as (url, token):
        remote = run_cli("--gateway", url, "--token", token, "datasets", "documents", "handbook", "--json")
        assert remote.code == 0, remote.stderr
        assert json.loads(remote.stdout) == json.loads(local.stdout)
        human = run_cli("--gateway", url, "--token", token, "datasets", "documents", "handbook")
        assert human.stdout == run_cli("datasets", "documents", "handbook").stdout

        headers = {"Authorization": f"Bearer {token}"}
        page = httpx.get(f"{url}/v1/datasets/handbook/documents", params={"offset": 1, "limit": 2},
                         headers=headers).json()
        assert page["total"] == 7 and [d["name"] for d in page["documents"]] == \
            [d.name for d in handbook.list_documents("handbook", offset=1, limit=2)]
        for params, code, http in (({"limit": 5000}, "INVALID_ARGUMENT", 400),
                                   ({"offset": -1}, "INVALID_ARGUMENT", 400),
                                   ({"limit": "many"}, "INVALID_ARGUMENT", 400)):
            answer = httpx.get(f"{url}/v1/datasets/handbook/documents", params=params, headers=headers)
            assert (answer.status_code, answer.json()["code"]) == (http, code), params
        assert httpx.get(f"{url}/v1/datasets/handbook/documents").status_code == 401

        with KxClient(url, token=token) as client:
            assert client.list_documents("handbook") == handbook.list_documents("handbook")
            assert client.list_documents("handbook", offset=5, limit=10) == handbook.list_documents("handbook", 5, 10)
            ref = handbook.list_documents("handbook")[0].ref
            assert client.document_passages("handbook", ref) == handbook.document_passages("handbook", ref)
            assert client.warm_up() is False
            with pytest.raises(KxError) as caught:
                client.list_documents("ghost")
            assert caught.value.code == "NOT_FOUND" and caught.value.status is Status.NOT_FOUND


@pytest.mark.slow
def test_the_seeds_sdk_snippet_runs_as_written(kx_home: Path, real_embedder) -> None:
    from engine import KxClient, RetrievalMode  # noqa: F811 - the snippet's own import line

    engine = Engine(load_settings({}), embedder=real_embedder)
    _ingest_handbook(engine)
    with serving(engine) as (url, token):
        client = KxClient(url, token=token)
        hits = client.query_dataset("handbook", text="how long do I have to return a logger?", k=5,
                                    mode=RetrievalMode.HYBRID)
        top = hits[0]
        assert isinstance(top, Hit) and top.rank == 1 and top.document_name == "refunds-and-returns"
        assert [h.rank for h in hits] == [1, 2, 3, 4, 5]
        assert len(hits) == 5
        assert hits.hits == list(hits) and hits.mode == "hybrid" and hits.dataset == "handbook"
        local = engine.query("handbook", "how long do I have to return a logger?", k=5, mode="hybrid")
        assert [h.passage_ref for h in hits] == [h.passage_ref for h in local]
        try:
            client.query_dataset("no-such-dataset", text="anything")
        except KxError as exc:
            assert exc.code == "NOT_FOUND"
        else:
            pytest.fail("an unknown dataset must raise")
        client.close()
    engine.close()
