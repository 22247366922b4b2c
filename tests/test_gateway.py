"""`kx serve` and KxClient end to end: a real uvicorn process, the real model, real sockets.

One gateway is started for the module (its own KX_HOME, a small request
limit so the size checks are cheap); a second one, started with
--dev-allow-local, is stopped with SIGTERM in the middle of queries. The
OpenAPI fuzz run drives the ASGI app in-process with the tiny test embedder.
"""

from __future__ import annotations

import base64
import json
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from engine import Engine, KxError, RetrievalMode, Status, load_settings
from engine.records import Hit, IngestReport, QueryResult
from engine.text.inputs import from_text

from .gateway_process import Gateway, error_of, start_gateway, stop_gateway
from .helpers import HashEmbedder, free_port, run_cli, run_kx

pytestmark = pytest.mark.slow

LIMIT = 256 * 1024  # the module gateway's KX_MAX_REQUEST_BYTES

DOCS = {
    "refunds": "Customers receive their money back within 30 days of purchase.",
    "parking": "The parking garage opens at seven and closes at ten in the evening.",
    "vacation": "To request vacation time off, submit the leave form in the HR portal two weeks ahead.",
    "laptops": "Every laptop carries an asset tag sticker; the facilities team keeps the list of tags.",
}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("gateway") / "home"
    gw = start_gateway(home, env={"KX_MAX_REQUEST_BYTES": str(LIMIT)})
    with gw.client() as client:
        report = client.ingest_documents("handbook", list(DOCS.values()), names=list(DOCS))
    assert report.count("added") == len(DOCS)
    yield gw
    assert stop_gateway(gw) == 0


def _passages(home: Path, name: str) -> int:
    return Engine(load_settings({"home": str(home)})).dataset_summary(name).documents


# -- the SDK ---------------------------------------------------------------------------


def test_the_token_file_is_owner_only(gateway: Gateway) -> None:
    assert (gateway.home / "gateway.token").stat().st_mode & 0o777 == 0o600
    assert len(gateway.token) >= 32


def test_ingest_dedupe_and_every_query_mode_through_the_sdk(gateway: Gateway, real_embedder) -> None:
    with gateway.client() as client:
        again = client.ingest_documents("handbook", [DOCS["refunds"], DOCS["parking"].encode()])
        assert isinstance(again, IngestReport)
        assert [r.status for r in again.results] == ["unchanged", "unchanged"]
        assert again.documents == len(DOCS)
        assert [s.name for s in client.list_datasets()] == ["handbook"]
        assert client.dataset_summary("handbook").documents == len(DOCS)
        assert client.info()["version"]
        local = Engine(load_settings({"home": str(gateway.home)}), embedder=real_embedder)
        for mode in RetrievalMode:
            result = client.query_dataset("handbook", text="when is the parking garage open", mode=mode, k=3)
            assert isinstance(result, QueryResult) and all(isinstance(h, Hit) for h in result.hits)
            assert result.mode == mode.value and result.hits[0].document_name == "parking"
            # the same answer as the in-process engine, field for field
            mine = local.query("handbook", "when is the parking garage open", mode=mode.value, k=3)
            assert [h.to_dict() for h in result.hits] == [h.to_dict() for h in mine.hits]
        # raw bytes go through the server's embedder
        added = client.ingest_documents("bytes", ["naïve café".encode(), b"plain ascii words"], names=["a", "b"])
        assert [r.status for r in added.results] == ["added", "added"] and added.created


def test_a_demoted_near_duplicate_says_whose_copy_it_is_over_http_and_in_the_sdk(gateway: Gateway) -> None:
    note = "Parcels ship from the Leeds warehouse every weekday morning by courier."
    texts = [note, note + " ", " " + note, "Lost parcels are claimed from the courier after ten days.",
             "The warehouse counts its stock every quarter."]
    with gateway.client() as client:
        client.ingest_documents("copies", texts, names=["note-1", "note-2", "note-3", "lost", "stock"])
        result = client.query_dataset("copies", text="when do parcels ship from the warehouse", k=5)
    first = result.hits[0]
    assert first.document_name.startswith("note-") and first.duplicate_of is None
    copies = [h for h in result.hits if h.duplicate_of is not None]
    assert [h.document_name.startswith("note-") for h in copies] == [True, True]
    assert all(h.duplicate_of == first.passage_ref for h in copies) and copies == result.hits[-2:]
    raw = gateway.raw("POST", "/v1/datasets/copies/query", json={"text": "when do parcels ship from the warehouse",
                                                                  "k": 5, "rerank": False}).json()
    assert [h["duplicate_of"] for h in raw["hits"]] == [None] * 5  # MMR off: nothing is demoted


