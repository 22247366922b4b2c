"""`kx serve`: the engine as a versioned HTTP JSON API (FastAPI), for KxClient and scripts.

Routes (all JSON; errors are always `{code, message}` with the status's HTTP code):

    GET  /v1/health                      liveness; no token needed unless asked
    GET  /v1/info                        what `kx info --json` shows
    GET  /v1/datasets                    {"datasets": [summary, ...]}
    GET  /v1/datasets/{name}             one summary
    GET  /v1/datasets/{name}/documents   its documents, paged: ?offset=0&limit=100 (limit at most 1000)
    GET  /v1/datasets/{name}/documents/{ref}            one document's text
    GET  /v1/datasets/{name}/documents/{ref}/passages   where its passages lie in that text
    POST /v1/datasets/{name}/documents   ingest: text, or base64 bytes with a media type; optional vector
    POST /v1/datasets/{name}/query       text and/or a pre-computed vector; k, mode, rerank, expand
    POST /v1/agent/runs                  a bounded agent run (engine/agent/): transcript and cited answer

Order of checks on every request, before any byte of the body is read: the
Host header (403: a loopback name or address with the gateway's port, the
defence against DNS rebinding), the Origin header (403 unless it is the
gateway's own or named in KX_GATEWAY_ALLOWED_ORIGINS: a web page elsewhere
cannot post to it), the bearer token (401), then the declared size (413).
These hold with or without a token (see `HostPolicy`). The body is then read in
full, counting bytes (chunked uploads cannot dodge the limit), and validated
before the engine sees it, so a client that goes away mid-upload leaves no
trace. Engine calls run in the threadpool (sync routes), keeping the event
loop free. FastAPI, pydantic and starlette are imported only here, by the request
checks (security.py) and by the schema (schema.py).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import re
from typing import TYPE_CHECKING, Annotated, Any, Sequence

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..backend import MAX_DOCUMENTS_PAGE, MAX_OFFSET
from ..config import ENV
from ..embedded.engine import Engine
from ..errors import KxError, Status, invalid
from ..filters import EXAMPLE, parse_where, spelled
from ..names import validate_name
from ..records import DocumentStatus, IngestReport, VersionView
from ..text.inputs import RECORD_MEDIA_TYPE, DocumentInput, check_document_name, check_source_path, client_supplied
from ..version import __version__
from .schema import _ERRORS, WHERE_PATTERN, AgentRunIn, DocumentTextOut, IngestIn, Name, QueryIn, QueryOut
from .security import API_PREFIX, HEALTH_PATH, HostPolicy, _Guard, _send_error

if TYPE_CHECKING:  # pymilvus is imported only when KX_BACKEND=milvus chose it (engine/open_backend.py)
    from ..milvus.backend import MilvusBackend

# -- the token --------------------------------------------------------------------------


def create_app(engine: Engine | MilvusBackend, token: str | None, *, allow_local: bool = False,
               max_request_bytes: int | None = None, health_needs_token: bool = False,
               bind_host: str | None = None, allowed_hosts: Sequence[str] | None = None,
               allowed_origins: Sequence[str] | None = None) -> FastAPI:
    """The gateway as an ASGI app: FastAPI routes inside the host, origin, token and size guard.

    `token` None with `allow_local` False admits nobody but health; `kx serve`
    always passes one unless it runs --dev-allow-local on loopback.
    `allowed_hosts` / `allowed_origins` default to the engine's settings
    (KX_GATEWAY_ALLOWED_HOSTS / _ORIGINS); `bind_host` is what --host bound.
    """
    # No /docs or /redoc: FastAPI's pages load Swagger UI / ReDoc scripts from a public CDN into the
    # gateway's own origin, where a compromised script could use every route (and they fail offline).
    # /openapi.json stays; point any OpenAPI viewer at it.
    app = FastAPI(title="kx gateway", version=__version__, docs_url=None, redoc_url=None,
                  description="kx's engine over HTTP: datasets, ingest and hybrid retrieval. Every request "
                              "except health needs 'Authorization: Bearer <token>'. Errors are {code, message}.")
    _add_error_handlers(app)
    _add_reading_routes(app, engine)
    _add_writing_routes(app, engine)
    _add_agent_route(app, engine)
    limit = max_request_bytes if max_request_bytes is not None else engine.settings.max_request_bytes
    policy = HostPolicy(
        bind_host,
        engine.settings.gateway_allowed_hosts if allowed_hosts is None else allowed_hosts,
        engine.settings.gateway_allowed_origins if allowed_origins is None else allowed_origins,
    )
    app.add_middleware(_Guard, token=token, max_bytes=limit, allow_local=allow_local,
                       health_needs_token=health_needs_token, policy=policy)
    app.add_middleware(_AnswerWhenCancelled)  # added last: outside the guard, so any request it let in
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """Every refusal as `{code, message}` with the code's HTTP status, in words a client can act on."""

    @app.exception_handler(KxError)
    async def _kx_error(_request: Request, exc: KxError) -> JSONResponse:
        return JSONResponse(exc.to_dict(), status_code=exc.status.http_status)

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(invalid(_describe(exc.errors())).to_dict(), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        status = {401: Status.UNAUTHENTICATED, 404: Status.NOT_FOUND, 413: Status.RESOURCE_EXHAUSTED}.get(
            exc.status_code, Status.INTERNAL if exc.status_code >= 500 else Status.INVALID_ARGUMENT)
        message = str(exc.detail)
        if isinstance(exc.__cause__, UnicodeDecodeError):  # FastAPI's "There was an error parsing the body"
            message = (f"the body is not UTF-8 text (a bad byte at offset {exc.__cause__.start}); send it as UTF-8 "
                       "JSON, with a document's raw bytes base64-encoded in data_base64")
        elif isinstance(exc.__cause__, RecursionError):  # arrays or objects nested thousands deep
            message = ("the body's JSON nests deeper than the gateway parses; send the object /openapi.json "
                       "describes (its lists hold strings and numbers, never lists nested further)")
        elif exc.status_code == 404 and _request.url.path.startswith(f"{API_PREFIX}{API_PREFIX}/"):
            message = (f"no such route: the path starts {API_PREFIX}{API_PREFIX}, so the client was given the "
                       f"gateway's address with {API_PREFIX} on its end; give it as http://HOST:PORT, without a path")
        elif exc.status_code == 404:
            message = "no such route; the API lives under /v1 (see /openapi.json)"
        elif exc.status_code == 405:
            message = f"{_request.method} is not served on {_request.url.path}; see /openapi.json for its methods"
        # the HTTP status is always the code's, so a client can read either (405 reads as 400)
        return JSONResponse({"code": status.name, "message": message}, status_code=status.http_status)


def _add_reading_routes(app: FastAPI, engine: Engine | MilvusBackend) -> None:
    """Health, info, and what the datasets hold."""

    @app.get(HEALTH_PATH, tags=["meta"])
    def health() -> dict[str, Any]:
        return {"status": "ok", "version": __version__}

    @app.get(f"{API_PREFIX}/info", tags=["meta"], responses=_ERRORS)
    def info() -> dict[str, Any]:
        return engine.info()

    @app.get(f"{API_PREFIX}/datasets", tags=["datasets"], responses=_ERRORS)
    def list_datasets() -> dict[str, Any]:
        return {"datasets": [s.to_dict() for s in engine.list_datasets()]}

    @app.get(f"{API_PREFIX}/datasets/{{name}}", tags=["datasets"], responses=_ERRORS)
    def dataset_summary(name: Name) -> dict[str, Any]:
        return engine.dataset_summary(validate_name(name)).to_dict()

    @app.get(f"{API_PREFIX}/datasets/{{name}}/documents", tags=["datasets"], responses=_ERRORS)
    def list_documents(name: Name, offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
                       limit: Annotated[int, Query(ge=1, le=MAX_DOCUMENTS_PAGE)] = 100,
                       versions: VersionView = VersionView.LATEST) -> dict[str, Any]:
        validate_name(name)
        documents = engine.list_documents(name, offset, limit, versions=versions)
        summary = engine.dataset_summary(name)
        total = summary.documents if versions is VersionView.LATEST else (summary.versions or summary.documents)
        return {"dataset": name, "offset": offset, "limit": limit, "total": total,
                "documents": [d.to_dict() for d in documents]}

    @app.get(f"{API_PREFIX}/datasets/{{name}}/documents/{{ref}}/passages", tags=["datasets"], responses=_ERRORS)
    def document_passages(name: Name, ref: str) -> dict[str, Any]:
        validate_name(name)
        return {"dataset": name, "ref": ref, "passages": [p.to_dict() for p in engine.document_passages(name, ref)]}

    @app.get(f"{API_PREFIX}/datasets/{{name}}/documents/{{ref}}", tags=["datasets"],
             responses={200: {"model": DocumentTextOut}, **_ERRORS})
    def document_text(name: Name, ref: str) -> dict[str, Any]:
        validate_name(name)
        return {"ref": ref, "text": engine.document_text(name, ref)}


def _add_writing_routes(app: FastAPI, engine: Engine | MilvusBackend) -> None:
    """Ingest, embed and query: the routes that take a body."""

    @app.post(f"{API_PREFIX}/datasets/{{name}}/documents", tags=["datasets"], responses=_ERRORS,
              response_model=dict[str, Any])  # the 200's schema; a refusal answers its own JSONResponse
    def ingest(name: Name, body: IngestIn) -> Any:
        """Add documents; each one's result (added, unchanged, or refused with its reason) is in `results`.

        When every document is refused, nothing is stored and the answer is the first refusal's status (400
        for INVALID_ARGUMENT): `code`, `message` and each document's refusal in `results`. One or more taken
        is 200, any refusals listed in `results`.
        """
        validate_name(name)
        docs, vectors = _documents(body, engine.settings.max_document_bytes)
        report = engine.ingest(name, docs, vectors)
        refusal = _all_refused(report)
        if refusal is not None:  # a 200 here read as success to every client that checks only the status
            return JSONResponse({**refusal.to_dict(), "results": [r.to_dict() for r in report.results]},
                                status_code=refusal.status.http_status)
        return report.to_dict()

    @app.post(f"{API_PREFIX}/datasets/{{name}}/embed", tags=["datasets"], responses=_ERRORS)
    def embed(name: Name) -> dict[str, Any]:
        """Finish the dataset's embedding backlog now (the gateway also does so by itself at start)."""
        return engine.embed(validate_name(name)).to_dict()

    @app.post(f"{API_PREFIX}/datasets/{{name}}/query", tags=["datasets"],
              responses={200: {"model": QueryOut}, **_ERRORS}, response_class=JSONResponse)
    def query(name: Name, body: QueryIn) -> JSONResponse:
        validate_name(name)
        # the engine holds each dataset's readers under a lock of their own and
        # embeds outside it, so queries overlap where they can
        result = engine.query(name, body.text, **body.model_dump(exclude={"text"}))  # every QueryOptions field
        # plain json.dumps of plain data: FastAPI's jsonable_encoder walk of
        # every hit's fields cost more than the engine's own fusion and MMR
        return JSONResponse(result.to_dict())


def _add_agent_route(app: FastAPI, engine: Engine | MilvusBackend) -> None:
    """A bounded agent run."""

    @app.post(f"{API_PREFIX}/agent/runs", tags=["agent"], responses=_ERRORS, response_class=JSONResponse)
    def agent_run(body: AgentRunIn) -> JSONResponse:
        if body.dataset is not None:
            validate_name(body.dataset)
        # bounded by the gateway's own KX_AGENT_* settings; runs in the threadpool like every engine call
        return JSONResponse(engine.run_agent(body.goal, body.dataset, max_steps=body.max_steps).to_dict())



STOPPING = KxError(Status.UNAVAILABLE, "kx is stopping: this request was still running when the gateway stopped "
                                       "waiting for it; nothing it did is half-written (what was committed stays); "
                                       "send it again once kx serve runs again")


class _AnswerWhenCancelled:
    """ASGI middleware: a request cancelled before it answered (the server stopping: uvicorn cancels what still
    runs when its graceful shutdown ends, `kx serve` a moment before that) answers 503 UNAVAILABLE as JSON.

    Without it the CancelledError reached uvicorn, which logged it as "Exception in ASGI application" with a
    traceback and sent a plain-text 500. The engine call itself runs on in its worker thread; every commit
    is one transaction, and an ingest leaves at its next progress event (`stop_requested`). A request whose
    answer has started is cancelled as before: half an answer cannot be taken back.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except asyncio.CancelledError:
            if started:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # handled here: the answer below must not be cancelled in turn
            await _send_error(send, STOPPING)


def _all_refused(report: IngestReport) -> KxError | None:
    """The refusal to answer with when every document was refused (nothing stored); None when any was taken.

    Its status is the first refusal's, as `kx datasets ingest`'s exit status and `kx mcp`'s ingest tools
    use; the message names the documents and their reasons (the first few: `results` holds them all).
    """
    refused = [r for r in report.results if r.status == DocumentStatus.REFUSED]
    if not refused or len(refused) != len(report.results):
        return None
    shown = "; ".join(f"{r.name}: {r.reason}" for r in refused[:3])
    more = f" (and {len(refused) - 3} more, each in results)" if len(refused) > 3 else ""
    return KxError(Status[refused[0].code or "INVALID_ARGUMENT"],
                   f"every document was refused ({len(refused)}) and nothing was stored: {shown}{more}")


def _documents(body: IngestIn, max_bytes: int) -> tuple[list[DocumentInput], list[list[float]] | None]:
    """The request's documents as engine inputs, every one decoded and checked first."""
    with_vector = [d.vector is not None for d in body.documents]
    if any(with_vector) and not all(with_vector):
        raise invalid("give a vector for every document or for none")
    docs = []
    named: dict[str, int] = {}  # a name given twice in one request would store two versions at once
    for i, item in enumerate(body.documents):
        label = f"documents[{i}]"
        if item.name is not None and named.setdefault(item.name, i) != i:
            raise invalid(f"documents[{named[item.name]}] and {label} are both named {item.name!r}; a name is "
                          "one document: give each its own name (a new version goes in a later request)")
        if (item.text is None) == (item.data_base64 is None):
            raise invalid(f"{label}: give exactly one of text or data_base64")
        if item.text is not None:
            data = item.text.encode("utf-8")
        else:
            try:
                data = base64.b64decode(item.data_base64 or "", validate=True)
            except (binascii.Error, ValueError):
                raise invalid(f"{label}: data_base64 is not valid base64 (standard alphabet, padded)") from None
        media = item.media_type or "text/plain"
        if media == RECORD_MEDIA_TYPE:
            _check_record(label, data)
        if item.name is not None:
            check_document_name(item.name, label)
        if item.source_path is not None:
            check_source_path(item.source_path, label)
        name = item.name or f"{'text' if item.text is not None else 'bytes'}-{hashlib.sha256(data).hexdigest()[:12]}"
        error = None
        if len(data) > max_bytes:
            error = invalid(f"{name} is {len(data):,} bytes, over the {max_bytes:,}-byte limit "
                            f"({ENV.max_document_bytes}); split it or raise the limit")
        docs.append(DocumentInput(name=name, data=data, source_path=client_supplied(item.source_path),
                                  media_type=media, error=error))
    vectors = [d.vector for d in body.documents] if all(with_vector) else None
    return docs, vectors  # type: ignore[return-value]


def _check_record(label: str, data: bytes) -> None:
    """A JSONL record (as `kx datasets ingest --jsonl` sends it) must be the object the reader expects."""
    try:
        record = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested thousands deep
        record = None
    if not (isinstance(record, dict) and isinstance(record.get("id"), str) and isinstance(record.get("text"), str)
            and isinstance(record.get("title"), str)):
        raise invalid(f"{label}: a {RECORD_MEDIA_TYPE} document must be a JSON object with string "
                      "\"id\", \"title\" and \"text\"")


def _describe(errors: Any) -> str:
    """FastAPI's validation errors as one sentence naming each field."""
    parts = []
    for error in list(errors)[:5]:
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
        kind = error.get("type", "")
        if kind == "json_invalid":
            parts.append("the body is not valid JSON")
        elif kind == "extra_forbidden":
            parts.append(f"unknown field {where}")
        elif kind == "string_pattern_mismatch" and tuple(error.get("loc", ()))[-2:-1] == ("where",):
            parts.append(f"{where}: {_where_refusal(error.get('input'))}")
        elif kind == "string_pattern_mismatch":
            parts.append(f"{where}: {_pattern_refusal(tuple(error.get('loc', ())), error.get('input'))}")
        else:
            parts.append(f"{where}: {error.get('msg', 'invalid')}")
    more = len(list(errors)) - 5
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "") + "; see /openapi.json for the schema"


