"""What the gateway says when a request is wrong: as clear as the in-process answer, with a next step.

The real gateway app under uvicorn on loopback (tests/helpers.py `serving`), over the hash-embedded engine,
reached by the CLI (`kx --gateway`) and by plain HTTP.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from engine import Engine
from engine.errors import KxError, Status
from engine.server.client import read_token
from engine.server.security import ensure_token
from engine.text.inputs import from_text

from .helpers import run_cli, serving


@pytest.fixture
def notes(hash_engine: Engine) -> Engine:
    hash_engine.ingest("notes", [from_text("The parking garage opens at seven.", "parking")])
    return hash_engine


@pytest.mark.parametrize(("clause", "said"), [
    ("kind:pdf", "a filter is KIND:VALUE with KIND one of name, type, after, before, pages, ref"),
    ("pages:0-3", "pages are A-B with 1 <= A <= B"),
    ("ocr:maybe", "ocr is yes or no"),
    ("name:", "the value after ':' is empty"),
    ("ref:xyz", "a ref is a document's sha256, or at least its first 6 hex digits"),
    # the engine took any page number (no hits), the schema nine digits: 'bad filter' with no reason
    ("pages:99999999999", "a page number is at most 999,999,999"),
])
def test_a_bad_where_through_the_gateway_says_what_the_in_process_cli_says(notes: Engine, clause: str,
                                                                            said: str) -> None:
    here = run_cli("datasets", "query", "notes", "parking", "--mode", "sparse", "--where", clause)
    assert here.code == Status.INVALID_ARGUMENT.exit_code and said in here.stderr, here.stderr
    with serving(notes) as (url, token):
        there = run_cli("--gateway", url, "--token", token, "datasets", "query", "notes", "parking",
                        "--mode", "sparse", "--where", clause)
    assert there.code == Status.INVALID_ARGUMENT.exit_code, there.stderr
    assert "error: INVALID_ARGUMENT:" in there.stderr and said in there.stderr, there.stderr
    assert "e.g. --where name:guide/*" in there.stderr   # what to write instead
    assert "should match pattern" not in there.stderr and "^(name:" not in there.stderr


def test_a_where_the_engine_reads_but_the_schema_spells_otherwise_is_told_its_spelling(notes: Engine) -> None:
    with serving(notes) as (url, token):
        answer = httpx.post(f"{url}/v1/datasets/notes/query", timeout=30, headers={"Authorization": f"Bearer {token}"},
                            json={"text": "parking", "mode": "sparse", "where": ["type: PDF"]})
    assert answer.status_code == 400 and answer.json()["code"] == "INVALID_ARGUMENT"
    assert "write 'type: PDF' as 'type:pdf'" in answer.json()["message"], answer.text


@pytest.mark.parametrize("clause", ["type: TXT", "TYPE:txt", "type:.TXT", "pages: 1 - 2", "pages:01-002", "ocr: NO",
                                    "type:ocr"])
def test_a_where_the_engine_reads_answers_through_the_cli_and_sdk_as_in_process(notes: Engine, clause: str) -> None:
    """The Python SDK sends a clause in the schema's spelling, so the CLI over --gateway reads it as in-process."""
    notes.ingest("notes", [from_text("Parking permits are issued at the front desk.", "permits.txt")])
    here = [h.passage_ref for h in notes.query("notes", "parking", mode="sparse", where=[clause]).hits]
    # a text file has no pages, and was not read by OCR: nothing, on both sides
    assert here or clause.startswith(("pages", "type:ocr"))
    with serving(notes) as (url, token):
        there = run_cli("--gateway", url, "--token", token, "datasets", "query", "notes", "parking",
                        "--mode", "sparse", "--where", clause, "--json")
    assert there.code == 0, there.stderr
    assert [h["passage_ref"] for h in json.loads(there.stdout)["hits"]] == here


