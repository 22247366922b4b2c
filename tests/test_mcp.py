"""`kx mcp` driven by the `mcp` SDK's own client.

In-process (fast): the server over a small dataset made with the hash
embedder (a paper with pages and sections, two plain notes), every tool, its
errors, the ingest policy and path confinement. Over stdio and streamable HTTP
(slow, a real `kx mcp` process with the bundled model): initialize, list the
tools, call each one, a bad argument, a missing dataset; HTTP needs the
gateway's token and refuses a foreign Host, like `kx serve`.
"""

from __future__ import annotations

import json
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

from engine import Engine, load_settings
from engine.errors import KxError
from engine.server.mcp_policy import Policy
from engine.server.mcp_server import build_server, citation
from engine.text.inputs import from_bytes, from_text

from .data.paper import PAPER_BYTES, paper_extractor
from .helpers import REPO, HashEmbedder, free_port, inject_extraction, mcp_call, mcp_text, wait_until_answering

RETURNS = ("Refunds. A logger bought from us may be returned within 30 days for a full refund. "
           "Bring the receipt and the logger's serial number. ") * 3


CAFE = "The staff cafe opens at eight and closes at four; it serves soup on Fridays. " * 4


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    """One small dataset 'notes' for the module: a three-page paper and two notes, hash-embedded."""
    home = tmp_path_factory.mktemp("mcp-home")
    eng = Engine(load_settings({"home": str(home), "chunk_size": 200, "chunk_overlap": 40}, env={}),
                 embedder=HashEmbedder())
    with pytest.MonkeyPatch.context() as mp:
        inject_extraction(mp, paper_extractor)
        eng.ingest("notes", [from_bytes(PAPER_BYTES, "cold-chains", "application/pdf"),
                             from_text(RETURNS, "returns"), from_text(CAFE, "cafe")])
    yield eng
    eng.close()


def test_the_read_only_server_lists_four_tools_with_schemas(engine: Engine) -> None:
    async def run() -> Any:
        async with Client(build_server(engine)) as client:
            return client.server_info, (await client.list_tools()).tools
    info, tools = anyio.run(run)
    assert info is not None and info.name == "kx"
    by_name = {t.name: t for t in tools}
    assert sorted(by_name) == ["list_datasets", "list_documents", "read_document", "search"]
    for tool in tools:
        assert tool.description and tool.input_schema["type"] == "object"
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
    search = by_name["search"].input_schema
    assert search["required"] == ["dataset", "query"]
    # every query option a model can type (not a pre-computed vector), each defaulting to the server's setting
    from engine.records import QueryOptions, described
    typed = {name for name, (_, doc) in described(QueryOptions).items() if doc and not doc.programs_only}
    assert set(search["properties"]) == {"dataset", "query"} | typed and "vector" not in typed
    assert search["properties"]["k"]["default"] is None and "KX_DEFAULT_K" in search["properties"]["k"]["description"]
    assert "hybrid" in json.dumps(search["properties"]["mode"]) and "sparse" in json.dumps(search)


def test_search_hits_carry_text_citation_pages_section_and_ranks(engine: Engine) -> None:
    result = mcp_call(build_server(engine), "search", {"dataset": "notes", "query": "lagged regression smoother",
                                                   "k": 3, "mode": "hybrid"})
    assert not result.is_error
    data = result.structured_content
    assert data["dataset"] == "notes" and data["mode"] == "hybrid" and len(data["hits"]) == 3
    top = data["hits"][0]
    assert top["document_name"] == "cold-chains" and top["document_title"] == "Cold chains, watched"
    assert top["page_start"] is not None and top["section"].startswith("3 Model")
    assert top["citation"] == citation("cold-chains", top["page_start"], top["page_end"], top["chunk_index"],
                                       top["chunk_count"])
    assert top["citation"].startswith(f"[cold-chains p. {top['page_start']}")
    assert top["citation"].endswith(top["chunk"][1:])  # "... chunk 3/12]"
    assert top["dense_rank"] is not None or top["sparse_rank"] is not None
    # the text a model reads: the citation, where, the refs to read on, the passage itself
    text = mcp_text(result)
    assert top["citation"] in text and top["passage_ref"] in text and top["text"][:40] in text
    assert "3 Model" in text


