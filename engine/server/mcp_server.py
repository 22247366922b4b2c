"""`kx mcp`: the engine as Model Context Protocol tools, for LLM clients (Claude Desktop, Claude Code, ...).

Built on the official `mcp` SDK's `MCPServer`. The tools talk to a `Backend`
(engine/backend.py), so `kx mcp` serves the embedded engine, Milvus or a
`kx serve` gateway alike. Tools:

    list_datasets    names, counts, model, fingerprint of every dataset
    search           a query's passages, each with its citation and provenance
    read_document    a document's text around a passage, over a page range, or from an offset
    list_documents   a dataset's documents, paged
    ingest_text      only with allow_ingest
    ingest_file      only with allow_ingest and at least one allowed folder (symlinks resolved first)

Every tool answers text a model reads (hits with `[document p. 6, chunk 3/12]`
citations) and `structuredContent`: the records' own `to_dict()`, so a field a
record gains reaches MCP clients without a change here. A `KxError` comes back
as a tool error whose text starts with the status name (`NOT_FOUND: ...`) and
whose structured content is `{code, message}`; nothing a caller sends stops the
server. The tools run on worker threads that a cancel abandons (`_off_loop`).

The streamable HTTP app (`http_app`) sits inside the gateway's own Host,
Origin, bearer-token and size guard (engine/server/gateway.py's `guard`), so it
answers to exactly what `kx serve` answers to.
"""

from __future__ import annotations

import functools
import inspect
import json
from typing import Annotated, Any, Callable

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field, ValidationError

from ..backend import MAX_DOCUMENTS_PAGE, Backend
from ..errors import KxError, invalid, not_found
from ..records import QueryOptions, described
from ..version import __version__
from .mcp_http import STOPPING, AnswerWhenStopping, http_app
from .mcp_jsonrpc import (
    _describe,
    _prompt_refusal,
    _refuse_arguments,
    _rpc_error,
    refuse_types,
    screened,
    search_refusal,
)
from .mcp_policy import Policy
from .mcp_schemas import declare_output_schemas
from .mcp_tools import MAX_READ_CHARS, KxTools, _error, citation

__all__ = ["STOPPING", "AnswerWhenStopping", "build_server", "citation", "http_app"]

SERVER_NAME = "kx"
INSTRUCTIONS = (
    "kx searches the user's own documents on this machine. Call list_datasets to see what there is, then "
    "search a dataset; every hit carries a citation such as [report p. 6, chunk 3/12] - quote it when you use "
    "the passage. To read on from a hit, call read_document with its document_ref and passage_ref. Errors start "
    "with a status (NOT_FOUND, INVALID_ARGUMENT, ...) and say what to do next."
)


# tool signatures are read by the SDK at run time, so the aliases they use live at module level
DatasetArg = Annotated[str, Field(description="A dataset's name, as list_datasets shows it.")]


# -- the server ------------------------------------------------------------------------------------


async def _off_loop(call: Callable[..., CallToolResult], *args: Any) -> CallToolResult:
    """A tool's body on a worker thread that a cancel abandons instead of waiting for.

    The SDK runs a sync tool on a thread it waits for even when the call is cancelled (the client's
    notifications/cancelled, or `kx mcp --http` stopping, whose session shutdown then waited for the
    longest search in flight). Abandoned, the work runs on to its end (each commit whole) and its answer
    is dropped.
    """
    return await anyio.to_thread.run_sync(functools.partial(call, *args), abandon_on_cancel=True)