@pytest.mark.parametrize(("method", "path", "body", "said"), [
    ("POST", "/v1/datasets/Bad Name/query", {"text": "parking"},
     "path.name: dataset name 'Bad Name' is not allowed; use 1 to 64 lowercase letters"),
    ("POST", "/v1/datasets/notes/documents", {"documents": [{"text": "hello there", "name": "../up"}]},
     "documents.0.name: the document name '../up' has a '.' or '..' segment"),
    ("POST", "/v1/datasets/notes/documents", {"documents": [{"text": "hello there", "name": "a\u202eb"}]},
     "documents.0.name: the document name 'a\\u202eb' holds the control character"),
    ("POST", "/v1/datasets/notes/documents", {"documents": [{"text": "hello there", "source_path": "a\nb"}]},
     "documents.0.source_path: the source path 'a\\nb' holds the control character"),
    ("POST", "/v1/datasets/notes/documents", {"documents": [{"data_base64": "abc"}]},
     "documents.0.data_base64: not valid base64 (the standard alphabet, padded with '=')"),
    ("POST", "/v1/datasets/notes/query", {"text": "  "}, "text: the text is blank; give the words to search for"),
    ("POST", "/v1/agent/runs", {"goal": "parking", "dataset": "Notes"},
     "dataset: dataset name 'Notes' is not allowed; use 1 to 64 lowercase letters"),
])
def test_a_string_that_fails_the_schemas_pattern_is_told_the_rule_not_the_pattern(
        notes: Engine, method: str, path: str, body: dict, said: str) -> None:
    # the pattern itself was the message: 300 characters of character classes for a document name
    with serving(notes) as (url, token):
        answer = httpx.request(method, f"{url}{path}", json=body, timeout=30,
                               headers={"Authorization": f"Bearer {token}"})
        assert [d.name for d in notes.list_documents("notes")] == ["parking"]  # nothing stored
    assert answer.status_code == 400 and answer.json()["code"] == "INVALID_ARGUMENT", answer.text
    message = answer.json()["message"]
    assert said in message and "should match pattern" not in message, message