def test_search_narrows_with_where_filters_and_refuses_bad_ones(engine: Engine) -> None:
    server = build_server(engine)
    narrowed = mcp_call(server, "search", {"dataset": "notes", "query": "logger receipt soup", "k": 5,
                                       "where": ["name:cafe"]})
    assert not narrowed.is_error
    hits = narrowed.structured_content["hits"]
    assert hits and {h["document_name"] for h in hits} == {"cafe"}
    bad = mcp_call(server, "search", {"dataset": "notes", "query": "soup", "where": ["colour:blue"]})
    assert bad.is_error and mcp_text(bad).startswith("INVALID_ARGUMENT")


def test_search_passes_through_every_field_the_engine_records(engine: Engine) -> None:
    """Fields a hit gains later (answer spans, coverage) reach MCP clients: the record's own to_dict goes out."""
    own = json.loads(json.dumps(engine.query("notes", "return a logger", k=2, mode="sparse").to_dict()))  # as sent
    data = mcp_call(build_server(engine), "search", {"dataset": "notes", "query": "return a logger", "k": 2,
                                                 "mode": "sparse"}).structured_content
    assert set(own) <= set(data)
    for mine, theirs in zip(data["hits"], own["hits"]):
        assert {k: mine[k] for k in theirs} == theirs
    assert data["hits"][0]["citation"].startswith("[returns, chunk ")


def test_citations_without_pages_and_across_pages() -> None:
    assert citation("returns", None, None, 0, 3) == "[returns, chunk 1/3]"
    assert citation("report", 6, 6, 2, 12) == "[report p. 6, chunk 3/12]"
    assert citation("report", 6, 7, 2, 12) == "[report p. 6–7, chunk 3/12]"


def test_read_document_around_a_passage_by_pages_and_on_from_an_offset(engine: Engine) -> None:
    server = build_server(engine)
    hit = mcp_call(server, "search", {"dataset": "notes", "query": "validated forty shipments", "k": 1,
                                  "mode": "sparse"}).structured_content["hits"][0]
    text = engine.document_text("notes", hit["document_ref"])

    around = mcp_call(server, "read_document", {"dataset": "notes", "document": hit["document_ref"],
                                            "passage_ref": hit["passage_ref"], "context_chars": 30})
    data = around.structured_content
    assert not around.is_error
    assert data["char_start"] == max(0, hit["char_start"] - 30)
    assert data["char_end"] == min(len(text), hit["char_end"] + 30)
    assert data["text"] == text[data["char_start"]:data["char_end"]] and hit["text"] in data["text"]
    assert hit["chunk"] in [p["chunk"] for p in data["passages"]]

    page2 = mcp_call(server, "read_document", {"dataset": "notes", "document": "cold-chains",
                                           "page_start": 2}).structured_content
    assert page2["page_start"] <= 2 <= page2["page_end"] and "3.1 LRS model" in page2["text"]
    assert page2["document_name"] == "cold-chains" and page2["document_title"] == "Cold chains, watched"

    first = mcp_call(server, "read_document", {"dataset": "notes", "document": hit["document_ref"][:12],
                                           "max_chars": 100}).structured_content
    assert first["text"] == text[:100] and first["next_offset"] == 100
    second = mcp_call(server, "read_document", {"dataset": "notes", "document": hit["document_ref"],
                                            "offset": first["next_offset"], "max_chars": 100})
    assert second.structured_content["text"] == text[100:200] and "offset=200" in mcp_text(second)


@pytest.mark.parametrize(("arguments", "code", "words"), [
    ({"document": "cold-chains", "chunk": 1, "offset": 0}, "INVALID_ARGUMENT", "not chunk and offset"),
    ({"document": "cold-chains", "chunk": 99}, "INVALID_ARGUMENT", "chunk must be from 1 to"),
    ({"document": "cold-chains", "page_start": 9}, "INVALID_ARGUMENT", "spans pages 1-3"),
    ({"document": "returns", "page_start": 1}, "INVALID_ARGUMENT", "has no pages"),
    ({"document": "no-such-document"}, "NOT_FOUND", "list_documents shows"),
    ({"document": "returns", "passage_ref": "f" * 64}, "NOT_FOUND", "is not in this document"),
])
def test_read_document_refuses_what_it_cannot_read(engine: Engine, arguments: dict, code: str, words: str) -> None:
    result = mcp_call(build_server(engine), "read_document", {"dataset": "notes", **arguments})
    assert result.is_error and result.structured_content["code"] == code
    assert mcp_text(result).startswith(f"{code}: ") and words in mcp_text(result)


