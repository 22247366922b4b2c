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

import asyncio
import functools
import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Sequence

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    TextContent,
    ToolAnnotations,
)
from pydantic import Field, ValidationError

from ..backend import MAX_DOCUMENTS_PAGE, Backend
from ..errors import KxError, Status, invalid, not_found
from ..records import DocumentSummary, PassageSpan, RetrievalMode, chunk_label, pages_label
from ..text.inputs import from_file, from_text, shown_surrogates
from ..version import __version__
from .mcp_policy import Policy

SERVER_NAME = "kx"
DEFAULT_K = 8
MAX_READ_CHARS = 20_000      # most characters read_document hands back in one call
_FIND_PAGES = 100            # a document named (not by ref) is looked for in at most this many pages of 1000

INSTRUCTIONS = (
    "kx searches the user's own documents on this machine. Call list_datasets to see what there is, then "
    "search a dataset; every hit carries a citation such as [report p. 6, chunk 3/12] - quote it when you use "
    "the passage. To read on from a hit, call read_document with its document_ref and passage_ref. Errors start "
    "with a status (NOT_FOUND, INVALID_ARGUMENT, ...) and say what to do next."
)


# tool signatures are read by the SDK at run time, so the aliases they use live at module level
DatasetArg = Annotated[str, Field(description="A dataset's name, as list_datasets shows it.")]


def citation(document: str, page_start: int | None, page_end: int | None, chunk_index: int, chunk_count: int) -> str:
    """`[document p. 6, chunk 3/12]` (`p. 6–7` across pages; no page part for a format without pages)."""
    pages = pages_label(page_start, page_end)
    chunk = chunk_label(chunk_index, chunk_count)[1:-1]  # "chunk 3/12"
    return f"[{document}{' ' + pages if pages else ''}, {chunk}]"


def _error(exc: KxError) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=f"{exc.code}: {exc.message}")],
                          structured_content=exc.to_dict(), is_error=True)