def _pattern_refusal(loc: tuple[Any, ...], value: Any) -> str:
    """Why a string fails the schema's pattern, in the words the engine uses in-process: the pattern itself
    (for a document name, 300 characters of character classes) told a client nothing it could act on."""
    field = str(loc[-1]) if loc else ""
    try:
        if field == "name" and loc[:1] == ("path",) or field == "dataset":
            validate_name(value)
        elif field == "name":
            check_document_name(str(value), "")
        elif field == "source_path":
            check_source_path(str(value), "")
    except KxError as exc:
        return exc.message.removeprefix(": ")  # the checks' label: `where` already names the field
    if field in ("text", "goal"):
        return f"the {field} is blank; give the words to {'search for' if field == 'text' else 'research'}"
    if field == "data_base64":
        return "not valid base64 (the standard alphabet, padded with '='); encode the document's bytes as that"
    return "does not have the form the schema states"


def _where_refusal(clause: Any) -> str:
    """Why a `where` clause fails the schema's pattern, in the words the engine uses in-process (the pattern's
    own text told a client nothing it could act on)."""
    try:
        parse_where([clause])
    except KxError as exc:
        return exc.message
    # the engine would read it, but the schema (what every client validates against) takes one spelling only
    canonical = spelled(str(clause))
    if re.fullmatch(WHERE_PATTERN, canonical):
        return f"write {clause!r} as {canonical!r} (the kind and a type in lower case, no spaces around ':')"
    return f"bad filter {clause!r}; {EXAMPLE}"