def test_list_documents_pages_with_the_total(engine: Engine) -> None:
    server = build_server(engine)
    first = mcp_call(server, "list_documents", {"dataset": "notes", "limit": 2}).structured_content
    assert [d["name"] for d in first["documents"]] == ["cold-chains", "returns"]
    assert first["total"] == 3 and first["next_offset"] == 2
    assert first["documents"][0]["pages"] == 3 and first["documents"][0]["title"] == "Cold chains, watched"
    rest = mcp_call(server, "list_documents", {"dataset": "notes", "offset": 2, "limit": 2})
    assert [d["name"] for d in rest.structured_content["documents"]] == ["cafe"]
    assert rest.structured_content["next_offset"] is None and "cafe" in mcp_text(rest)


def test_errors_are_tool_errors_with_the_kx_status_and_the_server_keeps_serving(engine: Engine) -> None:
    async def run() -> list[CallToolResult]:
        async with Client(build_server(engine)) as client:
            return [
                await client.call_tool("search", {"dataset": "nope", "query": "x"}),
                await client.call_tool("search", {"dataset": "notes", "query": "x", "k": "many"}),
                await client.call_tool("search", {"dataset": "notes"}),
                await client.call_tool("search", {"dataset": "notes", "query": "x", "mode": "fuzzy"}),
                await client.call_tool("search", {"dataset": "notes", "query": "   "}),
                await client.call_tool("search", {"dataset": "../etc", "query": "x"}),
                await client.call_tool("ingest_text", {"dataset": "notes", "text": "x"}),
                await client.call_tool("list_datasets", {}),
            ]
    missing, bad_k, no_query, bad_mode, blank, bad_name, absent, after = anyio.run(run)
    assert missing.is_error and missing.structured_content["code"] == "NOT_FOUND" and "nope" in mcp_text(missing)
    assert bad_k.is_error and mcp_text(bad_k).startswith("INVALID_ARGUMENT: search: k:")
    assert no_query.is_error and "query is required" in mcp_text(no_query)
    assert bad_mode.is_error and mcp_text(bad_mode).startswith("INVALID_ARGUMENT: search: mode")
    assert blank.is_error and "search: query: the text is blank" in mcp_text(blank)  # the gateway's own words
    assert bad_name.is_error and bad_name.structured_content["code"] == "INVALID_ARGUMENT"
    assert absent.is_error and absent.structured_content["code"] == "NOT_FOUND" and "search" in mcp_text(absent)
    assert not after.is_error and [d["name"] for d in after.structured_content["datasets"]] == ["notes"]


def test_ingest_text_only_with_allow_ingest(engine: Engine, tmp_path: Path) -> None:
    other = Engine(load_settings({"home": str(tmp_path / "h")}, env={}), embedder=HashEmbedder())
    server = build_server(other, Policy(allow_ingest=True))
    added = mcp_call(server, "ingest_text", {"dataset": "scratch", "text": "A note about the loading dock.",
                                         "name": "dock"})
    assert not added.is_error and added.structured_content["added"] == 1 and "1 added" in mcp_text(added)
    again = mcp_call(server, "ingest_text", {"dataset": "scratch", "text": "A note about the loading dock."})
    assert again.structured_content["unchanged"] == 1
    found = mcp_call(server, "search", {"dataset": "scratch", "query": "loading dock", "mode": "sparse"})
    assert found.structured_content["hits"][0]["document_name"] == "dock"
    tools = anyio.run(_tool_names, server)
    assert "ingest_text" in tools and "ingest_file" not in tools  # no folder named: no file tool
    other.close()


async def _tool_names(server: Any) -> list[str]:
    async with Client(server) as client:
        return [t.name for t in (await client.list_tools()).tools]


