"""The end-to-end half of tests/unit/test_documents_and_sdk.py (a model, processes or servers there):
Listing a dataset's documents (CLI, gateway, SDK) and the SDK shaped like the seed's snippet.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from engine import Engine, KxClient, KxError, Status, load_settings
from engine.records import Hit

from .helpers import run_cli, serving
from .unit.test_documents_and_sdk import _ingest_handbook, handbook  # noqa: F401 - helpers and fixtures


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