def test_pre_computed_document_and_query_vectors(gateway: Gateway) -> None:
    with gateway.client() as client:
        report = client.ingest_documents("vectors", ["north", "east", "up"],
                                         vectors=[[1, 0, 0], [0, 1, 0], [0, 0, 1]])
        assert report.count("added") == 3
        result = client.query_dataset("vectors", vector=[0.1, 0.9, 0.05], k=2)
        assert [h.document_name for h in result.hits][:1] == ["text-" + from_text("east").ref[:12]]
        assert result.mode == "dense" and "no query text" in result.notes[0]
        with pytest.raises(KxError) as wrong:
            client.query_dataset("vectors", vector=[1.0, 0.0])
        assert wrong.value.status is Status.INVALID_ARGUMENT and "dimensions" in wrong.value.message
        with pytest.raises(KxError) as nan:
            client.query_dataset("vectors", vector=[float("nan"), 0.0, 1.0])
        assert nan.value.status is Status.INVALID_ARGUMENT
        with pytest.raises(KxError) as bad_doc:
            client.ingest_documents("vectors", ["west"], vectors=[[1.0, 2.0]])
        assert bad_doc.value.status is Status.INVALID_ARGUMENT


def test_a_dataset_s_own_chunking_is_used_and_a_model_the_gateway_cannot_run_is_412(
        gateway: Gateway, real_embedder) -> None:
    # built with another chunk size: the gateway (which set none explicitly) answers and adds under the dataset's
    other = Engine(load_settings({"home": str(gateway.home), "chunk_size": 400, "chunk_overlap": 40}),
                   embedder=real_embedder)
    other.ingest("small", [from_text("written with another chunk size")])
    response = gateway.raw("POST", "/v1/datasets/small/query", json={"text": "chunk"})
    assert response.status_code == 200 and response.json()["hits"], response.text
    with gateway.client() as client:
        assert client.ingest_documents("small", ["more text " * 100]).count("added") == 1
    assert {p.char_end - p.char_start for p in other.document_passages("small", other.list_documents("small")[1].ref)
            } <= set(range(401))
    # built with a model the gateway cannot name (a test's own embedder): refused, saying which and why
    Engine(load_settings({"home": str(gateway.home)}), embedder=HashEmbedder()).ingest(
        "stale", [from_text("written with another model")])
    response = gateway.raw("POST", "/v1/datasets/stale/query", json={"text": "model"})
    assert error_of(response) == (412, "FAILED_PRECONDITION")
    with gateway.client() as client, pytest.raises(KxError) as caught:
        client.ingest_documents("stale", ["more text"])
    assert caught.value.status is Status.FAILED_PRECONDITION and "embed_model" in caught.value.message


# -- errors and access -------------------------------------------------------------------


@pytest.mark.parametrize("path, body, code", [
    ("/v1/datasets/handbook/query", b'{"text": "x"', 400),                           # malformed JSON
    ("/v1/datasets/handbook/query", b'{"text": "x", "k": "5"}', 400),                # wrong type
    ("/v1/datasets/handbook/query", b'{"text": "x", "colour": "red"}', 400),         # unknown field
    ("/v1/datasets/handbook/query", b'{"text": "x", "mode": "fuzzy"}', 400),
    ("/v1/datasets/handbook/query", b'{"text": "x", "k": 0}', 400),
    ("/v1/datasets/handbook/query", b'{"text": "\\ud800"}', 400),                   # lone surrogate
    ("/v1/datasets/handbook/query", b'{"vector": [NaN, 1, 2]}', 400),
    ("/v1/datasets/handbook/documents", b'{"documents": [{"data_base64": "%%%"}]}', 400),
    ("/v1/datasets/handbook/documents", b'{"documents": [{"text": "a", "data_base64": "YQ=="}]}', 400),
    ("/v1/datasets/handbook/documents", b'{"documents": []}', 400),
    ("/v1/datasets/Bad%20Name/query", b'{"text": "x"}', 400),
    ("/v1/datasets/nope/query", b'{"text": "x"}', 404),
])
def test_bad_requests_get_a_status_and_a_code_never_a_500(gateway: Gateway, path, body, code) -> None:
    response = gateway.raw("POST", path, content=body, headers={"Content-Type": "application/json"})
    status, name = error_of(response)
    assert status == code and name == {400: "INVALID_ARGUMENT", 404: "NOT_FOUND"}[code]


def test_unknown_datasets_raise_not_found_in_the_sdk(gateway: Gateway) -> None:
    with gateway.client() as client, pytest.raises(KxError) as caught:
        client.dataset_summary("nope")
    assert caught.value.status is Status.NOT_FOUND and "handbook" in caught.value.message