def test_ingest_file_is_confined_to_the_allowed_folders_symlinks_resolved(tmp_path: Path) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    (allowed / "sub").mkdir(parents=True)
    outside.mkdir()
    (allowed / "sub" / "memo.md").write_text("# Memo\nThe loading dock closes at six.\n")
    (outside / "secret.md").write_text("# Secret\nThe vault code is 1234.\n")
    (allowed / "escape.md").symlink_to(outside / "secret.md")        # a link inside pointing out
    (allowed / "door").symlink_to(outside, target_is_directory=True)   # a folder link pointing out
    (allowed / "inner.md").symlink_to(allowed / "sub" / "memo.md")     # a link inside pointing inside
    eng = Engine(load_settings({"home": str(tmp_path / "h")}, env={}), embedder=HashEmbedder())
    server = build_server(eng, Policy.of(True, [str(allowed)], 10**6, home=eng.settings.home,
                                         datasets=eng.settings.datasets_dir))
    assert "ingest_file" in anyio.run(_tool_names, server)

    ok = mcp_call(server, "ingest_file", {"dataset": "files", "path": str(allowed / "sub" / "memo.md")})
    assert not ok.is_error and ok.structured_content["added"] == 1
    relative = mcp_call(server, "ingest_file", {"dataset": "files", "path": "sub/memo.md"})
    assert relative.structured_content["unchanged"] == 1
    inner = mcp_call(server, "ingest_file", {"dataset": "files", "path": str(allowed / "inner.md")})
    assert not inner.is_error
    for escape in (str(outside / "secret.md"), str(allowed / ".." / "outside" / "secret.md"),
                   "../outside/secret.md", str(allowed / "escape.md"), str(allowed / "door" / "secret.md")):
        refused = mcp_call(server, "ingest_file", {"dataset": "files", "path": escape})
        assert refused.is_error and refused.structured_content["code"] == "PERMISSION_DENIED", escape
        assert "outside the folders" in mcp_text(refused)
    missing = mcp_call(server, "ingest_file", {"dataset": "files", "path": "sub/none.md"})
    assert missing.is_error and missing.structured_content["code"] == "NOT_FOUND"
    docs = mcp_call(server, "list_documents", {"dataset": "files"}).structured_content["documents"]
    assert [d["name"] for d in docs] == ["memo"]  # the vault never went in
    eng.close()


def test_the_policy_is_checked_at_start(tmp_path: Path) -> None:
    with pytest.raises(KxError, match="add --allow-ingest"):
        Policy.of(False, [str(tmp_path)], 10, home=tmp_path / "h", datasets=tmp_path / "h" / "datasets")
    with pytest.raises(KxError, match="is not a folder"):
        Policy.of(True, [str(tmp_path / "missing")], 10, home=tmp_path / "h", datasets=tmp_path / "h" / "datasets")
    from .helpers import run_cli

    result = run_cli("mcp", "--allow-path", str(tmp_path))
    assert result.code == 3 and "INVALID_ARGUMENT" in result.stderr


def test_resources_and_the_citation_prompt(engine: Engine) -> None:
    async def run() -> Any:
        async with Client(build_server(engine)) as client:
            listed = await client.read_resource("kx://datasets")
            ref = engine.list_documents("notes", 0, 1)[0].ref
            doc = await client.read_resource(f"kx://datasets/notes/documents/{ref}")
            prompt = await client.get_prompt("answer_with_citations", {"dataset": "notes", "question": "why?"})
            return listed, doc, prompt
    listed, doc, prompt = anyio.run(run)
    assert [d["name"] for d in json.loads(listed.contents[0].text)] == ["notes"]
    assert doc.contents[0].text.startswith("1 Introduction")
    assert "search" in prompt.messages[0].content.text and "why?" in prompt.messages[0].content.text


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KX_")}
    env.update({"KX_HOME": str(home), "KX_MODEL_CACHE": os.environ["KX_MODEL_CACHE"], "PYTHONPATH": str(REPO)})
    return env


@pytest.fixture
def served_home(handbook_home: Path, tmp_path: Path) -> Path:
    """A copy of the session's handbook home (real model), so this test's ingests stay its own."""
    home = tmp_path / "home"
    shutil.copytree(handbook_home, home)
    return home