class _Server(MCPServer):
    """MCPServer whose refusals before a tool runs also speak kx's statuses.

    The SDK answers arguments that fail the schema, and unknown tool names,
    with a tool error of its own wording; here they become INVALID_ARGUMENT
    naming each bad field, and NOT_FOUND naming the tools there are. An
    argument a tool does not take, which the SDK dropped without a word, and
    a string holding a lone surrogate are INVALID_ARGUMENT too. A prompt asked
    for without a required argument, or one there is not, is a JSON-RPC
    invalid-params error with the status, not the SDK's "Internal server error".
    """

    backend: Backend | None = None  # set by build_server: what a prompt's dataset is checked against

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            refusal = _refuse_arguments(name, arguments, tool.parameters.get("properties", {}))
            if refusal is None and name == "search":  # the gateway's own validation, before the SDK's lax one
                refusal = search_refusal(arguments)
            if refusal is None:
                refusal = refuse_types(name, arguments, tool.parameters.get("properties", {}))
            if refusal is not None:
                return _error(refusal)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError):
                raise
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                return _error(invalid(_describe(name, cause)))
            if self._tool_manager.get_tool(name) is None:
                known = ", ".join(t.name for t in self._tool_manager.list_tools())
                return _error(not_found(f"no tool named {name!r}; this server has {known}"))
            raise

    async def run_stdio_async(self) -> None:
        """The SDK's stdio transport, with an answer for a request line it cannot read.

        The SDK's transport drops a line that fails its parse without a word, so a request whose JSON holds an
        unpaired surrogate escape ("\\ud800", which a JavaScript client's JSON.stringify writes for a string cut
        inside an emoji) was never answered: its caller waited until its own timeout. Every malformed message
        (not JSON, not a JSON-RPC object, params of the wrong shape) now gets the spec's JSON-RPC error under
        its id, or null (mcp_jsonrpc.py `screened`).
        """
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read_stream, write_stream):
            passed, checked = anyio.create_memory_object_stream[Any](0)

            async def screen() -> None:
                async with passed:
                    async for item in read_stream:
                        answer = screened(item)
                        if answer is not None:
                            await write_stream.send(answer)
                        else:
                            await passed.send(item)

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(screen)
                await self._lowlevel_server.run(checked, write_stream,
                                                self._lowlevel_server.create_initialization_options())

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        try:
            return await super().read_resource(uri, context)
        except ResourceNotFoundError as exc:  # the SDK's "Unknown resource: URI" named none there are
            if exc.__cause__ is not None or not str(exc).startswith("Unknown resource"):
                raise
            raise _rpc_error(not_found(
                f"no resource {str(uri)[:200]!r}; this server has kx://datasets and "
                "kx://datasets/{name}/documents/{ref} ({ref}: a document's ref, ref prefix or name)")) from None

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None, context: Any = None) -> Any:
        refusal = _prompt_refusal(self, name, arguments)
        if refusal is not None:  # the SDK answered these "Internal server error", with a traceback in the log
            raise _rpc_error(refusal)
        dataset = (arguments or {}).get("dataset")
        if dataset is not None and self.backend is not None:  # a prompt for a dataset there is not is refused
            try:
                await anyio.to_thread.run_sync(self.backend.dataset_summary, dataset)
            except KxError as exc:
                raise _rpc_error(exc) from None
        return await super().get_prompt(name, arguments, context)


def _resource(read: Callable[[], str]) -> str:
    """A resource's text; its KxError as the JSON-RPC error a client shows (`NOT_FOUND: ...`, data `{code,
    message}`), where the SDK answered "Error creating resource from template ..." and logged a traceback."""
    try:
        return read()
    except KxError as exc:
        raise _rpc_error(exc) from None


def build_server(backend: Backend, policy: Policy | None = None) -> MCPServer:
    """An MCPServer with kx's tools, resources and prompt over `backend`."""
    tools = KxTools(backend, policy or Policy())
    server = _Server(SERVER_NAME, title="kx: your own documents", version=__version__,
                     instructions=INSTRUCTIONS, log_level="WARNING")
    server.backend = backend
    _add_reading_tools(server, tools)
    _add_search(server, tools)
    if tools.policy.allow_ingest:
        _add_ingest_tools(server, tools)
    _add_resources(server, tools)
    _add_prompt(server)
    declare_output_schemas(server._tool_manager)
    return server


_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def _search_signature() -> inspect.Signature:
    """The search tool's parameters: the dataset, the question, then every query option a model can type
    (engine/records.py QueryOptions), each as the gateway's QueryIn declares it (type, limits, description).

    The SDK reads a tool's input schema off its signature, so a field added to QueryOptions reaches MCP
    clients without a line here. Every option defaults to None, the backend's own default: k is the server's
    KX_DEFAULT_K, as over the gateway and the CLI.
    """
    from .schema import QueryIn

    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [
        inspect.Parameter("dataset", keyword, annotation=DatasetArg),
        inspect.Parameter("query", keyword, annotation=Annotated[str, Field(
            description="The question or the words to look for, in plain language.")]),
    ]
    for name, (_kind, doc) in described(QueryOptions).items():
        if doc is None or doc.programs_only:
            continue
        field = QueryIn.model_fields[name]
        declared = Field(description=field.description, json_schema_extra=field.json_schema_extra)
        parameters.append(inspect.Parameter(name, keyword, default=None,
                                            annotation=Annotated[(field.annotation, *field.metadata, declared)]))
    return inspect.Signature(parameters, return_annotation=CallToolResult)


def _add_search(server: MCPServer, tools: KxTools) -> None:
    async def search(dataset: str, query: str, **options: Any) -> CallToolResult:
        """Search a dataset for the passages that answer a question (hybrid dense + BM25 retrieval).

        Each hit carries the passage text, its document's name and title, a ready citation such as
        [report p. 6, chunk 3/12] to quote, its pages, section heading path, character range,
        document_ref and passage_ref (for read_document), and its rank in the dense and sparse lists.
        """
        return await _off_loop(functools.partial(tools.search, dataset, query, **options))

    search.__signature__ = _search_signature()  # type: ignore[attr-defined]
    server.tool(annotations=_READ_ONLY)(search)