def test_the_token_is_required_checked_and_accepted(gateway: Gateway) -> None:
    assert gateway.raw("GET", "/v1/health", token=None).status_code == 200
    assert error_of(gateway.raw("GET", "/v1/datasets", token=None)) == (401, "UNAUTHENTICATED")
    assert error_of(gateway.raw("GET", "/v1/datasets", token="wrong")) == (401, "UNAUTHENTICATED")
    assert error_of(gateway.raw("GET", "/openapi.json", token=None)) == (401, "UNAUTHENTICATED")
    before = _passages(gateway.home, "handbook")
    refused = gateway.raw("POST", "/v1/datasets/handbook/documents", token="wrong",
                          json={"documents": [{"text": "sneaked in"}]})
    assert error_of(refused) == (401, "UNAUTHENTICATED") and _passages(gateway.home, "handbook") == before
    assert gateway.raw("GET", "/v1/datasets").status_code == 200
    assert "/v1/datasets/{name}/query" in gateway.raw("GET", "/openapi.json").json()["paths"]
    with gateway.client(token=None) as anonymous, pytest.raises(KxError) as caught:
        anonymous.list_datasets()
    assert caught.value.status is Status.UNAUTHENTICATED


def _raw_request(port: int, head: bytes, body: bytes = b"", read: bool = True) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head + body)
        if not read:
            return b""
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