def test_a_body_that_is_not_utf8_is_told_to_send_utf8_json(notes: Engine) -> None:
    with serving(notes) as (url, token):
        answer = httpx.post(f"{url}/v1/datasets/notes/query", timeout=30, content=b'{"text": "caf\xe9"}',
                            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        assert notes.query("notes", "parking", mode="sparse").hits  # nothing stored was touched
    assert answer.status_code == 400 and answer.json()["code"] == "INVALID_ARGUMENT"
    message = answer.json()["message"]
    assert "not UTF-8" in message and "offset 13" in message and "send it as UTF-8 JSON" in message, message


def test_a_token_file_that_is_a_folder_is_called_a_folder_not_a_permission_problem(kx_home: Path) -> None:
    kx_home.mkdir(parents=True, exist_ok=True)
    (kx_home / "gateway.token").mkdir()
    for mode in (0o755, 0o700):   # readable by others, as a folder usually is; and private
        (kx_home / "gateway.token").chmod(mode)
        for reading in (ensure_token, read_token):   # kx serve / kx mcp --http starting; a client on this machine
            with pytest.raises(KxError) as err:
                reading(kx_home)
            assert err.value.status is Status.FAILED_PRECONDITION
            message = err.value.message
            assert "gateway.token is a folder" in message and "move it out of the way" in message, message
            assert "chmod" not in message and "permission" not in message
    shown = run_cli("serve", "--port", "0")
    assert shown.code == Status.FAILED_PRECONDITION.exit_code and "is a folder" in shown.stderr, shown.stderr
    assert (kx_home / "gateway.token").is_dir()   # nothing was moved or removed on the user's behalf


def test_an_ingest_with_every_document_refused_is_a_400_listing_them_and_stores_nothing(hash_engine: Engine) -> None:
    empty, not_a_pdf = {"name": "blank", "text": "   "}, {"name": "scan", "data_base64": "aGVsbG8=",
                                                          "media_type": "application/pdf"}
    with serving(hash_engine) as (url, token):
        headers = {"Authorization": f"Bearer {token}"}
        refused = httpx.post(f"{url}/v1/datasets/fresh/documents", timeout=30, headers=headers,
                             json={"documents": [empty, not_a_pdf]})
        missing = httpx.get(f"{url}/v1/datasets/fresh", timeout=30, headers=headers)
        partly = httpx.post(f"{url}/v1/datasets/fresh/documents", timeout=30, headers=headers,
                            json={"documents": [empty, {"name": "ok", "text": "The lift is on the left."}]})
    assert refused.status_code == 400, refused.text
    body = refused.json()
    assert body["code"] == "INVALID_ARGUMENT" and "nothing was stored" in body["message"]
    assert "blank: " in body["message"] and "scan: " in body["message"] and "not one" in body["message"]
    assert [(r["name"], r["status"], r["code"]) for r in body["results"]] == [
        ("blank", "refused", "INVALID_ARGUMENT"), ("scan", "refused", "INVALID_ARGUMENT")]
    assert set(body) == {"code", "message", "results"} and all(r["reason"] for r in body["results"])
    assert missing.status_code == 404   # not even an empty dataset was made
    assert partly.status_code == 200, partly.text   # one taken: a success, the refusal listed
    assert partly.json()["added"] == 1 and [r["status"] for r in partly.json()["results"]] == ["refused", "added"]


def test_the_python_sdk_and_the_cli_report_every_refusal_through_the_gateway_as_in_process(
        hash_engine: Engine) -> None:
    import json

    from engine import KxClient
    from engine.records import DocumentStatus

    here = run_cli("datasets", "ingest", "local", "--text", "  ", "--json")
    with serving(hash_engine) as (url, token):
        with KxClient(url, token=token) as client:
            report = client.ingest_documents("remote", ["  ", "\n"], names=["blank", "newline"])
        there = run_cli("--gateway", url, "--token", token, "datasets", "ingest", "remote", "--text", "  ", "--json")
    # the SDK is a Backend: a refusal is a result in the report, as the engine gives it, not an exception
    assert [(r.name, r.status, r.code) for r in report.results] == [
        ("blank", DocumentStatus.REFUSED, "INVALID_ARGUMENT"), ("newline", DocumentStatus.REFUSED, "INVALID_ARGUMENT")]
    assert report.created is False and report.documents == 0
    for shown in (here, there):
        assert shown.code == Status.INVALID_ARGUMENT.exit_code, shown.stderr
        assert "1 of 1 document(s) refused; nothing was ingested" in shown.stderr
        data = json.loads(shown.stdout)
        assert data["refused"] == 1 and data["results"][0]["status"] == "refused"
        assert "nothing to index" in data["results"][0]["reason"]


def test_a_document_ref_that_is_not_whole_is_told_so_with_where_the_refs_are(notes: Engine) -> None:
    # a ref prefix (what read_document and where ref: take) was 'document 0e9674918 is not in dataset': the
    # same 12 characters as the document that is there, and no next step
    ref = notes.list_documents("notes")[0].ref
    with pytest.raises(KxError) as here:
        notes.document_text("notes", ref[:12])
    with serving(notes) as (url, token):
        headers = {"Authorization": f"Bearer {token}"}
        for path in (f"documents/{ref[:12]}", f"documents/{ref[:12]}/passages", "documents/parking"):
            answer = httpx.get(f"{url}/v1/datasets/notes/{path}", headers=headers, timeout=30)
            assert answer.status_code == 404 and answer.json()["code"] == "NOT_FOUND", answer.text
            assert "a ref is the document's full sha256 (64 hex digits, a prefix is not enough)" in \
                answer.json()["message"]
            assert "`kx datasets documents notes --json` lists each document's ref" in answer.json()["message"]
        whole = httpx.get(f"{url}/v1/datasets/notes/documents/{'0' * 64}", headers=headers, timeout=30).json()
    assert here.value.status is Status.NOT_FOUND and "a prefix is not enough" in here.value.message
    assert whole["message"] == ("document 000000000000 is not in dataset 'notes'; `kx datasets documents notes "
                                "--json` lists each document's ref")


def test_a_vector_with_nan_and_a_body_nested_too_deep_are_told_what_is_wrong(notes: Engine) -> None:
    # NaN read 'Input should be less than or equal to 340282346638528860000000000000000000000'; JSON nested
    # thousands deep 'There was an error parsing the body'
    from engine import KxClient

    with serving(notes) as (url, token):
        client = KxClient(url, token=token)
        with pytest.raises(KxError) as nan:
            client.query_dataset("notes", vector=[float("nan"), 1.0, 0.0])
        with pytest.raises(KxError) as inf:
            client.ingest_documents("notes", ["a note"], vectors=[[float("inf"), 1.0]])
        deep = httpx.post(f"{url}/v1/datasets/notes/query", timeout=30, content=b"[" * 5000 + b"]" * 5000,
                          headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        assert [d.name for d in notes.list_documents("notes")] == ["parking"]  # nothing stored
    assert nan.value.status is Status.INVALID_ARGUMENT and "vector.0: Input should be a finite number" in \
        nan.value.message, nan.value.message
    assert inf.value.status is Status.INVALID_ARGUMENT and "vector.0: Input should be a finite number" in \
        inf.value.message, inf.value.message
    assert deep.status_code == 400 and deep.json()["code"] == "INVALID_ARGUMENT"
    assert deep.json()["message"].startswith("the body's JSON nests deeper than the gateway parses; send the object")


def test_a_gateway_address_given_with_v1_is_told_to_drop_it(notes: Engine) -> None:
    # `kx --gateway http://127.0.0.1:50151/v1` asked /v1/v1/datasets and heard "the API lives under /v1"
    with serving(notes) as (url, token):
        there = run_cli("--gateway", f"{url}/v1", "--token", token, "datasets", "list")
        other = httpx.get(f"{url}/v2/datasets", headers={"Authorization": f"Bearer {token}"}, timeout=30).json()
    assert there.code == Status.NOT_FOUND.exit_code, there.stderr
    assert "the path starts /v1/v1, so the client was given the gateway's address with /v1 on its end; give it " \
           "as http://HOST:PORT, without a path" in there.stderr, there.stderr
    assert other["message"] == "no such route; the API lives under /v1 (see /openapi.json)"


def _ingested_here_and_through_a_gateway(engine: Engine, folder: Path) -> list[list[dict]]:
    """`kx datasets ingest --json` of `folder` in-process and through a gateway over `engine`: each run's
    per-document results, each run having ended 0 (a refused file found in a folder is reported, not failed,
    through the gateway as in-process)."""
    with serving(engine) as (url, token):
        there = run_cli("--gateway", url, "--token", token, "datasets", "ingest", "remote", str(folder), "--json")
    here = run_cli("datasets", "ingest", "local", str(folder), "--json")
    for shown in (here, there):
        assert shown.code == 0 and "refused " in shown.stderr, shown.stderr
    return [json.loads(shown.stdout)["results"] for shown in (here, there)]


@pytest.mark.slow  # the in-process `kx datasets ingest` embeds with the real model
def test_a_folder_with_one_badly_named_file_goes_in_through_the_gateway_as_in_process(
        hash_engine: Engine, tmp_path: Path) -> None:
    """A file whose name holds a control character is refused alone in-process; through the gateway the
    client sent it, the schema refused the whole request, and none of the folder's files went in."""
    folder = tmp_path / "pile"
    folder.mkdir()
    (folder / "ta\tb.txt").write_text("a note about tabs")
    (folder / "fine.txt").write_text("a note about lighthouses")
    for results in _ingested_here_and_through_a_gateway(hash_engine, folder):
        results = {r["name"]: (r["status"], r["reason"]) for r in results}
        assert results["fine"] == ("added", None)
        assert results["ta\tb"][0] == "refused" and "control character" in results["ta\tb"][1]


@pytest.mark.slow  # the in-process `kx datasets ingest` embeds with the real model
def test_a_file_named_longer_than_the_gateway_takes_is_refused_alone_on_every_way_in(
        hash_engine: Engine, tmp_path: Path) -> None:
    """A document name is at most 1,024 characters through the gateway (its schema); in-process a deeper
    file went in under a longer name, and through the gateway it failed the whole request."""
    folder = tmp_path / "pile"
    deep = folder.joinpath(*(f"{i}" * 200 for i in range(6)))
    deep.mkdir(parents=True)
    (deep / "mole.txt").write_text("a deep note about moles")
    (folder / "vole.txt").write_text("a shallow note about voles")
    for listed in _ingested_here_and_through_a_gateway(hash_engine, folder):
        results = sorted((r["status"], r["reason"] or "") for r in listed)
        assert [status for status, _reason in results] == ["added", "refused"]
        assert "at most 1,024" in results[1][1] and "shorten" in results[1][1]


def _raw_answer(url: str, request: bytes, pause_after: float = 0.0) -> tuple[int, dict, float]:
    """(status, JSON body, seconds until the gateway answered) for raw request bytes, sent as written."""
    import socket
    import time

    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        started = time.monotonic()
        sock.sendall(request)
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body or b"{}"), time.monotonic() - started


def test_an_empty_host_and_two_authorization_headers_are_refused(notes: Engine) -> None:
    """With two Authorization headers the first won: which one a proxy forwards or checks may differ."""
    with serving(notes) as (url, token):
        own = url.removeprefix("http://").encode()
        auth = b"Authorization: Bearer " + token.encode()
        ask = b"GET /v1/datasets HTTP/1.1\r\n%s\r\nConnection: close\r\n\r\n"
        assert _raw_answer(url, ask % (b"Host: " + own + b"\r\n" + auth))[0] == 200
        for host in (b"Host:", b"Host: ", b"Host: :" + own.split(b":")[1]):
            status, body, _ = _raw_answer(url, ask % (host + b"\r\n" + auth))
            assert (status, body["code"]) == (403, "PERMISSION_DENIED") and "Host header" in body["message"]
        for second in (b"Authorization: Bearer wrong", auth):
            status, body, _ = _raw_answer(url, ask % (b"Host: " + own + b"\r\n" + auth + b"\r\n" + second))
            assert (status, body["code"]) == (403, "PERMISSION_DENIED")
            assert "more than one Authorization header" in body["message"]


def test_a_body_that_trickles_in_is_cut_off_and_a_whole_one_goes_in(notes: Engine,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """No body-read deadline: a client that declared a body and sent part of it held the request ~46 s."""
    from engine.server import security

    monkeypatch.setattr(security, "BODY_GRACE_SECONDS", 1.0)
    with serving(notes) as (url, token):
        head = (b"POST /v1/datasets/notes/query HTTP/1.1\r\nHost: " + url.removeprefix("http://").encode()
                + b"\r\nAuthorization: Bearer " + token.encode() + b"\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\nConnection: close\r\n\r\n")
        whole = b'{"text": "parking", "mode": "sparse"}'
        status, body, waited = _raw_answer(url, head % len(whole) + whole[:10])
        assert (status, body["code"]) == (400, "INVALID_ARGUMENT") and "arrived too slowly" in body["message"]
        assert 0.9 <= waited < 5, waited
        status, body, _ = _raw_answer(url, head % len(whole) + whole)
        assert status == 200 and body["hits"][0]["text"] == "The parking garage opens at seven."


def test_two_documents_of_one_name_in_one_request_are_refused_and_nothing_is_stored(notes: Engine) -> None:
    """One request added both as versions 1 and 2 of the name, in an order the client did not choose."""
    with serving(notes) as (url, token):
        answer = httpx.post(f"{url}/v1/datasets/notes/documents", timeout=30,
                            headers={"Authorization": f"Bearer {token}"},
                            json={"documents": [{"name": "hours", "text": "Open at eight."},
                                                {"name": "other", "text": "Closed on Sunday."},
                                                {"name": "hours", "text": "Open at nine."}]})
    assert answer.status_code == 400 and answer.json()["code"] == "INVALID_ARGUMENT"
    assert "documents[0] and documents[2] are both named 'hours'" in answer.json()["message"]
    assert [d.name for d in notes.list_documents("notes")] == ["parking"]