def _add_reading_tools(server: MCPServer, tools: KxTools) -> None:
    @server.tool(annotations=_READ_ONLY)
    async def list_datasets() -> CallToolResult:
        """List the datasets kx holds on this machine: name, documents, passages, embedding model, fingerprint.

        Call this first to learn which dataset to search.
        """
        return await _off_loop(tools.list_datasets)

    @server.tool(annotations=_READ_ONLY)
    async def read_document(
        dataset: DatasetArg,
        document: Annotated[str, Field(description="The document_ref from a hit or list_documents (or its first "
                                                   "8+ characters), or the document's name.")],
        passage_ref: Annotated[str | None, Field(description="Read around this passage (a hit's passage_ref).")]
        = None,
        chunk: Annotated[int | None, Field(ge=1, description="Read around this chunk number (1-based, the i in "
                                                             "[chunk i/N]).")] = None,
        page_start: Annotated[int | None, Field(ge=1, description="Read the passages on these pages (paged formats "
                                                                  "such as PDF).")] = None,
        page_end: Annotated[int | None, Field(ge=1, description="Last page to read (default page_start).")] = None,
        offset: Annotated[int | None, Field(ge=0, description="Read from this character on (next_offset of an "
                                                              "earlier call).")] = None,
        context_chars: Annotated[int, Field(ge=0, le=MAX_READ_CHARS, description="Characters of context either side "
                                                                                 "of a passage or chunk.")] = 1000,
        max_chars: Annotated[int, Field(ge=1, le=MAX_READ_CHARS, description="Most characters to return.")] = 6000,
    ) -> CallToolResult:
        """Read a document's stored text: around a passage or chunk, over a page range, or from a character offset.

        Use it to read on from a search hit. The answer gives the character range read, the pages and
        chunks it covers, and next_offset / previous_offset to continue.
        """
        return await _off_loop(tools.read_document, dataset, document, passage_ref, chunk, page_start, page_end,
                               offset, context_chars, max_chars)

    @server.tool(annotations=_READ_ONLY)
    async def list_documents(
        dataset: DatasetArg,
        offset: Annotated[int, Field(ge=0, description="Skip this many documents (ingest order).")] = 0,
        limit: Annotated[int, Field(ge=1, le=MAX_DOCUMENTS_PAGE, description="Documents per page.")] = 50,
    ) -> CallToolResult:
        """List a dataset's documents in ingest order, paged: name, title, ref, pages, passages, media type, source."""
        return await _off_loop(tools.list_documents, dataset, offset, limit)


def _add_ingest_tools(server: MCPServer, tools: KxTools) -> None:
    @server.tool(annotations=_WRITES)
    async def ingest_text(
        dataset: Annotated[str, Field(description="The dataset to add to; created on first use.")],
        text: Annotated[str, Field(description="The document's text.")],
        name: Annotated[str | None, Field(description="A name for the document (default: from its text).")] = None,
    ) -> CallToolResult:
        """Add a text as one document to a dataset (created on first use). The same text twice is 'unchanged'."""
        return await _off_loop(tools.ingest_text, dataset, text, name)

    if not tools.policy.allow_paths:
        return
    folders = ", ".join(str(p) for p in tools.policy.allow_paths)

    @server.tool(annotations=_WRITES, description=(
        "Add a file (PDF, Word, HTML, EPUB, Markdown, text) as one document to a dataset (created on "
        f"first use). Only files inside these folders can be read: {folders}. A relative path is taken "
        "inside the first."))
    async def ingest_file(
        dataset: Annotated[str, Field(description="The dataset to add to; created on first use.")],
        path: Annotated[str, Field(description="The file's path (inside an allowed folder).")],
    ) -> CallToolResult:
        return await _off_loop(tools.ingest_file, dataset, path)


def _add_resources(server: MCPServer, tools: KxTools) -> None:
    backend = tools.backend

    @server.resource("kx://datasets", name="datasets", mime_type="application/json",
                     description="Every dataset with its counts and model (as list_datasets).")
    def datasets_resource() -> str:
        return _resource(lambda: json.dumps([s.to_dict() for s in backend.list_datasets()], ensure_ascii=False))

    # {+ref}: a name from a subfolder holds '/' (pdf/crazyones), which a plain {ref} never matched
    @server.resource("kx://datasets/{name}/documents/{+ref}", name="document", mime_type="text/plain",
                     description="A document's stored text (the text passages' character ranges index into); {ref} is "
                                 "its ref, a ref prefix or its name.")
    def document_resource(name: str, ref: str) -> str:
        def read() -> str:  # a ref, a ref prefix or a name, as read_document takes
            found = tools._find_document(name, ref)
            return backend.document_text(name, found.ref if found else ref)
        return _resource(read)


def _add_prompt(server: MCPServer) -> None:
    @server.prompt(title="Answer from a dataset, with citations")
    def answer_with_citations(dataset: str, question: str) -> str:
        """Answer a question from one dataset, quoting kx's citations."""
        return (f"Answer the question below using only the dataset '{dataset}' in kx. Call the search tool "
                f"(dataset='{dataset}') with the question and, if needed, with other wordings; read on with "
                "read_document when a passage is cut short. Cite every claim with the hit's citation exactly as "
                "given, e.g. [report p. 6, chunk 3/12]. If the passages do not answer it, say so.\n\n"
                f"Question: {question}")