def _answer(text: str, data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _guarded(call: Callable[[], CallToolResult]) -> CallToolResult:
    """The call's answer, or its KxError as a tool error; an unexpected failure is INTERNAL, never a crash."""
    try:
        return call()
    except KxError as exc:
        return _error(exc)
    except Exception as exc:  # a bug: the client hears one line, the server keeps serving
        import logging

        logging.getLogger("kx.mcp").exception("tool failed")
        return _error(KxError(Status.INTERNAL, f"unexpected {type(exc).__name__}: {exc}; see the server's stderr "
                                               "and report it"))


def _hit_lines(data: dict[str, Any]) -> str:
    """A query's answer as a model reads it: one block per hit, citation first."""
    hits = data["hits"]
    head = f"{len(hits)} passage(s) from dataset '{data['dataset']}' ({data['mode']}"
    head += f", k={data['k']}" + (f", asked {data['requested_k']}" if data.get("clamped") else "") + ")"
    lines = [head]
    lines += [f"note: {note}" for note in data.get("notes", [])]
    for hit in hits:
        where = " · ".join(p for p in (hit.get("document_title"), hit.get("section")) if p)
        ranks = ", ".join(f"{name} #{hit[key]}" for name, key in (("dense", "dense_rank"), ("sparse", "sparse_rank"),
                                                                  ("sentence", "sentence_rank"))
                          if hit.get(key) is not None)
        if hit.get("lead_ratio") is not None:
            ranks += f", sparse lead x{hit['lead_ratio']:.2f}"
        lines.append("")
        lines.append(f"{hit['rank']}. {hit['citation']}" + (f" {where}" if where else ""))
        lines.append(f"   document_ref={hit['document_ref']} passage_ref={hit['passage_ref']} "
                     f"chars {hit['char_start']}-{hit['char_end']}" + (f"; {ranks}" if ranks else ""))
        lines.append("   " + hit["text"].replace("\n", "\n   "))
    if not hits:
        lines.append("nothing matched; try other words, or mode=sparse for exact terms")
    return "\n".join(lines)


def _document_line(doc: DocumentSummary) -> str:
    extra = [f"{doc.passages} passages", doc.media_type]
    if doc.pages:
        extra.insert(0, f"{doc.pages} pages")
    title = f" \"{doc.title}\"" if doc.title and doc.title != doc.name else ""
    return f"- {doc.name}{title} ({', '.join(extra)}) ref={doc.ref}"


@dataclass
class KxTools:
    """The tools' bodies, over one backend. Each returns a CallToolResult (errors included)."""

    backend: Backend
    policy: Policy = field(default_factory=Policy)

    def list_datasets(self) -> CallToolResult:
        def run() -> CallToolResult:
            datasets = [s.to_dict() for s in self.backend.list_datasets()]
            lines = [f"{len(datasets)} dataset(s)"] + [
                f"- {d['name']}: {d['documents']} documents, {d['passages']} passages, model "
                f"{d.get('embed_model') or 'none'}" for d in datasets]
            if not datasets:
                lines.append("none yet" + ("; add one with ingest_text" if self.policy.allow_ingest else
                                           "; the user adds documents with `kx datasets ingest NAME FILES`"))
            return _answer("\n".join(lines), {"datasets": datasets})
        return _guarded(run)

    def search(self, dataset: str, query: str, k: int = DEFAULT_K, mode: RetrievalMode | None = None,
               rerank: bool | None = None, where: list[str] | None = None) -> CallToolResult:
        def run() -> CallToolResult:
            if not query.strip():
                raise invalid("query is empty; give the question or the words to look for")
            result = self.backend.query(dataset, query, k=k, mode=mode, rerank=rerank, where=where or None)
            data = result.to_dict()
            for hit, record in zip(data["hits"], result.hits):
                hit["citation"] = citation(record.document_name, record.page_start, record.page_end,
                                           record.chunk_index, record.chunk_count)
                hit["pages"] = pages_label(record.page_start, record.page_end)
            data["mode"] = str(data["mode"])
            return _answer(_hit_lines(data), data)
        return _guarded(run)

    def list_documents(self, dataset: str, offset: int = 0, limit: int = 50) -> CallToolResult:
        def run() -> CallToolResult:
            docs = self.backend.list_documents(dataset, offset, limit)
            total = self.backend.dataset_summary(dataset).documents
            following = offset + len(docs)
            data = {"dataset": dataset, "offset": offset, "limit": limit, "total": total,
                    "next_offset": following if following < total else None,
                    "documents": [d.to_dict() for d in docs]}
            if docs:
                lines = [f"documents {offset + 1}-{following} of {total} in '{dataset}'"]
            else:
                lines = [f"no documents from offset {offset}: '{dataset}' holds {total}"
                         + ("; list_documents with offset=0 starts from the first" if total else "")]
            lines += [_document_line(d) for d in docs]
            if data["next_offset"] is not None:
                lines.append(f"more: call list_documents with offset={following}")
            return _answer("\n".join(lines), data)
        return _guarded(run)

    def read_document(self, dataset: str, document: str, passage_ref: str | None = None,
                      chunk: int | None = None, page_start: int | None = None, page_end: int | None = None,
                      offset: int | None = None, context_chars: int = 1000,
                      max_chars: int = 6000) -> CallToolResult:
        def run() -> CallToolResult:
            chosen = [n for n, v in (("passage_ref", passage_ref), ("chunk", chunk), ("page_start", page_start),
                                     ("offset", offset)) if v is not None]
            if len(chosen) > 1:
                raise invalid(f"give one of passage_ref, chunk, page_start or offset, not {' and '.join(chosen)}")
            if page_end is not None and page_start is None:
                raise invalid("page_end needs page_start")
            summary = self._find_document(dataset, document)
            ref = summary.ref if summary else document
            text = self.backend.document_text(dataset, ref)
            spans = self.backend.document_passages(dataset, ref)
            start, end = self._window(text, spans, passage_ref, chunk, page_start, page_end, offset, context_chars)
            focus = self._focus(spans, passage_ref, chunk)
            start, end = _within(start, min(end, len(text)), focus, max_chars)
            covered = [s for s in spans if s.char_start < end and s.char_end > start]
            name = summary.name if summary else ref[:12]
            pages = [p for s in covered for p in (s.page_start, s.page_end) if p is not None]
            first_page, last_page = (min(pages), max(pages)) if pages else (None, None)
            data = {
                "dataset": dataset, "document_ref": ref, "document_name": name,
                "document_title": summary.title if summary else None,
                "char_start": start, "char_end": end, "total_chars": len(text),
                "page_start": first_page, "page_end": last_page,
                "passages": [{**s.to_dict(), "chunk": s.label} for s in covered],
                "previous_offset": max(0, start - max_chars) if start > 0 else None,
                "next_offset": end if end < len(text) else None,
                "text": text[start:end],
            }
            where = pages_label(first_page, last_page)
            head = (f"{name}{' ' + where if where else ''}, characters {start}-{end} of {len(text)}"
                    + (f", {covered[0].label}" if len(covered) == 1 else
                       f", chunks {covered[0].chunk_index + 1}-{covered[-1].chunk_index + 1}/{covered[0].chunk_count}"
                       if covered else ""))
            tail = f"\n[more: read_document with offset={end}]" if end < len(text) else "\n[end of document]"
            return _answer(f"{head}\n\n{text[start:end]}{tail}", data)
        return _guarded(run)

    def ingest_text(self, dataset: str, text: str, name: str | None = None) -> CallToolResult:
        def run() -> CallToolResult:
            self._require_ingest()
            if not text.strip():
                raise invalid("text is empty; give the document's text")
            data = text.encode("utf-8", errors="strict")
            if len(data) > self.policy.max_document_bytes:
                raise invalid(f"text is {len(data):,} bytes, over the {self.policy.max_document_bytes:,}-byte "
                              "limit (KX_MAX_DOCUMENT_BYTES); split it")
            return self._ingest(dataset, [from_text(text, name)])
        return _guarded(run)

    def ingest_file(self, dataset: str, path: str) -> CallToolResult:
        def run() -> CallToolResult:
            self._require_ingest()
            resolved = self.policy.confine(path)  # then opened without following a link, and checked again
            doc = from_file(resolved, self.policy.max_document_bytes, follow_symlinks=False,
                            vet=self.policy.vet(path))
            return self._ingest(dataset, [doc])
        return _guarded(run)

    # -- helpers ------------------------------------------------------------------------

    def _require_ingest(self) -> None:
        if not self.policy.allow_ingest:
            raise KxError(Status.PERMISSION_DENIED, "this server is read-only; the user can restart it with "
                                                     "`kx mcp --allow-ingest` to let you add documents")

    def _ingest(self, dataset: str, docs: list[Any]) -> CallToolResult:
        report = self.backend.ingest(dataset, docs)
        data = report.to_dict()
        refused = [r for r in report.results if r.status == "refused"]
        if refused and len(refused) == len(report.results):
            first = refused[0]
            raise KxError(Status[first.code or "INVALID_ARGUMENT"], first.reason or f"{first.name} was refused")
        lines = [f"'{dataset}': {data['added']} added, {data['unchanged']} unchanged, {data['refused']} refused; "
                 f"it now holds {data['documents']} stored documents (versions included), {data['passages']} passages"]
        lines += [f"- {r.name}: {r.status}" + (f", {r.passages} passages, ref={r.ref}" if r.ref else "")
                  + (f" ({r.code}: {r.reason})" if r.reason else "") for r in report.results]
        return _answer("\n".join(lines), data)

    def _find_document(self, dataset: str, document: str) -> DocumentSummary | None:
        """The document whose ref, ref prefix (8+ characters) or name is `document`; NOT_FOUND if none."""
        wanted = document.strip()
        if not wanted:
            raise invalid("document is empty; give a document_ref from search or list_documents, or its name")
        lowered = wanted.lower()
        by_prefix = len(lowered) >= 8 and all(c in "0123456789abcdef" for c in lowered)
        named: list[DocumentSummary] = []
        prefixed: list[DocumentSummary] = []
        for page in range(_FIND_PAGES):
            docs = self.backend.list_documents(dataset, page * MAX_DOCUMENTS_PAGE, MAX_DOCUMENTS_PAGE)
            for doc in docs:
                if doc.ref == lowered:
                    return doc
                if by_prefix and doc.ref.startswith(lowered):
                    prefixed.append(doc)
                if doc.name == wanted:
                    named.append(doc)
            if len(docs) < MAX_DOCUMENTS_PAGE:
                break
        else:
            if len(lowered) == 64 and by_prefix:
                return None  # a full ref past the pages searched: read it by ref without its name
        if len(prefixed) > 1:  # a short prefix two refs share: reading either would be a guess
            raise invalid(f"{len(prefixed)} documents in '{dataset}' have refs starting {lowered!r}; give more of "
                          f"the ref ({', '.join(d.ref[:16] for d in prefixed[:5])})")
        if prefixed:
            return prefixed[0]
        if len(named) > 1:
            raise invalid(f"{len(named)} documents in '{dataset}' are named {wanted!r}; give the document_ref "
                          f"instead ({', '.join(d.ref[:12] for d in named[:5])})")
        if named:
            return named[0]
        raise not_found(f"no document {wanted!r} in dataset '{dataset}' (by ref or name); list_documents shows "
                        "what is there")

    @staticmethod
    def _focus(spans: list[PassageSpan], passage_ref: str | None, chunk: int | None) -> tuple[int, int] | None:
        """The character range of the passage or chunk read around (`_window` has checked it exists)."""
        span = (next((s for s in spans if s.ref == passage_ref), None) if passage_ref is not None
                else spans[chunk - 1] if chunk is not None else None)
        return (span.char_start, span.char_end) if span is not None else None

    @staticmethod
    def _window(text: str, spans: list[PassageSpan], passage_ref: str | None, chunk: int | None,
                page_start: int | None, page_end: int | None, offset: int | None,
                context: int) -> tuple[int, int]:
        if passage_ref is not None:
            span = next((s for s in spans if s.ref == passage_ref), None)
            if span is None:
                raise not_found(f"passage {passage_ref[:16]!r} is not in this document; use a passage_ref from a "
                                "search hit of the same document")
            return max(0, span.char_start - context), min(len(text), span.char_end + context)
        if chunk is not None:
            if not spans or not 1 <= chunk <= len(spans):
                raise invalid(f"chunk must be from 1 to {len(spans)} for this document, got {chunk}")
            span = spans[chunk - 1]
            return max(0, span.char_start - context), min(len(text), span.char_end + context)
        if page_start is not None:
            last = page_end if page_end is not None else page_start
            if last < page_start:
                raise invalid(f"page_end ({last}) is before page_start ({page_start})")
            inside = [s for s in spans if s.page_start is not None
                      and s.page_start <= last and (s.page_end or s.page_start) >= page_start]
            if not inside:
                pages = [p for s in spans for p in (s.page_start, s.page_end) if p is not None]
                if not pages:
                    raise invalid("this document has no pages (not a paged format); read it by offset or chunk")
                raise invalid(f"no passage lies on pages {page_start}-{last}; the document spans pages "
                              f"{min(pages)}-{max(pages)}")
            return min(s.char_start for s in inside), max(s.char_end for s in inside)
        start = offset or 0
        if start > len(text):
            raise invalid(f"offset {start} is past the document's end ({len(text)} characters)")
        return start, len(text)


def _within(start: int, end: int, focus: tuple[int, int] | None, max_chars: int) -> tuple[int, int]:
    """[start, end) cut to `max_chars`, keeping `focus` (a passage read around) in it, its context split either
    side: cut from the end, a passage after more than max_chars of context was not in what came back at all."""
    if end - start <= max_chars:
        return start, end
    if focus is None:
        return start, start + max_chars
    first, last = focus
    if last - first >= max_chars:
        return first, first + max_chars
    spare = max_chars - (last - first)
    after = min(end - last, spare - min(first - start, spare // 2))
    before = min(first - start, spare - after)
    return first - before, last + after


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

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            refusal = _refuse_arguments(name, arguments, tool.parameters.get("properties", {}))
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
        inside an emoji) was never answered: its caller waited until its own timeout. Such a request, or one
        of the wrong shape, now gets a JSON-RPC error under its id (`_unreadable`).
        """
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read_stream, write_stream):
            passed, screened = anyio.create_memory_object_stream[Any](0)

            async def screen() -> None:
                async with passed:
                    async for item in read_stream:
                        answer = _unreadable(item) if isinstance(item, Exception) else None
                        if answer is not None:
                            await write_stream.send(answer)
                        else:
                            await passed.send(item)

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(screen)
                await self._lowlevel_server.run(screened, write_stream,
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
        return await super().get_prompt(name, arguments, context)


def _resource(read: Callable[[], str]) -> str:
    """A resource's text; its KxError as the JSON-RPC error a client shows (`NOT_FOUND: ...`, data `{code,
    message}`), where the SDK answered "Error creating resource from template ..." and logged a traceback."""
    try:
        return read()
    except KxError as exc:
        raise _rpc_error(exc) from None


def _rpc_error(exc: KxError) -> MCPError:
    """A KxError as a JSON-RPC error: the caller's mistakes (INVALID_ARGUMENT, NOT_FOUND) are invalid params,
    as MCP asks for an unknown resource; the rest are the server's own (-32000)."""
    code = INVALID_PARAMS if exc.status in (Status.INVALID_ARGUMENT, Status.NOT_FOUND) else _SERVER_ERROR
    return MCPError(code=code, message=f"{exc.code}: {exc.message}", data=exc.to_dict())


def _unreadable(error: Exception) -> SessionMessage | None:
    """The JSON-RPC error for a request line the SDK could not read, when the line names the request's id; None
    for anything else (a line that is not JSON at all has no id to answer under)."""
    if not isinstance(error, ValidationError):
        return None
    # the whole message is the input of one of the errors: the line (it did not parse) or its object
    given = next((e.get("input") for e in error.errors() if isinstance(e.get("input"), (str, bytes, dict))), None)
    try:
        message = json.loads(given) if isinstance(given, (str, bytes)) else given
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        return None
    try:
        json.dumps(message, ensure_ascii=False).encode("utf-8")
        refusal, code = invalid(f"not a JSON-RPC request MCP knows ({_first_problem(error)}); send "
                                "{jsonrpc: '2.0', id, method: string, params: object}"), INVALID_REQUEST
    except UnicodeEncodeError as exc:
        bad = json.dumps(message, ensure_ascii=False)[exc.start:exc.end]
        refusal, code = invalid(f"the request holds {shown_surrogates(bad)}, an unpaired surrogate escape that is "
                                "not valid text (a string cut inside a character?); send valid Unicode "
                                "text"), PARSE_ERROR
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(
        code=code, message=f"{refusal.code}: {refusal.message}", data=refusal.to_dict())))


def _first_problem(error: ValidationError) -> str:
    errors = error.errors()
    if not errors:
        return "invalid"
    where = ".".join(str(p) for p in errors[0]["loc"] if not str(p).startswith("JSONRPC"))
    return f"{where}: {errors[0]['msg']}" if where else errors[0]["msg"]


def _prompt_refusal(server: MCPServer, name: str, arguments: dict[str, Any] | None) -> KxError | None:
    """NOT_FOUND for a prompt this server does not have, INVALID_ARGUMENT for a required argument missing or
    one it does not take; None when the call is well formed."""
    prompts = {p.name: p for p in server._prompt_manager.list_prompts()}
    prompt = prompts.get(name)
    if prompt is None:
        return not_found(f"no prompt named {name!r}; this server has {', '.join(prompts) or 'none'}")
    given = arguments or {}
    declared = [a.name for a in prompt.arguments or []]
    missing = [a.name for a in prompt.arguments or [] if a.required and given.get(a.name) is None]
    unknown = sorted(set(given) - set(declared))
    if missing or unknown:
        wrong = [f"{a} is required" for a in missing] + [f"unknown argument {a!r}"[:60] for a in unknown]
        return invalid(f"prompt {name}: {'; '.join(wrong)}; it takes {', '.join(declared) or 'no arguments'}")
    return None


def _refuse_arguments(tool: str, arguments: dict[str, Any], known: dict[str, Any]) -> KxError | None:
    """INVALID_ARGUMENT for an argument the tool does not take (the SDK drops it silently: a model that sent
    `top_k` or `filter` believed it applied), or a string holding a lone surrogate (JSON's unpaired "\\ud800",
    which no store, path or index can take: it failed deep inside as an INTERNAL error); None when both hold."""
    unknown = sorted(set(arguments) - set(known))
    if unknown:
        takes = ", ".join(known) or "no arguments"
        return invalid(f"{tool}: unknown argument{'s' if len(unknown) > 1 else ''} "
                       f"{', '.join(repr(a)[:40] for a in unknown[:5])}; it takes {takes} (see the tool's input "
                       "schema)")
    for key, value in arguments.items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError as exc:
                    return invalid(f"{tool}: {key} holds {shown_surrogates(item[exc.start:exc.end])} at character "
                                   f"{exc.start + 1}, an unpaired surrogate that is not valid text; send valid "
                                   "Unicode (UTF-8) text")
    return None


def _describe(tool: str, error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:5]:
        where = ".".join(str(p) for p in item.get("loc", ())) or "arguments"
        if item.get("type") == "missing":
            parts.append(f"{where} is required")
        elif item.get("type") == "extra_forbidden":
            parts.append(f"unknown argument {where}")
        else:
            parts.append(f"{where}: {item.get('msg', 'invalid')}")
    return f"{tool}: " + "; ".join(parts) + " (see the tool's input schema)"


def build_server(backend: Backend, policy: Policy | None = None) -> MCPServer:
    """An MCPServer with kx's tools, resources and prompt over `backend`."""
    tools = KxTools(backend, policy or Policy())
    server: MCPServer = _Server(SERVER_NAME, title="kx: your own documents", version=__version__,
                                  instructions=INSTRUCTIONS, log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=read_only)
    async def list_datasets() -> CallToolResult:
        """List the datasets kx holds on this machine: name, documents, passages, embedding model, fingerprint.

        Call this first to learn which dataset to search.
        """
        return await _off_loop(tools.list_datasets)

    @server.tool(annotations=read_only)
    async def search(
        dataset: DatasetArg,
        query: Annotated[str, Field(description="The question or the words to look for, in plain language.")],
        k: Annotated[int, Field(ge=1, le=200, description="How many passages to return (the server may clamp "
                                                          "to its KX_MAX_K).")] = DEFAULT_K,
        mode: Annotated[RetrievalMode | None, Field(
            description="hybrid (default: meaning and exact words fused), dense (meaning) or sparse (BM25, exact "
                        "words, names, codes).")] = None,
        rerank: Annotated[bool | None, Field(
            description="MMR pass that pushes near-duplicate passages down (default: the server's KX_RERANK).")]
        = None,
        where: Annotated[list[str] | None, Field(
            max_length=64,
            description="Filters, all of which must hold (two of one kind: either): name:GLOB (document name or "
                        "source path, e.g. name:guide/*), type:pdf, after:YYYY-MM-DD, before:YYYY-MM-DD, "
                        "pages:A-B, ref:REF[,REF]. Applied inside both retrievers: k hits still come back when "
                        "k matching passages exist.")] = None,
    ) -> CallToolResult:
        """Search a dataset for the passages that answer a question (hybrid dense + BM25 retrieval).

        Each hit carries the passage text, its document's name and title, a ready citation such as
        [report p. 6, chunk 3/12] to quote, its pages, section heading path, character range,
        document_ref and passage_ref (for read_document), and its rank in the dense and sparse lists.
        """
        return await _off_loop(tools.search, dataset, query, k, mode, rerank, where)

    @server.tool(annotations=read_only)
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

    @server.tool(annotations=read_only)
    async def list_documents(
        dataset: DatasetArg,
        offset: Annotated[int, Field(ge=0, description="Skip this many documents (ingest order).")] = 0,
        limit: Annotated[int, Field(ge=1, le=MAX_DOCUMENTS_PAGE, description="Documents per page.")] = 50,
    ) -> CallToolResult:
        """List a dataset's documents in ingest order, paged: name, title, ref, pages, passages, media type, source."""
        return await _off_loop(tools.list_documents, dataset, offset, limit)

    if tools.policy.allow_ingest:
        writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                 open_world_hint=False)

        @server.tool(annotations=writes)
        async def ingest_text(
            dataset: Annotated[str, Field(description="The dataset to add to; created on first use.")],
            text: Annotated[str, Field(description="The document's text.")],
            name: Annotated[str | None, Field(description="A name for the document (default: from its text).")]
            = None,
        ) -> CallToolResult:
            """Add a text as one document to a dataset (created on first use). The same text twice is 'unchanged'."""
            return await _off_loop(tools.ingest_text, dataset, text, name)

        if tools.policy.allow_paths:
            folders = ", ".join(str(p) for p in tools.policy.allow_paths)

            @server.tool(annotations=writes, description=(
                "Add a file (PDF, Word, HTML, EPUB, Markdown, text) as one document to a dataset (created on "
                f"first use). Only files inside these folders can be read: {folders}. A relative path is taken "
                "inside the first."))
            async def ingest_file(
                dataset: Annotated[str, Field(description="The dataset to add to; created on first use.")],
                path: Annotated[str, Field(description="The file's path (inside an allowed folder).")],
            ) -> CallToolResult:
                return await _off_loop(tools.ingest_file, dataset, path)

    @server.resource("kx://datasets", name="datasets", mime_type="application/json",
                     description="Every dataset with its counts and model (as list_datasets).")
    def datasets_resource() -> str:
        return _resource(lambda: json.dumps([s.to_dict() for s in backend.list_datasets()], ensure_ascii=False))

    @server.resource("kx://datasets/{name}/documents/{ref}", name="document", mime_type="text/plain",
                     description="A document's stored text (the text passages' character ranges index into); {ref} is "
                                 "its ref, a ref prefix or its name.")
    def document_resource(name: str, ref: str) -> str:
        def read() -> str:  # a ref, a ref prefix or a name, as read_document takes
            found = tools._find_document(name, ref)
            return backend.document_text(name, found.ref if found else ref)
        return _resource(read)

    @server.prompt(title="Answer from a dataset, with citations")
    def answer_with_citations(dataset: str, question: str) -> str:
        """Answer a question from one dataset, quoting kx's citations."""
        return (f"Answer the question below using only the dataset '{dataset}' in kx. Call the search tool "
                f"(dataset='{dataset}') with the question and, if needed, with other wordings; read on with "
                "read_document when a passage is cut short. Cite every claim with the hit's citation exactly as "
                "given, e.g. [report p. 6, chunk 3/12]. If the passages do not answer it, say so.\n\n"
                f"Question: {question}")

    return server


def http_app(server: MCPServer, token: str, *, max_bytes: int, bind_host: str,
             allowed_hosts: Sequence[str] = (), allowed_origins: Sequence[str] = ()) -> AnswerWhenStopping:
    """The server's streamable HTTP app at /mcp, inside the gateway's Host, Origin, token and size guard.

    The SDK's own DNS-rebinding check is off: the gateway's guard (the same
    rules `kx serve` applies) has already answered every request it lets by.
    Outside the guard, `AnswerWhenStopping` answers what a stop cuts short.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    from .security import guard

    app = server.streamable_http_app(
        streamable_http_path="/mcp", max_request_body_size=max_bytes, host=bind_host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    return AnswerWhenStopping(guard(_OnlyMcp(app), token, max_bytes=max_bytes, bind_host=bind_host,
                                    allowed_hosts=allowed_hosts, allowed_origins=allowed_origins), max_bytes)


class _OnlyMcp:
    """ASGI middleware: a path other than /mcp is NOT_FOUND as kx's `{code, message}`, saying where MCP is served
    (Starlette answered a plain-text "Not Found", which told a client pointed at / or /v1 nothing)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") not in ("/mcp", "/mcp/"):
            from .security import _send_error

            asked = str(scope.get("path", ""))[:200]
            await _send_error(send, not_found(f"kx mcp serves MCP at /mcp only, not at {asked!r}; point the client "
                                              "at http://HOST:PORT/mcp"))
            return
        await self.app(scope, receive, send)


STOPPING = KxError(Status.UNAVAILABLE, "kx mcp is stopping: this call was still running when the server stopped "
                                       "waiting for it; what it committed stays; call it again once kx mcp runs "
                                       "again")
_SERVER_ERROR = -32000  # JSON-RPC's range for a server's own errors (-32000 to -32099); MCP names none for this


class AnswerWhenStopping:
    """ASGI middleware: a request the server cancels while stopping still gets a JSON-RPC answer.

    `kx mcp --http` gives the calls in flight a drain, then cancels what still runs (kx_tui/cli/stopping.py
    `draining_server`). Without this, the cancel reached uvicorn: "Exception in ASGI application" with a
    traceback, and a plain-text 500 or a tool call's event stream cut off with no answer. Now a request
    whose answer has not started gets 503 with a JSON-RPC error (`UNAVAILABLE: ...`, which the MCP client
    raises as the call's error); a tool call whose event stream has started gets that error as its last
    event, under its request's id; a client's listening stream (GET), which answers nothing, just ends.
    `listening` holds those GET streams' tasks, for the server to end once nothing else runs.
    """

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.listening: set[asyncio.Task[Any]] = set()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        task = asyncio.current_task()
        if scope["type"] != "http" or task is None:
            await self.app(scope, receive, send)
            return
        body = bytearray()   # the request's JSON-RPC message, for its id (the guard bounds its size)
        started = streaming = done = False

        async def recorded() -> dict:
            message = await receive()
            if message["type"] == "http.request" and len(body) <= self.max_bytes:
                body.extend(message.get("body", b""))
            return message

        async def watched(message: dict) -> None:
            nonlocal started, streaming, done
            if message["type"] == "http.response.start":
                started = True
                streaming = any(k.lower() == b"content-type" and v.startswith(b"text/event-stream")
                                for k, v in message.get("headers", ()))
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                done = True
            await send(message)

        listening = scope.get("method") == "GET"
        if listening:
            self.listening.add(task)
        try:
            await self.app(scope, recorded, watched)
        except asyncio.CancelledError:
            if done or (started and not streaming):
                raise   # answered already, or half a plain answer, which cannot be taken back
            task.uncancel()   # handled here: the answer below must not be cancelled in turn
            await self._answer(send, started, None if listening else _request_id(bytes(body)))
        finally:
            self.listening.discard(task)

    @staticmethod
    async def _answer(send: Any, started: bool, request_id: Any) -> None:
        error = {"jsonrpc": "2.0", "id": request_id,
                 "error": {"code": _SERVER_ERROR, "message": f"{STOPPING.code}: {STOPPING.message}",
                           "data": STOPPING.to_dict()}}
        payload = json.dumps(error).encode()
        if not started:
            await send({"type": "http.response.start", "status": STOPPING.status.http_status,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(payload)).encode())]})
            await send({"type": "http.response.body", "body": payload})
            return
        if request_id is not None:   # a tool call's stream: its answer, as the SDK frames one
            await send({"type": "http.response.body", "body": b"event: message\r\ndata: " + payload + b"\r\n\r\n",
                        "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _request_id(body: bytes) -> Any:
    """The id of the JSON-RPC request in `body`; None for a notification, a response, or what does not parse."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if isinstance(message, dict) and "method" in message and isinstance(message.get("id"), (str, int)):
        return message["id"]
    return None
