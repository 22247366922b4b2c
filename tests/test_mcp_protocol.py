"""MCP to the letter: every malformed JSON-RPC message gets the spec's error under its id (or null), over stdio
(a real `kx mcp` process fed raw lines) and streamable HTTP (the real app under uvicorn, raw bodies).

A non-JSON line and `"params": "oops"` got no answer at all over stdio (the client waited for its own
timeout); `tools/call` without `name` came back "Invalid request parameters" with `data: ""`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine import Engine

from .helpers import REPO

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}

# (raw message, the id it is answered under, JSON-RPC code, the field `data` names or None)
CASES: list[tuple[bytes, Any, int, str | None]] = [
    (b"{not json at all", None, -32700, None),
    (b"hello", None, -32700, None),
    (b"[1, 2]", None, -32600, None),
    (b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":"oops"}', 9, -32602, "params"),
    (b'{"jsonrpc":"2.0","id":"p","method":"tools/call","params":[1,2]}', "p", -32602, "params"),
    (b'{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{}}', 10, -32602, "params.name"),
    (b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":5}}', 11, -32602, "params.name"),
    (b'{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"search","arguments":"x"}}', 12, -32602,
     "params.arguments"),
    (b'{"jsonrpc":"2.0","id":13,"method":"resources/read","params":{}}', 13, -32602, "params.uri"),
    (b'{"jsonrpc":"2.0","id":14,"method":"prompts/get","params":{"arguments":{}}}', 14, -32602, "params.name"),
    (b'{"jsonrpc":"1.0","id":15,"method":"tools/list"}', 15, -32600, "jsonrpc"),
    (b'{"jsonrpc":"2.0","id":16,"method":5}', 16, -32600, "method"),
    (b'{"jsonrpc":"2.0","id":17}', 17, -32600, "method"),
    (b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}', None, -32600, "id"),
    (b'{"jsonrpc":"2.0","method":"tools/list"}', None, -32600, "id"),
]
HTTP_ONLY: list[tuple[bytes, Any, int, str | None]] = []


def _check(answer: dict[str, Any], expected_id: Any, code: int, field: str | None) -> None:
    assert answer["jsonrpc"] == "2.0" and answer["id"] == expected_id, answer
    error = answer["error"]
    assert error["code"] == code, answer
    assert error["message"].startswith("INVALID_ARGUMENT: ") and error["data"]["code"] == "INVALID_ARGUMENT"
    assert error["data"]["message"] and (field is None or error["data"]["field"] == field), answer


@pytest.mark.slow  # a `kx mcp` process
def test_every_malformed_line_over_stdio_is_answered_under_its_id_or_null(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KX_")}
    env.update({"KX_HOME": str(tmp_path / "home"), "KX_SERVE_EMBED_MODEL": "none", "PYTHONPATH": str(REPO)})
    proc = subprocess.Popen([sys.executable, "-m", "kx_tui", "mcp"], cwd=REPO, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    lines = [json.dumps(INIT).encode(), b'{"jsonrpc":"2.0","method":"notifications/initialized"}']
    lines += [raw for raw, *_ in CASES]
    lines.append(b'{"jsonrpc":"2.0","id":"last","method":"tools/list"}')
    answers = []
    try:
        proc.stdin.write(b"\n".join(lines) + b"\n")
        proc.stdin.flush()
        while not answers or answers[-1].get("id") != "last":
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            answers.append(json.loads(line))
        proc.stdin.close()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert answers[0]["id"] == 0 and "result" in answers[0]
    assert len(answers) == len(CASES) + 2, json.dumps([(a.get("id"), a.get("error", {}).get("code"))
                                                       for a in answers])  # one answer per message, in order
    for answer, (_raw, expected_id, code, field) in zip(answers[1:], CASES):
        _check(answer, expected_id, code, field)
    assert [t["name"] for t in answers[-1]["result"]["tools"]]  # and it kept serving


def test_every_malformed_body_over_http_is_answered_under_its_id_or_null(hash_engine: Engine) -> None:
    import httpx
    import uvicorn

    from engine.server.mcp_server import build_server, http_app

    from .helpers import start_server

    token = "t" * 43
    server = uvicorn.Server(uvicorn.Config(http_app(build_server(hash_engine), token, max_bytes=10**6,
                                                    bind_host="127.0.0.1"), log_level="warning", lifespan="on"))
    thread, url, sock = start_server(server)
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    try:
        for raw, expected_id, code, field in CASES + HTTP_ONLY:
            answer = httpx.post(f"{url}/mcp", headers=headers, content=raw, timeout=10)
            assert answer.status_code == 400, (raw, answer.text)
            _check(answer.json(), expected_id, code, field)
        hello = httpx.post(f"{url}/mcp", headers=headers, json=INIT, timeout=10)
        assert hello.status_code == 200 and "mcp-session-id" in hello.headers  # a good message still goes in
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_a_resource_named_from_a_subfolder_reads_and_a_prompt_for_a_missing_dataset_is_refused(
        hash_engine: Engine) -> None:
    """Every document from a subfolder has a name with '/': `.../documents/pdf/crazyones` was NOT_FOUND (only
    `pdf%2Fcrazyones` read). A prompt for a dataset there is not was served."""
    import anyio
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from engine.server.mcp_server import build_server
    from engine.text.inputs import from_text

    hash_engine.ingest("docs", [from_text("Here's to the crazy ones, the misfits.", "pdf/crazyones")])

    async def run() -> tuple[Any, Any, Any]:
        async with Client(build_server(hash_engine)) as client:
            text = await client.read_resource("kx://datasets/docs/documents/pdf/crazyones")
            good = await client.get_prompt("answer_with_citations", {"dataset": "docs", "question": "who?"})
            try:
                refused: Any = await client.get_prompt("answer_with_citations", {"dataset": "nope", "question": "?"})
            except MCPError as exc:
                refused = exc
            return text, good, refused
    text, good, refused = anyio.run(run)
    assert text.contents[0].text == "Here's to the crazy ones, the misfits."
    assert "dataset 'docs'" in good.messages[0].content.text
    assert isinstance(refused, MCPError) and refused.error.code == -32602
    assert refused.error.message.startswith("NOT_FOUND: dataset 'nope' does not exist")


def test_the_http_refusals_name_kx_mcps_own_command(hash_engine: Engine) -> None:
    """The Origin refusal told the operator to start `kx serve` with KX_GATEWAY_ALLOWED_ORIGINS."""
    import httpx
    import uvicorn

    from engine.server.mcp_server import build_server, http_app

    from .helpers import start_server

    token = "t" * 43
    server = uvicorn.Server(uvicorn.Config(http_app(build_server(hash_engine), token, max_bytes=10**6,
                                                    bind_host="127.0.0.1"), log_level="warning", lifespan="on"))
    thread, url, sock = start_server(server)
    try:
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
        origin = httpx.post(f"{url}/mcp", headers={**headers, "Origin": "http://evil.example"}, json=INIT,
                            timeout=10)
        host = httpx.post(f"{url}/mcp", headers={**headers, "Host": "evil.example"}, json=INIT, timeout=10)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
    assert origin.status_code == 403 and "start `kx mcp --http` with KX_GATEWAY_ALLOWED_ORIGINS" in origin.text
    assert host.status_code == 403 and "start `kx mcp --http` with it in KX_GATEWAY_ALLOWED_HOSTS" in host.text
    assert "kx serve" not in origin.text + host.text


@pytest.mark.parametrize(("arguments", "field"), [
    ({"k": "5"}, "k"), ({"k": True}, "k"), ({"k": 0}, "k"), ({"rerank": "yes"}, "rerank"),
    ({"expand": 1}, "expand"), ({"versions": "some"}, "versions"), ({"mode": "fuzzy"}, "mode"),
    ({"where": ["kind:pdf"]}, "where.0"), ({"query": "   "}, "query"),
])
def test_search_takes_exactly_what_the_gateways_query_takes(hash_engine: Engine, arguments: dict,
                                                            field: str) -> None:
    """MCP coerced k "5", k true and rerank "yes" that the gateway refuses, and refused k > 200 that the gateway
    clamps: one validation (the gateway's QueryIn) for both, in the gateway's words."""
    import anyio
    import httpx
    from mcp import Client

    from engine.server.mcp_server import build_server
    from engine.text.inputs import from_text

    from .helpers import serving

    hash_engine.ingest("notes", [from_text("The parking garage opens at seven.", "parking")])
    mcp_args = {"dataset": "notes", "query": "parking", **arguments}

    async def run() -> Any:
        async with Client(build_server(hash_engine)) as client:
            return await client.call_tool("search", mcp_args)
    answer = anyio.run(run)
    body = {("text" if key == "query" else key): value for key, value in mcp_args.items() if key != "dataset"}
    with serving(hash_engine) as (url, token):
        gateway = httpx.post(f"{url}/v1/datasets/notes/query", json=body, timeout=30,
                             headers={"Authorization": f"Bearer {token}"}).json()
    assert answer.is_error and answer.structured_content["code"] == gateway["code"] == "INVALID_ARGUMENT"
    said = gateway["message"].removesuffix("; see /openapi.json for the schema").replace("text:", "query:")
    assert answer.structured_content["message"] == f"search: {said} (see the tool's input schema)"
    assert answer.structured_content["message"].startswith(f"search: {field}")


def test_search_clamps_k_as_the_gateway_does_and_takes_versions_and_expand(hash_engine: Engine) -> None:
    import anyio
    from mcp import Client

    from engine.server.mcp_server import build_server
    from engine.text.inputs import from_text

    hash_engine.ingest("notes", [from_text("The cafe opens at eight.", "hours")])
    hash_engine.ingest("notes", [from_text("The cafe opens at nine.", "hours")])

    async def run() -> list[Any]:
        async with Client(build_server(hash_engine)) as client:
            return [await client.call_tool("search", {"dataset": "notes", "query": "cafe opens", **extra})
                    for extra in ({"k": 1000}, {"versions": "all", "mode": "sparse"}, {"expand": True})]
    clamped, every, expanded = anyio.run(run)
    assert not clamped.is_error and clamped.structured_content["k"] == hash_engine.settings.max_k
    assert clamped.structured_content["requested_k"] == 1000
    assert sorted(h["text"] for h in every.structured_content["hits"]) == ["The cafe opens at eight.",
                                                                           "The cafe opens at nine."]
    assert not expanded.is_error and expanded.structured_content["hits"]


def test_every_tool_declares_an_output_schema_its_structured_content_meets(hash_engine: Engine,
                                                                           tmp_path: Path) -> None:
    """No tool declared an outputSchema for its structuredContent. Checked twice: by a JSON Schema validator
    here, and by the official client, which validates every successful call against the declared schema."""
    import anyio
    import jsonschema
    from mcp import Client

    from engine.server.mcp_policy import Policy
    from engine.server.mcp_server import build_server

    folder = tmp_path / "allowed"
    folder.mkdir()
    (folder / "note.md").write_text("# Hours\n\nThe library opens at nine on weekdays.")
    settings = hash_engine.settings
    policy = Policy.of(True, [folder], settings.max_document_bytes, home=settings.home, datasets=settings.datasets_dir)
    calls = [("ingest_text", {"dataset": "lib", "text": "The reading room closes at six.", "name": "room"}),
             ("ingest_file", {"dataset": "lib", "path": str(folder / "note.md")}),
             ("list_datasets", {}),
             ("search", {"dataset": "lib", "query": "when does the library open", "k": 3}),
             ("read_document", {"dataset": "lib", "document": "room"}),
             ("list_documents", {"dataset": "lib"})]

    async def run() -> tuple[list[Any], list[Any]]:
        async with Client(build_server(hash_engine, policy)) as client:
            tools = (await client.list_tools()).tools
            return tools, [await client.call_tool(name, arguments) for name, arguments in calls]
    tools, results = anyio.run(run)
    schemas = {tool.name: tool.output_schema for tool in tools}
    assert sorted(schemas) == sorted(name for name, _ in calls) and all(schemas.values()), schemas
    for (name, _), result in zip(calls, results):
        assert not result.is_error, (name, result.content)
        jsonschema.Draft202012Validator.check_schema(schemas[name])
        jsonschema.validate(result.structured_content, schemas[name])  # raises naming the field when not
    broken = {**results[3].structured_content, "hits": [{"rank": "first"}]}
    with pytest.raises(jsonschema.ValidationError):  # the schema can fail: it states the fields' types
        jsonschema.validate(broken, schemas["search"])


@pytest.mark.parametrize(("tool", "arguments", "said"), [
    ("list_documents", {"dataset": "notes", "limit": "5"}, "list_documents: limit: must be integer, not a string"),
    ("list_documents", {"dataset": "notes", "offset": True}, "list_documents: offset: must be integer, not a boolean"),
    ("read_document", {"dataset": "notes", "document": "parking", "chunk": 1.5}, "chunk: must be integer"),
    ("read_document", {"dataset": 5, "document": "parking"}, "read_document: dataset: must be string, not a number"),
])
def test_every_tools_argument_types_are_strict(hash_engine: Engine, tool: str, arguments: dict, said: str) -> None:
    """The SDK's lax validation read "5" as 5 and true as 1 where the schema says integer."""
    import anyio
    from mcp import Client

    from engine.server.mcp_server import build_server
    from engine.text.inputs import from_text

    hash_engine.ingest("notes", [from_text("The parking garage opens at seven.", "parking")])

    async def run() -> Any:
        async with Client(build_server(hash_engine)) as client:
            return await client.call_tool(tool, arguments)
    answer = anyio.run(run)
    assert answer.is_error and answer.structured_content["code"] == "INVALID_ARGUMENT"
    assert said in answer.structured_content["message"], answer.structured_content
