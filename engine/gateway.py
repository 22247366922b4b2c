"""`kx serve`: the engine as a versioned HTTP JSON API (FastAPI), for KxClient and scripts.

Routes (all JSON; errors are always `{code, message}` with the status's HTTP code):

    GET  /v1/health                      liveness; no token needed unless asked
    GET  /v1/info                        what `kx info --json` shows
    GET  /v1/datasets                    {"datasets": [summary, ...]}
    GET  /v1/datasets/{name}             one summary
    GET  /v1/datasets/{name}/documents   its documents, paged: ?offset=0&limit=100 (limit at most 1000)
    GET  /v1/datasets/{name}/documents/{ref}            one document's text
    GET  /v1/datasets/{name}/documents/{ref}/passages   where its passages lie in that text
    POST /v1/datasets/{name}/documents   ingest: text, base64 bytes, optional vector per document
    POST /v1/datasets/{name}/query       text and/or a pre-computed vector; k, mode, rerank

Order of checks on every request, before any byte of the body is read: the
bearer token (401), then the declared size (413). The body is then read in
full, counting bytes (chunked uploads cannot dodge the limit), and validated
before the engine sees it, so a client that goes away mid-upload leaves no
trace. Engine calls run in the threadpool (sync routes), keeping the event
loop free. FastAPI, pydantic and starlette are imported only by this module.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.exceptions import HTTPException as StarletteHTTPException

from . import __version__
from .client import TOKEN_FILE, read_token, token_path
from .core import Engine
from .dataset import validate_name
from .documents import RECORD_MEDIA_TYPE, DocumentInput
from .errors import KxError, Status, invalid, precondition

log = logging.getLogger("kx.gateway")

API_PREFIX = "/v1"
HEALTH_PATH = f"{API_PREFIX}/health"


# -- the token --------------------------------------------------------------------------


def ensure_token(home: Path) -> str:
    """Read the gateway token, creating it (owner-only, atomically) at first start.

    The secret is written to a private temporary file and then hard-linked
    into place: the link either creates the whole file or fails because a
    concurrent first start won, so no reader ever sees half a token.
    """
    path = token_path(home)
    if path.exists():
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise precondition(f"{path} is readable by others (mode {mode:o}); run: chmod 600 {path}")
        token = read_token(home)
        if token is None:
            raise precondition(f"{path} is empty; delete it and start `kx serve` again to make a new token")
        return token
    Path(home).mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    temp = path.with_name(f".{TOKEN_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(token + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temp, path)
        except FileExistsError:
            return ensure_token(home)
    finally:
        temp.unlink(missing_ok=True)
    return token


def is_loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# -- request and response bodies --------------------------------------------------------

class _Body(BaseModel):
    """Unknown fields and loose types are refused (400), not guessed at."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="after")
    def _encodable(self) -> "_Body":
        # JSON may carry lone surrogates ("\\ud800"); no store or index can take them
        for field_name, value in self:
            if isinstance(value, str):
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    raise ValueError(f"{field_name} holds a lone surrogate; send valid Unicode text") from None
        return self


class DocumentIn(_Body):
    """One document: exactly one of `text` or `data_base64`; `vector` for all documents or none."""

    text: str | None = Field(None, description="The document as a string (stored as its UTF-8 bytes).")
    data_base64: str | None = Field(None, description="The document's raw bytes, base64 (standard alphabet).")
    name: str | None = Field(None, max_length=1024, description="Display name; default derived from the bytes.")
    media_type: str | None = Field(None, max_length=200, description="How to read the bytes; default text/plain.")
    source_path: str | None = Field(None, max_length=4096, description="Where the client read it from.")
    vector: list[float] | None = Field(None, description="A pre-computed embedding: the document becomes one "
                                                         "passage with this vector (no model needed).")


class IngestIn(_Body):
    documents: list[DocumentIn] = Field(..., min_length=1, max_length=100_000)


