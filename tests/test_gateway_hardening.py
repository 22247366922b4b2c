"""The gateway tight in development mode: no CDN pages, one Host and Origin, slow and greedy clients cut off,
names and source paths checked, the huge-offset request a 400 (it was the only HTTP 500 in ~550 requests).

A real `kx serve --dev-allow-local` on loopback (no model: vectors only), raw sockets where httpx would
tidy the request up.
"""

from __future__ import annotations

import json
import socket
import time

import pytest

from engine.backend import MAX_OFFSET

from .gateway_process import Gateway, error_of, start_gateway, stop_gateway
from .helpers import run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("hardening") / "home"
    gateway = start_gateway(home, "--dev-allow-local", env={"KX_SERVE_EMBED_MODEL": "none"})
    with gateway.client(token=None) as client:
        client.ingest_documents("hb", ["north", "east"], vectors=[[1, 0], [0, 1]])
    yield gateway
    assert stop_gateway(gateway) == 0


def _raw(port: int, request: bytes, timeout: float = 10.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        chunks = []
        while True:
            data = sock.recv(65536)
            if not data:
                return b"".join(chunks)
            chunks.append(data)


def _status_and_body(answer: bytes) -> tuple[int, dict]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body or b"{}")


@pytest.mark.parametrize("offset", [str(10**23), str(MAX_OFFSET + 1), "-1"])
def test_a_huge_or_negative_offset_is_a_400_not_a_500(gw: Gateway, offset: str) -> None:
    answer = gw.raw("GET", f"/v1/datasets/hb/documents?offset={offset}", token=None)
    assert error_of(answer) == (400, "INVALID_ARGUMENT")
    assert "offset" in answer.json()["message"]
    assert gw.raw("GET", f"/v1/datasets/hb/documents?offset={MAX_OFFSET}", token=None).json()["documents"] == []


def test_the_cli_refuses_a_huge_offset_with_a_status(gw: Gateway) -> None:
    for prefix in ([], ["--gateway", gw.url]):
        result = run_cli("--home", str(gw.home), *prefix, "datasets", "documents", "hb", "--offset", str(10**23))
        assert result.code == 3 and "INVALID_ARGUMENT" in result.stderr and "offset" in result.stderr
        assert "INTERNAL" not in result.stderr


def test_no_page_loads_scripts_from_elsewhere_and_the_schema_stays(gw: Gateway) -> None:
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        answer = gw.raw("GET", path, token=None)
        assert answer.status_code == 404 and "<script" not in answer.text
    schema = gw.raw("GET", "/openapi.json", token=None).json()
    params = {p["name"]: p["schema"] for p in schema["paths"]["/v1/datasets/{name}/documents"]["get"]["parameters"]}
    assert params["name"]["pattern"] == "^[a-z0-9][a-z0-9_-]{0,63}$"
    assert (params["offset"]["minimum"], params["offset"]["maximum"]) == (0, MAX_OFFSET)
    assert (params["limit"]["minimum"], params["limit"]["maximum"]) == (1, 1000)


@pytest.mark.parametrize("header", ["Host", "Origin"])
def test_a_request_with_two_host_or_origin_headers_is_refused(gw: Gateway, header: str) -> None:
    own = f"127.0.0.1:{gw.port}"
    values = [own, "evil.example"] if header == "Host" else [f"http://{own}", "http://evil.example"]
    lines = ["GET /v1/datasets HTTP/1.1", f"Host: {own}"] if header == "Origin" else ["GET /v1/datasets HTTP/1.1"]
    lines += [f"{header}: {value}" for value in values] + ["Connection: close", "", ""]
    answer = _raw(gw.port, "\r\n".join(lines).encode())
    if header == "Host":  # h11 itself refuses a second Host before the gateway sees the request
        assert answer.startswith(b"HTTP/1.1 400 ") and b"v1/datasets" not in answer
        return
    status, body = _status_and_body(answer)
    assert (status, body["code"]) == (403, "PERMISSION_DENIED")
    assert f"more than one {header} header" in body["message"]


def test_a_client_that_sends_its_headers_slowly_is_cut_off(gw: Gateway) -> None:
    with socket.create_connection(("127.0.0.1", gw.port), timeout=30) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /v1/health HTTP/1.1\r\n")
        closed = None
        for i in range(20):  # one header byte every second: never a whole request
            try:
                sock.sendall(b"X-Slow: " if i == 0 else b"a")
            except OSError:
                closed = time.monotonic() - started
                break
            sock.settimeout(1.0)
            try:
                if sock.recv(1024) == b"":
                    closed = time.monotonic() - started
                    break
            except TimeoutError:
                continue
    assert closed is not None and 9 <= closed <= 14, closed


def test_one_client_holds_at_most_64_connections(gw: Gateway) -> None:
    held = []
    try:
        for _ in range(64):
            sock = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
            held.append(sock)
        time.sleep(0.3)  # the server has accepted them all
        status, body = _status_and_body(_raw(gw.port, b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
        assert (status, body["code"]) == (503, "UNAVAILABLE") and "most from one client (64)" in body["message"]
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.3)
    assert gw.raw("GET", "/v1/health", token=None).status_code == 200  # released with the connections


@pytest.mark.parametrize("name", ["../../etc/passwd", "a\u0000b", "a/./b", "..", "tab\there"])
def test_document_names_with_traversal_or_control_characters_are_refused(gw: Gateway, name: str) -> None:
    answer = gw.raw("POST", "/v1/datasets/hb/documents", token=None,
                    json={"documents": [{"text": "planted", "name": name, "vector": [0.5, 0.5]}]})
    assert error_of(answer) == (400, "INVALID_ARGUMENT")


def test_a_source_path_is_kept_but_marked_as_the_clients(gw: Gateway) -> None:
    refused = gw.raw("POST", "/v1/datasets/hb/documents", token=None,
                     json={"documents": [{"text": "x", "source_path": "a\u0000b", "vector": [0.5, 0.5]}]})
    assert error_of(refused) == (400, "INVALID_ARGUMENT")
    answer = gw.raw("POST", "/v1/datasets/hb/documents", token=None,
                    json={"documents": [{"text": "from afar", "name": "far", "source_path": "../../etc/passwd",
                                         "vector": [0.6, 0.4]}]})
    assert answer.status_code == 200, answer.text
    listed = gw.raw("GET", "/v1/datasets/hb/documents", token=None).json()["documents"]
    assert [d["source_path"] for d in listed if d["name"] == "far"] == ["client:../../etc/passwd"]
