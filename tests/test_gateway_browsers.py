"""The gateway against browsers: DNS rebinding (forged Host) and cross-site requests (foreign Origin).

A real `kx serve --dev-allow-local` on loopback (no model: vectors only), so
these requests need no token at all — the case the defences matter most for.
A forged Host or Origin is refused 403 PERMISSION_DENIED before the token,
the body or the engine are looked at; nothing is ingested; no response
carries CORS headers unless the operator named the origin.
"""

from __future__ import annotations

import httpx
import pytest

from engine import Engine, KxError, Status, load_settings
from engine.server.security import HostPolicy, split_host

from .gateway_process import Gateway, error_of, start_gateway, stop_gateway
from .helpers import run_cli

pytestmark = pytest.mark.slow

FRIEND = "http://localhost:3000"  # a browser app the operator lets in


@pytest.fixture(scope="module")
def open_gateway(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("browsers") / "home"
    gw = start_gateway(home, "--dev-allow-local", env={"KX_SERVE_EMBED_MODEL": "none",
                                                "KX_GATEWAY_ALLOWED_ORIGINS": FRIEND})
    with gw.client(token=None) as client:
        client.ingest_documents("notes", ["north", "east"], vectors=[[1, 0], [0, 1]])
    yield gw
    assert stop_gateway(gw) == 0


def _documents(gw: Gateway) -> int:
    return Engine(load_settings({"home": str(gw.home), "embed_model": "none"})).dataset_summary("notes").documents


def _post(gw: Gateway, headers: dict[str, str], token: str | None = None) -> httpx.Response:
    return gw.raw("POST", "/v1/datasets/notes/documents", token=token, headers=headers,
                  json={"documents": [{"text": "planted by a web page", "vector": [0.5, 0.5]}]})


def _cors(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.lower().startswith("access-control-")}


@pytest.mark.parametrize("host", [
    "evil.example:{port}",       # DNS rebinding: the page's own name, resolved to 127.0.0.1
    "evil.example",
    "localhost.evil.example:{port}",
    "127.0.0.1:1",               # loopback, but not this gateway's port
    "10.0.0.1:{port}",           # not loopback, and the gateway was bound to loopback
    "127.0.0.1:{port}:1",
    "",
])
def test_a_host_that_is_not_the_gateways_is_refused_token_or_not(open_gateway: Gateway, host: str) -> None:
    before = _documents(open_gateway)
    header = {"Host": host.format(port=open_gateway.port)}
    for token in (None, "default"):
        refused = _post(open_gateway, header, token=token)
        assert error_of(refused) == (403, "PERMISSION_DENIED")
        message = refused.json()["message"]
        assert "Host header" in message and f"http://127.0.0.1:{open_gateway.port}" in message
        assert "KX_GATEWAY_ALLOWED_HOSTS" in message and not _cors(refused)
    read = open_gateway.raw("GET", "/v1/datasets", token=None, headers=header)
    assert error_of(read) == (403, "PERMISSION_DENIED")  # nor can the page read what is there
    assert error_of(open_gateway.raw("GET", "/v1/health", token=None, headers=header))[0] == 403
    assert _documents(open_gateway) == before


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "https://127.0.0.1:{port}",
                                    "http://127.0.0.1:1", "http://localhost:3001"])
def test_a_foreign_origin_is_refused_csrf(open_gateway: Gateway, origin: str) -> None:
    before = _documents(open_gateway)
    headers = {"Origin": origin.format(port=open_gateway.port)}
    for token in (None, "default"):
        refused = _post(open_gateway, headers, token=token)
        assert error_of(refused) == (403, "PERMISSION_DENIED")
        assert "Origin header" in refused.json()["message"]
        assert "KX_GATEWAY_ALLOWED_ORIGINS" in refused.json()["message"] and not _cors(refused)
    assert _documents(open_gateway) == before
    # a form post (no preflight, text/plain) is refused the same way
    form = open_gateway.raw("POST", "/v1/datasets/notes/query", token=None, content=b'{"vector": [1, 0]}',
                            headers={**headers, "Content-Type": "text/plain"})
    assert error_of(form) == (403, "PERMISSION_DENIED")
    cross = open_gateway.raw("GET", "/v1/datasets", token=None, headers={"Sec-Fetch-Site": "cross-site"})
    assert error_of(cross) == (403, "PERMISSION_DENIED")


