"""The line per request that `kx serve` (and `kx mcp --http`) write on stderr.
"""

from __future__ import annotations

import json
import re

import anyio
import httpx
import pytest

from engine import Engine
from engine.server.gateway import create_app
from engine.server.request_log import RequestLog

from .gateway_process import start_gateway, stop_gateway

LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (GET|POST) (\S+) (\d{3}) (\d+\.\d)ms 127\.0\.0\.1:\d+$")


def _serve(app, requests):
    """Send `requests` (method, path, headers) through `app` over ASGI; the answers' status codes."""
    async def run() -> list[int]:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:50151") as client:
            return [(await client.request(m, p, headers=h, json={} if m == "POST" else None)).status_code
                    for m, p, h in requests]
    return anyio.run(run)


def test_one_line_per_request_refusals_included_never_the_token_or_query(hash_engine: Engine) -> None:
    lines: list[str] = []
    app = RequestLog(create_app(hash_engine, "s3cret-token"), write=lines.append)
    auth = {"Authorization": "Bearer s3cret-token"}
    codes = _serve(app, [("GET", "/v1/datasets?secret=1", auth), ("GET", "/v1/datasets", {}),
                         ("GET", "/v1/datasets/nope", auth), ("GET", "/v1/datasets", {**auth, "Host": "evil.example"}),
                         ("GET", "/v1/datasets/a%0Ab", auth)])
    assert codes == [200, 401, 404, 403, 400]
    assert len(lines) == 5
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    assert [(m.group(1), m.group(2), int(m.group(3))) for m in parsed] == [  # type: ignore[union-attr]
        ("GET", "/v1/datasets", 200), ("GET", "/v1/datasets", 401), ("GET", "/v1/datasets/nope", 404),
        ("GET", "/v1/datasets", 403), ("GET", "/v1/datasets/a%0Ab", 400)]
    text = "\n".join(lines)
    assert "s3cret" not in text and "secret=1" not in text and "evil" not in text


def test_json_lines_carry_the_same_fields(hash_engine: Engine) -> None:
    lines: list[str] = []
    app = RequestLog(create_app(hash_engine, None, allow_local=True), json_lines=True, write=lines.append)
    _serve(app, [("GET", "/v1/health", {}), ("POST", "/v1/datasets/x/query", {})])
    first, second = (json.loads(line) for line in lines)
    assert set(first) == {"time", "method", "path", "status", "ms", "client"}
    assert (first["method"], first["path"], first["status"], first["client"][:10]) == ("GET", "/v1/health", 200,
                                                                                      "127.0.0.1:")
    assert (second["method"], second["status"]) == ("POST", 400) and second["ms"] >= 0


def test_control_characters_in_a_path_are_escaped() -> None:
    line = RequestLog(None).line({"type": "http", "method": "GET", "path": "/a\nb\x1b[31m", "client": None}, None, 1.0)
    assert "\n" not in line and "\x1b" not in line and line.endswith("GET /a\\x0ab\\x1b[31m 0 1.0ms -")


@pytest.mark.slow
def test_kx_serve_logs_by_default_json_on_request_and_nothing_when_quiet(tmp_path) -> None:
    seen = {}
    for flags in ((), ("--log-json",), ("--quiet",)):
        gw = start_gateway(tmp_path / "-".join(flags or ("plain",)) / "home", *flags,
                           env={"KX_SERVE_EMBED_MODEL": "none"})
        try:
            with gw.client() as client:
                client.list_datasets()
        finally:
            assert stop_gateway(gw) == 0
        seen[flags] = [line for line in gw.log.read_text().splitlines() if "/v1/" in line and "http://" not in line]
    assert any(LINE.match(line) and " GET /v1/datasets 200 " in line for line in seen[()])
    records = [json.loads(line) for line in seen[("--log-json",)]]
    assert {"method": "GET", "path": "/v1/datasets", "status": 200} in [
        {k: r[k] for k in ("method", "path", "status")} for r in records]
    assert seen[("--quiet",)] == []
