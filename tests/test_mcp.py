"""The end-to-end half of tests/unit/test_mcp.py (a model, processes or servers there):
`kx mcp` driven by the `mcp` SDK's own client.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

from .helpers import REPO, wait_until_answering
from .unit.test_mcp import CAFE, RETURNS, _env, _free_port, _readme_desktop_config, served_home, text_of  # noqa: F401 - helpers and fixtures


@pytest.mark.slow
def test_kx_mcp_over_stdio_answers_every_tool(served_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "drop"
    folder.mkdir()
    (folder / "parking.md").write_text("# Parking\nVisitors park in bay C behind the warehouse.\n")
    (tmp_path / "vault.md").write_text("The vault code is 1234.")
    os.link(tmp_path / "vault.md", folder / "vault.md")   # a second name inside for a file outside: refused
    params = StdioServerParameters(command=sys.executable, cwd=str(REPO), env=_env(served_home),
                                   args=["-m", "kx_tui", "mcp", "--allow-ingest", "--allow-path", str(folder)])

    async def run() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with Client(params, read_timeout_seconds=120) as client:
            seen["info"] = client.server_info
            seen["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
            seen["datasets"] = await client.call_tool("list_datasets", {})
            seen["search"] = await client.call_tool("search", {"dataset": "handbook", "k": 3,
                                                               "query": "how long do I have to return a logger?"})
            hit = seen["search"].structured_content["hits"][0]
            seen["read"] = await client.call_tool("read_document", {"dataset": "handbook",
                                                                    "document": hit["document_ref"],
                                                                    "passage_ref": hit["passage_ref"]})
            seen["documents"] = await client.call_tool("list_documents", {"dataset": "handbook", "limit": 2})
            seen["text"] = await client.call_tool("ingest_text", {"dataset": "scratch", "name": "dock",
                                                                  "text": "The loading dock closes at six."})
            seen["file"] = await client.call_tool("ingest_file", {"dataset": "scratch", "path": "parking.md"})
            seen["dense"] = await client.call_tool("search", {"dataset": "scratch", "query": "where do visitors "
                                                              "leave their cars", "mode": "dense", "k": 1})
            seen["bad"] = await client.call_tool("search", {"dataset": "handbook", "query": "x", "k": 0})
            seen["missing"] = await client.call_tool("search", {"dataset": "nope", "query": "x"})
            seen["escape"] = await client.call_tool("ingest_file", {"dataset": "scratch", "path": "/etc/passwd"})
            seen["hardlink"] = await client.call_tool("ingest_file", {"dataset": "scratch", "path": "vault.md"})
            seen["after"] = await client.call_tool("list_datasets", {})
        return seen

    seen = anyio.run(run)
    assert seen["info"].name == "kx"
    assert seen["tools"] == ["ingest_file", "ingest_text", "list_datasets", "list_documents", "read_document",
                             "search"]
    assert [d["name"] for d in seen["datasets"].structured_content["datasets"]] == ["handbook"]
    hits = seen["search"].structured_content["hits"]
    assert hits[0]["document_name"] == "refunds-and-returns" and "[refunds-and-returns, chunk" in hits[0]["citation"]
    assert hits[0]["citation"] in text_of(seen["search"])
    assert hits[0]["text"] in seen["read"].structured_content["text"]
    assert seen["documents"].structured_content["total"] == 6
    assert seen["text"].structured_content["added"] == 1 and seen["file"].structured_content["added"] == 1
    assert seen["dense"].structured_content["hits"][0]["document_name"] == "parking"
    assert seen["bad"].is_error and text_of(seen["bad"]).startswith("INVALID_ARGUMENT: search: k")
    assert seen["missing"].is_error and seen["missing"].structured_content["code"] == "NOT_FOUND"
    assert seen["escape"].is_error and seen["escape"].structured_content["code"] == "PERMISSION_DENIED"
    assert seen["hardlink"].is_error and seen["hardlink"].structured_content["code"] == "PERMISSION_DENIED"
    assert "has 2 names (hard links)" in text_of(seen["hardlink"])
    assert sorted(d["name"] for d in seen["after"].structured_content["datasets"]) == ["handbook", "scratch"]


@pytest.mark.slow
def test_kx_mcp_over_http_needs_the_token_and_refuses_a_foreign_host(served_home: Path, tmp_path: Path) -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    port = _free_port()
    log = tmp_path / "mcp-http.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kx_tui", "mcp", "--http", "--port", str(port)], cwd=REPO,
                                env=_env(served_home), stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_until_answering(proc, url, log, within=90)
        token = (served_home / "gateway.token").read_text().strip()
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "t", "version": "0"}}}
        accept = {"Accept": "application/json, text/event-stream"}
        anonymous = httpx.post(url, json=hello, headers=accept, timeout=10)
        assert anonymous.status_code == 401 and anonymous.json()["code"] == "UNAUTHENTICATED"
        wrong = httpx.post(url, json=hello, headers={**accept, "Authorization": "Bearer nope"}, timeout=10)
        assert wrong.status_code == 401
        rebound = httpx.post(url, json=hello, timeout=10,
                             headers={**accept, "Authorization": f"Bearer {token}", "Host": f"evil.example:{port}"})
        assert rebound.status_code == 403 and rebound.json()["code"] == "PERMISSION_DENIED"
        foreign = httpx.post(url, json=hello, timeout=10, headers={**accept, "Authorization": f"Bearer {token}",
                                                                    "Origin": "http://evil.example"})
        assert foreign.status_code == 403

        async def run() -> tuple[list[str], CallToolResult]:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
            async with http, Client(streamable_http_client(url, http_client=http)) as client:
                names = sorted(t.name for t in (await client.list_tools()).tools)
                return names, await client.call_tool("search", {"dataset": "handbook", "query": "remote work "
                                                                "equipment allowance", "k": 2})
        names, found = anyio.run(run)
        assert names == ["list_datasets", "list_documents", "read_document", "search"]
        assert not found.is_error and found.structured_content["hits"][0]["document_name"] == "remote-work"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=30) == 0, log.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
    lines = log.read_text()
    assert " POST /mcp 401 " in lines and " POST /mcp 403 " in lines and " POST /mcp 200 " in lines
    assert token not in lines


@pytest.mark.slow
def test_the_readme_desktop_config_starts_a_working_server(served_home: Path) -> None:
    """What a Claude Desktop user pastes: the command and args, run as written (KX_HOME pointed at a test home)."""
    entry = _readme_desktop_config()["mcpServers"]["kx"]
    assert entry["command"] == "kx" and set(entry["env"]) == {"KX_HOME"}
    installed = shutil.which("kx")  # `pip install -e .` puts it on PATH (CI: .ci/run)
    assert installed is not None, "the kx script is not on PATH; install the project with pip install -e ."
    params = StdioServerParameters(command=installed, args=entry["args"], cwd=str(REPO),
                                   env={**_env(served_home), "KX_HOME": str(served_home)})

    async def run() -> tuple[list[str], CallToolResult]:
        async with Client(params, read_timeout_seconds=120) as client:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            return names, await client.call_tool("search", {"dataset": "handbook", "query": "travel expenses"})
    names, found = anyio.run(run)
    assert names == ["list_datasets", "list_documents", "read_document", "search"]
    assert not found.is_error and "[travel-and-expenses" in text_of(found)


@pytest.mark.slow
def test_kx_mcp_fronts_a_gateway(tmp_path: Path) -> None:
    """`kx --gateway URL mcp`: the same tools over KxClient, the gateway's errors as tool errors."""
    from .test_gateway import _start, _stop

    gw = _start(tmp_path / "served" / "home", env={"KX_SERVE_EMBED_MODEL": "none"})
    try:
        with gw.client() as client:  # no model there: text with pre-computed vectors, searched sparse
            client.ingest_documents("remote", [RETURNS, CAFE], names=["returns", "cafe"],
                                    vectors=[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        env = {**_env(tmp_path / "empty-home"), "KX_GATEWAY_TOKEN": gw.token}
        params = StdioServerParameters(command=sys.executable, cwd=str(REPO), env=env,
                                       args=["-m", "kx_tui", "--gateway", gw.url, "mcp"])

        async def run() -> list[CallToolResult]:
            async with Client(params, read_timeout_seconds=120) as client:
                return [await client.call_tool("list_datasets", {}),
                        await client.call_tool("search", {"dataset": "remote", "query": "soup on fridays",
                                                          "mode": "sparse", "k": 1}),
                        await client.call_tool("read_document", {"dataset": "remote", "document": "returns",
                                                                 "max_chars": 40}),
                        await client.call_tool("search", {"dataset": "remote", "query": "soup", "mode": "dense"})]
        listed, found, read, dense = anyio.run(run)
    finally:
        assert _stop(gw) == 0
    assert [d["name"] for d in listed.structured_content["datasets"]] == ["remote"]
    assert found.structured_content["hits"][0]["citation"].startswith("[cafe, chunk 1/1")
    assert read.structured_content["text"] == RETURNS[:40]
    assert dense.is_error and dense.structured_content["code"] == "FAILED_PRECONDITION"  # no model on the gateway


@pytest.mark.slow
def test_a_stdio_request_the_sdk_cannot_read_is_answered_under_its_id(tmp_path: Path) -> None:
    """The SDK's stdio transport dropped such a line without a word: its caller waited for ever. A JavaScript
    client writes an unpaired surrogate as the escape "\\ud800" (JSON.stringify of a string cut in an emoji)."""
    import json
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("KX_")}
    env.update({"KX_HOME": str(tmp_path / "home"), "KX_SERVE_EMBED_MODEL": "none", "PYTHONPATH": str(REPO)})
    proc = subprocess.Popen([sys.executable, "-m", "kx_tui", "mcp"], cwd=REPO, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    lines = [json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "t", "version": "0"}}}).encode(),
             b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
             b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search",'
             b'"arguments":{"dataset":"notes","query":"caf\\ud83d"}}}',
             b'{"jsonrpc":"2.0","id":"two","method":"tools/call","params":[1, 2]}',
             b'{not json at all',
             b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_datasets","arguments":{}}}']
    answers: dict[Any, Any] = {}
    try:
        proc.stdin.write(b"\n".join(lines) + b"\n")
        proc.stdin.flush()
        while 3 not in answers:  # the last request's answer (closing stdin before it would cancel it)
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            answers[json.loads(line)["id"]] = json.loads(line)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert sorted(answers, key=str) == [0, 1, 3, None, "two"], answers  # the line that is not JSON: under null
    surrogate = answers[1]["error"]
    assert surrogate["code"] == -32700 and surrogate["data"]["code"] == "INVALID_ARGUMENT"
    assert surrogate["message"].startswith("INVALID_ARGUMENT: the request holds \\ud83d, an unpaired surrogate")
    shape = answers["two"]["error"]
    assert shape["code"] == -32602 and shape["data"]["field"] == "params"
    assert shape["message"] == "INVALID_ARGUMENT: tools/call: params must be an object, not an array"
    assert answers[None]["error"]["code"] == -32700
    assert answers[3]["result"]["structuredContent"] == {"datasets": []}  # and it kept serving
    assert proc.returncode == 0 and b"Traceback" not in err, err