def test_the_gateways_own_names_and_origin_are_fine_without_cors(open_gateway: Gateway) -> None:
    port = open_gateway.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"127.0.0.2:{port}"):
        answer = open_gateway.raw("GET", "/v1/datasets", token=None, headers={"Host": host})
        assert answer.status_code == 200 and not _cors(answer), host
    own = open_gateway.raw("POST", "/v1/datasets/notes/query", token=None, json={"vector": [1, 0]},
                           headers={"Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin"})
    assert own.status_code == 200 and own.json()["hits"] and not _cors(own)


def test_only_an_origin_the_operator_named_gets_cors_headers(open_gateway: Gateway) -> None:
    preflight = open_gateway.raw("OPTIONS", "/v1/datasets/notes/query", token=None, headers={
        "Origin": FRIEND, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert preflight.status_code == 204
    assert _cors(preflight)["access-control-allow-origin"] == FRIEND
    assert "POST" in _cors(preflight)["access-control-allow-methods"]
    answer = open_gateway.raw("POST", "/v1/datasets/notes/query", token=None, json={"vector": [0, 1]},
                              headers={"Origin": FRIEND})
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == FRIEND
    assert "Origin" in answer.headers["vary"]
    evil = open_gateway.raw("OPTIONS", "/v1/datasets/notes/query", token=None, headers={
        "Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    assert error_of(evil) == (403, "PERMISSION_DENIED") and not _cors(evil)


def test_the_sdk_and_the_cli_keep_working(open_gateway: Gateway) -> None:
    with open_gateway.client(token=None) as client:
        assert [s.name for s in client.list_datasets()] == ["notes"]
        assert client.query_dataset("notes", vector=[1, 0], k=1).hits[0].text == "north"
    listed = run_cli("--gateway", open_gateway.url, "datasets", "list")
    assert listed.code == 0 and "notes" in listed.stdout
    with pytest.raises(KxError) as caught:  # the SDK raises the status, with the message
        with KxClient_with_host(open_gateway, "evil.example") as client:
            client.list_datasets()
    assert caught.value.status is Status.PERMISSION_DENIED and "Host header" in caught.value.message
    assert Status.PERMISSION_DENIED.exit_code == 11 and Status.PERMISSION_DENIED.http_status == 403


def KxClient_with_host(gw: Gateway, host: str):  # noqa: N802 - reads as the client it builds
    from engine import KxClient

    client = KxClient(gw.url, token=gw.token, timeout=30)
    client._http.headers["Host"] = f"{host}:{gw.port}"
    return client


# -- the policy itself, for the cases a loopback test cannot reach --------------------------


def test_split_host_reads_names_v6_literals_and_ports() -> None:
    assert split_host("LocalHost:50151", 80) == ("localhost", 50151)
    assert split_host("[::1]:8080", 80) == ("::1", 8080)
    assert split_host("[::1]", 80) == ("::1", 80)
    assert split_host("example.org", 80) == ("example.org", 80)
    for bad in ("::1", "[::1", "a:b", "a:99999", ":80", "[::1]x"):
        assert split_host(bad, 80) is None, bad


def test_an_explicit_bind_adds_that_address_and_a_wildcard_bind_adds_ip_literals() -> None:
    loopback = HostPolicy("127.0.0.1")
    assert loopback.check_host("127.0.0.1:7", 7) is None and loopback.check_host("[::1]:7", 7) is None
    assert loopback.check_host("192.168.1.5:7", 7) is not None
    lan = HostPolicy("192.168.1.5", allowed_hosts=["kx.lan"])
    assert lan.check_host("192.168.1.5:7", 7) is None and lan.check_host("kx.lan:7", 7) is None
    assert lan.check_host("192.168.1.6:7", 7) is not None and lan.check_host("evil.example:7", 7) is not None
    everywhere = HostPolicy("0.0.0.0")
    assert everywhere.check_host("10.1.2.3:7", 7) is None  # an IP literal is never a rebinding
    assert everywhere.check_host("evil.example:7", 7) is not None
    assert lan.check_origin("http://kx.lan:7", None, 7) is None
    assert lan.check_origin("http://kx.lan:8", None, 7) is not None