def _readme_desktop_config() -> dict[str, Any]:
    """The Claude Desktop snippet, as the README prints it."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### LLM clients over MCP"):]
    block = section[section.index("```json") + len("```json"):]
    return json.loads(block[:block.index("```")])


def test_an_argument_a_tool_does_not_take_is_refused_not_dropped(engine: Engine) -> None:
    # the SDK dropped it without a word: a model that sent top_k or filter got k=8, unfiltered, and believed otherwise
    server = build_server(engine)
    for tool, arguments, name in (("search", {"dataset": "notes", "query": "refund", "top_k": 2}, "top_k"),
                                  ("search", {"dataset": "notes", "query": "refund", "filter": "type:pdf"}, "filter"),
                                  ("list_documents", {"dataset": "notes", "page": 2}, "page"),
                                  ("list_datasets", {"dataset": "notes"}, "dataset")):
        result = mcp_call(server, tool, arguments)
        assert result.is_error and result.structured_content["code"] == "INVALID_ARGUMENT", (tool, mcp_text(result))
        assert mcp_text(result).startswith(f"INVALID_ARGUMENT: {tool}: unknown argument '{name}'; it takes ")
    takes = mcp_text(mcp_call(server, "search", {"dataset": "notes", "query": "x", "top_k": 2}))
    assert "dataset, query, k, mode, rerank, where" in takes


def test_a_lone_surrogate_in_any_argument_is_invalid_argument_not_internal(engine: Engine, tmp_path: Path) -> None:
    # JSON's "\ud800" arrives as a lone surrogate: ingest_text and ingest_file's path failed deep inside (INTERNAL)
    other = Engine(load_settings({"home": str(tmp_path / "h")}, env={}), embedder=HashEmbedder())
    (tmp_path / "files").mkdir()  # beside the home: a folder holding it is refused
    server = build_server(other, Policy.of(True, [str(tmp_path / "files")], 10**6, home=other.settings.home,
                                           datasets=other.settings.datasets_dir))
    for tool, arguments, field in (("ingest_text", {"dataset": "scratch", "text": "hello \ud800 there"}, "text"),
                                   ("ingest_file", {"dataset": "scratch", "path": "a\ud800.md"}, "path"),
                                   ("search", {"dataset": "scratch", "query": "x", "where": ["name:\ud800"]}, "where"),
                                   ("read_document", {"dataset": "scratch", "document": "\udc80"}, "document")):
        result = mcp_call(server, tool, arguments)
        assert result.is_error and result.structured_content["code"] == "INVALID_ARGUMENT", (tool, mcp_text(result))
        assert f"{tool}: {field} holds \\u" in mcp_text(result) or f"{tool}: {field} holds \\x" in mcp_text(result)
        assert "send valid Unicode" in mcp_text(result)
    assert mcp_call(server, "list_datasets").structured_content["datasets"] == []  # nothing stored
    other.close()


def test_list_documents_past_the_end_says_how_many_there_are(engine: Engine) -> None:
    past = mcp_call(build_server(engine), "list_documents", {"dataset": "notes", "offset": 100})
    assert not past.is_error and past.structured_content["documents"] == []
    assert mcp_text(past) == "no documents from offset 100: 'notes' holds 3; list_documents with offset=0 starts " \
                            "from the first"


def test_resources_and_prompts_refuse_with_the_status_not_an_internal_error(
        engine: Engine, caplog: pytest.LogCaptureFixture) -> None:
    from mcp.shared.exceptions import MCPError

    async def run() -> list[Any]:
        async with Client(build_server(engine)) as client:
            seen: list[Any] = []
            for uri in ("kx://datasets/nope/documents/abc", "kx://datasets/notes/documents/abcdef0123",
                        "kx://datasets/BAD!/documents/x", "kx://nothing"):
                try:
                    seen.append(await client.read_resource(uri))
                except MCPError as exc:
                    seen.append(exc)
            by_name = await client.read_resource("kx://datasets/notes/documents/returns")
            seen.append(by_name.contents[0].text)
            for name, arguments in (("answer_with_citations", {"dataset": "notes"}),
                                    ("no_such_prompt", {})):
                try:
                    seen.append(await client.get_prompt(name, arguments))
                except MCPError as exc:
                    seen.append(exc)
            return seen
    missing, no_doc, bad_name, unknown, by_name, no_question, no_prompt = anyio.run(run)
    for error, code in ((missing, "NOT_FOUND"), (no_doc, "NOT_FOUND"), (bad_name, "INVALID_ARGUMENT"),
                        (unknown, "NOT_FOUND"),
                        (no_question, "INVALID_ARGUMENT"), (no_prompt, "NOT_FOUND")):
        assert isinstance(error, MCPError) and error.error.message.startswith(f"{code}: "), error
        assert error.error.data["code"] == code and error.error.code == -32602
    assert "list_documents shows what is there" in no_doc.error.message
    assert "this server has kx://datasets and kx://datasets/{name}/documents/{ref}" in unknown.error.message
    assert by_name == RETURNS  # the template takes a name or a ref prefix, as read_document does
    assert "question is required" in no_question.error.message
    assert "answer_with_citations" in no_prompt.error.message
    assert "Traceback" not in caplog.text and "Internal server error" not in caplog.text


def test_http_paths_other_than_mcp_are_not_found_as_kx_errors(engine: Engine) -> None:
    # Starlette answered a plain-text "Not Found": a client pointed at / or /v1 learnt nothing
    import httpx
    import uvicorn

    from engine.server.mcp_server import http_app

    from .helpers import start_server

    token = "t" * 43
    app = http_app(build_server(engine), token, max_bytes=10**6, bind_host="127.0.0.1")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread, url, sock = start_server(server)
    try:
        headers = {"Authorization": f"Bearer {token}"}
        for path in ("/", "/v1/datasets", "/mcpx", "/sse"):
            answer = httpx.get(f"{url}{path}", headers=headers, timeout=10)
            assert answer.status_code == 404 and answer.json()["code"] == "NOT_FOUND", (path, answer.text)
            assert answer.json()["message"] == (f"kx mcp serves MCP at /mcp only, not at {path!r}; point the "
                                                "client at http://HOST:PORT/mcp")
        assert httpx.get(f"{url}/", timeout=10).status_code == 401   # the guard still answers first
        hello = httpx.post(f"{url}/mcp", headers={**headers, "Accept": "application/json, text/event-stream"},
                           timeout=10, json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                                        "clientInfo": {"name": "t", "version": "0"}}})
        assert hello.status_code == 200 and "mcp-session-id" in hello.headers
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_read_document_around_a_passage_keeps_the_passage_when_max_chars_is_small(engine: Engine) -> None:
    # the window was cut from its end: with context_chars + the passage over max_chars, what came back was
    # context before the passage, and with enough context not the passage at all
    ref = next(d.ref for d in engine.list_documents("notes") if d.name == "cafe")
    spans = engine.document_passages("notes", ref)
    text = engine.document_text("notes", ref)
    last = spans[-1]
    server = build_server(engine)
    for arguments in ({"passage_ref": last.ref, "max_chars": 40},
                      {"chunk": len(spans), "max_chars": last.char_end - last.char_start + 20, "context_chars": 5000},
                      {"passage_ref": last.ref, "max_chars": 20_000, "context_chars": 20_000}):
        read = mcp_call(server, "read_document", {"dataset": "notes", "document": "cafe", **arguments})
        data = read.structured_content
        assert not read.is_error and data["char_end"] - data["char_start"] <= arguments["max_chars"], data
        assert data["char_start"] <= last.char_start < data["char_end"], (arguments, data["char_start"])
        assert data["text"] == text[data["char_start"]:data["char_end"]]
    small = mcp_call(server, "read_document", {"dataset": "notes", "document": "cafe", "passage_ref": last.ref,
                                           "max_chars": 40}).structured_content
    assert small["char_start"] == last.char_start and small["text"] == text[last.char_start:last.char_start + 40]
    some = mcp_call(server, "read_document", {"dataset": "notes", "document": "cafe", "chunk": len(spans),
                                          "max_chars": last.char_end - last.char_start + 20}).structured_content
    assert some["char_end"] - some["char_start"] == last.char_end - last.char_start + 20  # context on both sides
    assert some["char_start"] < last.char_start and last.char_end <= some["char_end"]


@pytest.mark.parametrize("command", [("mcp", "--http"), ("serve",)])
def test_a_host_that_is_not_this_machines_is_told_so_not_to_pick_another_port(command: tuple[str, ...]) -> None:
    from .helpers import run_cli

    result = run_cli(*command, "--host", "192.0.2.1", "--port", "0")  # TEST-NET-1: no machine's own address
    assert result.code == 3 and "INVALID_ARGUMENT: cannot listen on 192.0.2.1:0" in result.stderr, result.stderr
    assert "192.0.2.1 is not an address of this machine; give one of its own to --host" in result.stderr
    assert "pick another --port" not in result.stderr


def test_read_document_by_a_ref_prefix_two_documents_share_asks_for_more_of_it(tmp_path: Path) -> None:
    """8 hex digits name a document unless two refs share them: then the answer lists both, not a guess."""
    import hashlib
    import itertools

    seen: dict[str, str] = {}
    for i in itertools.count():   # two texts whose sha256 share 8 hex digits (a birthday search: ~65k tries)
        text = f"A note about parking, number {i}."
        prefix = hashlib.sha256(text.encode()).hexdigest()[:8]
        if prefix in seen:
            pair = (seen[prefix], text)
            break
        seen[prefix] = text
    eng = Engine(load_settings({"home": str(tmp_path / "home")}, env={}), embedder=HashEmbedder())
    report = eng.ingest("shared", [from_text(pair[0], "first"), from_text(pair[1], "second")])
    refs = [r.ref for r in report.results]   # first, second
    assert refs[0][:8] == refs[1][:8] == prefix and refs[0] != refs[1]   # the document ref is the bytes' sha256
    try:
        both = mcp_call(build_server(eng), "read_document", {"dataset": "shared", "document": prefix})
        one = mcp_call(build_server(eng), "read_document", {"dataset": "shared", "document": refs[1][:20]})
    finally:
        eng.close()
    assert both.is_error and both.structured_content["code"] == "INVALID_ARGUMENT"
    assert "2 documents" in mcp_text(both) and refs[0][:16] in mcp_text(both) and refs[1][:16] in mcp_text(both)
    assert not one.is_error and pair[1] in mcp_text(one)


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
    assert hits[0]["citation"] in mcp_text(seen["search"])
    assert hits[0]["text"] in seen["read"].structured_content["text"]
    assert seen["documents"].structured_content["total"] == 6
    assert seen["text"].structured_content["added"] == 1 and seen["file"].structured_content["added"] == 1
    assert seen["dense"].structured_content["hits"][0]["document_name"] == "parking"
    assert seen["bad"].is_error and mcp_text(seen["bad"]).startswith("INVALID_ARGUMENT: search: k")
    assert seen["missing"].is_error and seen["missing"].structured_content["code"] == "NOT_FOUND"
    assert seen["escape"].is_error and seen["escape"].structured_content["code"] == "PERMISSION_DENIED"
    assert seen["hardlink"].is_error and seen["hardlink"].structured_content["code"] == "PERMISSION_DENIED"
    assert "has 2 names (hard links)" in mcp_text(seen["hardlink"])
    assert sorted(d["name"] for d in seen["after"].structured_content["datasets"]) == ["handbook", "scratch"]


@pytest.mark.slow
def test_kx_mcp_over_http_needs_the_token_and_refuses_a_foreign_host(served_home: Path, tmp_path: Path) -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    port = free_port()
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
    assert not found.is_error and "[travel-and-expenses" in mcp_text(found)


@pytest.mark.slow
def test_kx_mcp_fronts_a_gateway(tmp_path: Path) -> None:
    """`kx --gateway URL mcp`: the same tools over KxClient, the gateway's errors as tool errors."""
    from .gateway_process import start_gateway, stop_gateway

    gw = start_gateway(tmp_path / "served" / "home", env={"KX_SERVE_EMBED_MODEL": "none"})
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
        assert stop_gateway(gw) == 0
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