class QueryIn(_Body):
    text: str | None = Field(None, description="The question or words to search for.")
    vector: list[float] | None = Field(None, description="A pre-computed query embedding (searches dense).")
    k: int | None = Field(None, description="Hits wanted (clamped to the operator's KX_MAX_K).")
    mode: Literal["hybrid", "dense", "sparse"] | None = None
    rerank: bool | None = Field(None, description="Apply the MMR pass (default KX_RERANK).")


class ErrorOut(BaseModel):
    code: str
    message: str


_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut} for code in (400, 401, 404, 412, 413, 500)
}


# -- the guard: token and size, before the body ----------------------------------------


class _Guard:
    """ASGI middleware: bearer token, then size, then the whole body read and counted.

    Pure ASGI (not BaseHTTPMiddleware) so it can answer before a single body
    byte is read, and so a chunked body is counted as it streams.
    """

    def __init__(self, app: Any, token: str | None, max_bytes: int, allow_local: bool,
                 health_needs_token: bool) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.max_bytes = max_bytes
        self.allow_local = allow_local
        self.health_needs_token = health_needs_token

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self._admitted(scope):
            await _send_error(send, KxError(Status.UNAUTHENTICATED,
                                            "missing or wrong bearer token; send 'Authorization: Bearer <token>' "
                                            "with the token from $KX_HOME/gateway.token on the gateway's machine"))
            return
        declared = _header(scope, b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await _send_error(send, invalid("Content-Length is not a number"))
                return
            if size > self.max_bytes:
                await _send_error(send, self._too_large(f"{size:,} bytes"))
                return
        chunks, total = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left mid-upload: nothing reached the engine
            body = message.get("body", b"")
            total += len(body)
            if total > self.max_bytes:
                await _send_error(send, self._too_large(f"more than {self.max_bytes:,} bytes"))
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        whole = b"".join(chunks)
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": whole, "more_body": False}
            return await receive()

        started = False

        async def tracking_send(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        # Unexpected errors are answered here rather than by Starlette's
        # outermost handler, which re-raises: uvicorn would then drop the
        # keep-alive connection under a client's next request.
        try:
            await self.app(scope, replay, tracking_send)
        except Exception as exc:
            log.exception("unexpected error in %s %s", scope.get("method"), scope.get("path"))
            if not started:
                await _send_error(send, KxError(Status.INTERNAL, f"unexpected {type(exc).__name__}; see the "
                                                                 "gateway's log and report it"))

    def _admitted(self, scope: dict) -> bool:
        if scope.get("path") == HEALTH_PATH and not self.health_needs_token:
            return True
        if self.allow_local:
            client = scope.get("client")
            if client and is_loopback(str(client[0])):
                return True
        if self.token is None:
            return False
        header = _header(scope, b"authorization") or ""
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(given.strip().encode(), self.token)

    def _too_large(self, what: str) -> KxError:
        return KxError(Status.RESOURCE_EXHAUSTED,
                       f"the request body is {what}, over the gateway's {self.max_bytes:,}-byte limit "
                       "(KX_MAX_REQUEST_BYTES); send fewer documents per request or ask the operator to raise it")


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


async def _send_error(send: Any, error: KxError) -> None:
    body = json.dumps(error.to_dict()).encode()
    await send({"type": "http.response.start", "status": error.status.http_status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


# -- the app ---------------------------------------------------------------------------


def create_app(engine: Engine, token: str | None, *, allow_local: bool = False,
               max_request_bytes: int | None = None, health_needs_token: bool = False) -> FastAPI:
    """The gateway as an ASGI app: FastAPI routes inside the token-and-size guard.

    `token` None with `allow_local` False admits nobody but health; `kx serve`
    always passes one unless it runs --dev-allow-local on loopback.
    """
    app = FastAPI(title="kx gateway", version=__version__,
                  description="kx's engine over HTTP: datasets, ingest and hybrid retrieval. Every request "
                              "except health needs 'Authorization: Bearer <token>'. Errors are {code, message}.")
    limit = max_request_bytes if max_request_bytes is not None else engine.settings.max_request_bytes

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
        if exc.status_code == 404:
            message = "no such route; the API lives under /v1 (see /openapi.json)"
        return JSONResponse({"code": status.name, "message": message}, status_code=exc.status_code)

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
    def dataset_summary(name: str) -> dict[str, Any]:
        return engine.dataset_summary(validate_name(name)).to_dict()

    @app.get(f"{API_PREFIX}/datasets/{{name}}/documents", tags=["datasets"], responses=_ERRORS)
    def list_documents(name: str, offset: int = 0, limit: int = 100) -> dict[str, Any]:
        validate_name(name)
        documents = engine.list_documents(name, offset, limit)
        total = engine.dataset_summary(name).documents
        return {"dataset": name, "offset": offset, "limit": limit, "total": total,
                "documents": [d.to_dict() for d in documents]}

    @app.get(f"{API_PREFIX}/datasets/{{name}}/documents/{{ref}}/passages", tags=["datasets"], responses=_ERRORS)
    def document_passages(name: str, ref: str) -> dict[str, Any]:
        validate_name(name)
        return {"dataset": name, "ref": ref, "passages": [p.to_dict() for p in engine.document_passages(name, ref)]}

    @app.get(f"{API_PREFIX}/datasets/{{name}}/documents/{{ref}}", tags=["datasets"], responses=_ERRORS)
    def document_text(name: str, ref: str) -> dict[str, Any]:
        validate_name(name)
        return {"ref": ref, "text": engine.document_text(name, ref)}

    @app.post(f"{API_PREFIX}/datasets/{{name}}/documents", tags=["datasets"], responses=_ERRORS)
    def ingest(name: str, body: IngestIn) -> dict[str, Any]:
        validate_name(name)
        docs, vectors = _documents(body, engine.settings.max_document_bytes)
        return engine.ingest(name, docs, vectors).to_dict()

    @app.post(f"{API_PREFIX}/datasets/{{name}}/query", tags=["datasets"], responses=_ERRORS,
              response_class=JSONResponse)
    def query(name: str, body: QueryIn) -> JSONResponse:
        validate_name(name)
        # the engine holds each dataset's readers under a lock of their own and
        # embeds outside it, so queries overlap where they can
        result = engine.query(name, body.text, vector=body.vector, k=body.k, mode=body.mode, rerank=body.rerank)
        # plain json.dumps of plain data: FastAPI's jsonable_encoder walk of
        # every hit's fields cost more than the engine's own fusion and MMR
        return JSONResponse(result.to_dict())

    app.add_middleware(_Guard, token=token, max_bytes=limit, allow_local=allow_local,
                       health_needs_token=health_needs_token)
    return app


def _documents(body: IngestIn, max_bytes: int) -> tuple[list[DocumentInput], list[list[float]] | None]:
    """The request's documents as engine inputs, every one decoded and checked first."""
    with_vector = [d.vector is not None for d in body.documents]
    if any(with_vector) and not all(with_vector):
        raise invalid("give a vector for every document or for none")
    docs = []
    for i, item in enumerate(body.documents):
        label = f"documents[{i}]"
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
        name = item.name or f"{'text' if item.text is not None else 'bytes'}-{hashlib.sha256(data).hexdigest()[:12]}"
        error = None
        if len(data) > max_bytes:
            error = invalid(f"{name} is {len(data):,} bytes, over the {max_bytes:,}-byte limit "
                            "(KX_MAX_DOCUMENT_BYTES); split it or raise the limit")
        docs.append(DocumentInput(name=name, data=data, source_path=item.source_path, media_type=media, error=error))
    vectors = [d.vector for d in body.documents] if all(with_vector) else None
    return docs, vectors  # type: ignore[return-value]


def _check_record(label: str, data: bytes) -> None:
    """A JSONL record (as `kx datasets ingest --jsonl` sends it) must be the object the reader expects."""
    try:
        record = json.loads(data)
    except (ValueError, UnicodeDecodeError):
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
        else:
            parts.append(f"{where}: {error.get('msg', 'invalid')}")
    more = len(list(errors)) - 5
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "") + "; see /openapi.json for the schema"