def _head(gateway: Gateway, path: str, length: int) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{gateway.port}\r\nAuthorization: Bearer {gateway.token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n").encode()


def test_an_oversized_body_is_refused_before_it_is_read(gateway: Gateway) -> None:
    # 1 GB declared, not one byte sent: the answer comes at once
    started = time.monotonic()
    answer = _raw_request(gateway.port, _head(gateway, "/v1/datasets/handbook/documents", 10**9))
    assert answer.startswith(b"HTTP/1.1 413") and time.monotonic() - started < 5
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["code"] == "RESOURCE_EXHAUSTED"
    # a chunked body declares nothing: it is counted as it streams
    def chunks():
        for _ in range(2 * LIMIT // 4096):
            yield b" " * 4096
    response = gateway.raw("POST", "/v1/datasets/handbook/documents", content=chunks(),
                           headers={"Content-Type": "application/json"})
    assert error_of(response) == (413, "RESOURCE_EXHAUSTED")


def test_a_client_killed_mid_upload_leaves_nothing(gateway: Gateway) -> None:
    before = _passages(gateway.home, "handbook")
    doc = base64.b64encode(b"a half-sent document " * 2000).decode()
    body = json.dumps({"documents": [{"data_base64": doc}]}).encode()
    _raw_request(gateway.port, _head(gateway, "/v1/datasets/handbook/documents", len(body)),
                 body[: len(body) // 2], read=False)
    time.sleep(0.3)
    assert _passages(gateway.home, "handbook") == before
    assert gateway.raw("GET", "/v1/health").status_code == 200
    with gateway.client() as client:
        assert client.dataset_summary("handbook").documents == before


# -- the CLI over both transports ----------------------------------------------------------


def test_the_cli_prints_the_same_through_the_gateway(gateway: Gateway, tmp_path: Path) -> None:
    home = ["--home", str(gateway.home)]
    via = [*home, "--gateway", gateway.url]
    local, remote = run_cli(*home, "datasets", "list"), run_cli(*via, "datasets", "list")
    assert local.code == remote.code == 0 and local.stdout == remote.stdout

    def answer(*prefix: str) -> dict:
        result = run_cli(*prefix, "datasets", "query", "handbook", "-t", "refund of my money", "--json")
        assert result.code == 0, result.stderr
        data = json.loads(result.stdout)
        data.pop("timings_ms")
        return data

    assert answer(*home) == answer(*via)
    for mode in ("dense", "sparse"):
        a = run_cli(*home, "datasets", "query", "handbook", "-t", "parking garage", "--mode", mode)
        b = run_cli(*via, "datasets", "query", "handbook", "-t", "parking garage", "--mode", mode)
        strip = lambda out: [line for line in out.splitlines()[1:]]  # noqa: E731 - the first line has the ms
        assert a.code == b.code == 0 and strip(a.stdout) == strip(b.stdout)

    files = tmp_path / "docs"
    files.mkdir()
    (files / "one.md").write_text("The first note is about the coffee machine on floor two.")
    (files / "two.txt").write_text("The second note says the coffee machine is descaled on Fridays.")
    (files / "empty.txt").write_text("   ")
    args = [str(files / "one.md"), str(files / "two.txt"), str(files / "empty.txt"), str(files / "missing.txt"),
            "--text", "The first note is about the coffee machine on floor two."]
    a = run_cli(*home, "datasets", "ingest", "notes-local", *args)
    b = run_cli(*via, "datasets", "ingest", "notes-remote", *args)
    assert a.code == b.code != 0
    # the gateway keeps a source path a client sent, marked as the client's ("client:/...")
    assert "client:" + str(files / "empty.txt") in b.stderr   # each refusal: one line on stderr
    assert a.stdout.replace("notes-local", "notes-remote") == b.stdout
    assert a.stderr.replace("client:", "") == b.stderr.replace("client:", "")
    assert "error: INVALID_ARGUMENT" in b.stderr

    refused = run_cli(*via, "eval", "handbook", "--queries", "q.jsonl", "--qrels", "q.tsv")
    assert refused.code == Status.FAILED_PRECONDITION.exit_code
    assert "kx eval runs in-process; drop --gateway" in refused.stderr
    gone = run_cli("--gateway", "http://127.0.0.1:9", "datasets", "list")
    assert gone.code == Status.UNAVAILABLE.exit_code and gone.stderr.startswith("error: UNAVAILABLE")


# -- starting and stopping -------------------------------------------------------------------


def test_dev_allow_local_refuses_a_non_loopback_host(tmp_path: Path) -> None:
    result = run_kx("serve", "--host", "0.0.0.0", "--port", str(free_port()), "--dev-allow-local",
                    env={"KX_HOME": str(tmp_path / "home")}, timeout=60)
    assert result.code == Status.FAILED_PRECONDITION.exit_code
    assert result.stderr.startswith("error: FAILED_PRECONDITION") and len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.stderr + result.stdout


def test_sigterm_during_queries_drains_and_exits_zero(tmp_path: Path) -> None:
    gw = start_gateway(tmp_path / "home", "--dev-allow-local", env={"KX_SERVE_EMBED_MODEL": "none"})
    try:
        with gw.client(token=None) as client:  # loopback, no token: --dev-allow-local
            client.ingest_documents("v", [f"doc {i}" for i in range(200)],
                                    vectors=[[1.0, i / 200, 0.5] for i in range(200)])
            expected = [h.passage_ref for h in client.query_dataset("v", vector=[1, 0.5, 0.5], k=50).hits]
        outcomes: list[object] = []
        stop = threading.Event()

        def hammer() -> None:
            with gw.client(token=None) as client:
                while not stop.is_set():
                    try:
                        result = client.query_dataset("v", vector=[1, 0.5, 0.5], k=50)
                        outcomes.append([h.passage_ref for h in result.hits])
                    except KxError as exc:
                        outcomes.append(exc.status)
                        return

        threads = [threading.Thread(target=hammer) for _ in range(8)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        gw.proc.send_signal(signal.SIGTERM)
        code = gw.proc.wait(timeout=30)
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    finally:
        if gw.proc.poll() is None:
            gw.proc.kill()
    assert code == 0, gw.log.read_text()
    answers = [o for o in outcomes if isinstance(o, list)]
    assert len(answers) > 8 and all(a == expected for a in answers)  # never half an answer
    assert {o for o in outcomes if not isinstance(o, list)} <= {Status.UNAVAILABLE}
    assert "Traceback" not in gw.log.read_text()


# -- property-based fuzzing of the OpenAPI description ------------------------------------------


def test_fuzzing_the_openapi_description_finds_no_500_and_no_valid_request_rejected(kx_home: Path) -> None:
    """The slice of benchmarks/schemathesis_gateway.py: 25 schema-valid examples per operation."""
    from .schema_campaign import build_app, run_campaign, summary

    engine, app = build_app()
    result = run_campaign(app, examples=25)
    report = summary(result)
    assert result.server_errors == [], report
    assert result.rejected_valid == [], report  # every rule the server enforces on a request's shape is stated
    assert result.nonconforming == [] and result.bad_errors == [], report
    assert all(result.examples[label] >= 3 for label in result.examples), report
    # and the same app answers a well-formed request from the engine itself
    from fastapi.testclient import TestClient

    with TestClient(app) as client:
        answer = client.post("/v1/datasets/fuzz/query", json={"text": "parking garage", "mode": "sparse"},
                             headers={"Authorization": "Bearer fuzz-token"})
    engine.close()
    assert answer.status_code == 200 and answer.json()["hits"]

def test_a_hits_parent_text_comes_through_the_gateway(gateway: Gateway) -> None:
    with gateway.client() as client:
        hit = client.query_dataset("handbook", text="parking garage", k=1, mode="sparse").hits[0]
        parent = client.document_text("handbook", hit.document_ref)
        assert parent[hit.char_start:hit.char_end] == hit.text
        with pytest.raises(KxError) as caught:
            client.document_text("handbook", "0" * 64)
    assert caught.value.status is Status.NOT_FOUND
