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
from typing import Annotated, Any, Sequence

from fastapi import FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..backend import MAX_DOCUMENTS_PAGE, MAX_OFFSET
from ..embedded.engine import Engine
from ..errors import KxError, Status, invalid, precondition
from ..names import NAME_PATTERN, NAME_RULE, validate_name
from ..records import RetrievalMode, VersionView
from ..text.inputs import RECORD_MEDIA_TYPE, DocumentInput, check_document_name, check_source_path, client_supplied
from ..version import __version__
from .client import TOKEN_FILE, read_token, token_path

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


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False


def split_host(value: str, default_port: int) -> tuple[str, int] | None:
    """("host", port) from a Host header or an origin's authority; None when malformed."""
    value = value.strip().lower()
    if value.startswith("["):  # [v6] or [v6]:port
        host, close, rest = value[1:].partition("]")
        if not close or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:]
    elif value.count(":") == 1:
        host, _, port_text = value.partition(":")
    elif ":" in value:  # a bare IPv6 address is not a valid Host
        return None
    else:
        host, port_text = value, ""
    if not host or (port_text and not port_text.isdigit()):
        return None
    port = int(port_text) if port_text else default_port
    return (host, port) if 0 < port < 65536 else None


class HostPolicy:
    """Which Host and Origin headers a gateway answers: the browser-facing defences.

    A web page can make the user's browser talk to 127.0.0.1. Through DNS
    rebinding its own name resolves to this machine, so its requests carry
    `Host: evil.example` and the browser lets the page read the answers:
    only names that cannot be rebound are accepted — loopback names and
    addresses, the address the operator bound with --host, this machine's
    host name when bound to every interface (0.0.0.0/::, where any IP-literal
    Host is fine too: an IP literal is never a rebinding), and
    KX_GATEWAY_ALLOWED_HOSTS — each with the gateway's own port. Without
    rebinding a page can still send blind cross-site POSTs; browsers mark
    them with `Origin`, so an Origin that is not the gateway's own (scheme
    http, an accepted host, the port) is refused unless the operator names
    it in KX_GATEWAY_ALLOWED_ORIGINS, which is also the only way a response
    carries CORS headers.
    """

    def __init__(self, bind_host: str | None = None, allowed_hosts: Sequence[str] = (),
                 allowed_origins: Sequence[str] = ()) -> None:
        names = {"localhost"} | {h.lower() for h in allowed_hosts}
        self.any_ip = False
        if bind_host and not is_loopback(bind_host):
            bound = bind_host.strip("[]").lower()
            if bound in ("0.0.0.0", "::", ""):
                self.any_ip = True
                import socket

                names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
            else:
                names.add(bound)
        self.names = frozenset(names)
        self.allowed_origins = frozenset(o.rstrip("/").lower() for o in allowed_origins)

    def host_ok(self, host: str) -> bool:
        bare = host.strip("[]")
        return is_loopback(bare) or bare in self.names or (self.any_ip and _is_ip(bare))

    def check_host(self, header: str | None, port: int | None) -> KxError | None:
        """None when the Host header names this gateway; else the 403 to answer."""
        parsed = split_host(header, 80) if header else None
        if parsed is not None and self.host_ok(parsed[0]) and (port is None or parsed[1] == port):
            return None
        where = f"127.0.0.1:{port}" if port else "127.0.0.1:PORT"
        shown = repr(header[:100]) if header else "missing"
        return KxError(Status.PERMISSION_DENIED,
                       f"the Host header ({shown}) does not name this gateway: it answers to loopback names and "
                       f"addresses with its own port{f' {port}' if port else ''} (a web page that rebinds its "
                       f"own name to this machine sends its name here). Use http://{where}; if that name is "
                       "this machine's, the operator can name it in KX_GATEWAY_ALLOWED_HOSTS")

    def check_origin(self, origin: str | None, fetch_site: str | None, port: int | None) -> KxError | None:
        """None when a request is not cross-site (no Origin, or the gateway's own, or allowed)."""
        if origin is None:
            if (fetch_site or "").lower() == "cross-site":
                return KxError(Status.PERMISSION_DENIED,
                               "this request came from another web site (Sec-Fetch-Site: cross-site); the gateway "
                               "serves scripts and its own SDK, not pages elsewhere")
            return None
        if self.origin_allowed(origin) or self.is_own_origin(origin, port):
            return None
        return KxError(Status.PERMISSION_DENIED,
                       f"the Origin header ({origin[:100]!r}) is not this gateway's own: a web page from another "
                       "site cannot use the gateway (cross-site request forgery). To let a browser app at that "
                       "origin in, start `kx serve` with KX_GATEWAY_ALLOWED_ORIGINS set to it")

    def is_own_origin(self, origin: str, port: int | None) -> bool:
        scheme, sep, authority = origin.strip().lower().partition("://")
        parsed = split_host(authority, 80) if sep and scheme == "http" and "/" not in authority else None
        return parsed is not None and self.host_ok(parsed[0]) and (port is None or parsed[1] == port)

    def origin_allowed(self, origin: str) -> bool:
        return origin.strip().rstrip("/").lower() in self.allowed_origins


_CORS_PREFLIGHT = [(b"access-control-allow-methods", b"GET, POST"),
                   (b"access-control-allow-headers", b"Authorization, Content-Type"),
                   (b"access-control-max-age", b"600")]


# -- request and response bodies --------------------------------------------------------

# What the server enforces, stated in the OpenAPI schema too (a schema-valid request is never refused for
# its shape). Patterns use JSON Schema's search semantics, hence the anchors.
_NO_CONTROL = r"^[^\x00-\x1f\x7f]*$"
_NOT_BLANK = r"[^\s\x1c-\x1f]"  # a character Python's strip() keeps (it also strips \x1c-\x1f)
_SEGMENT_CHAR, _NOT_DOT = r"[^/\\\x00-\x1f\x7f]", r"[^/\\\x00-\x1f\x7f.]"
_SEGMENT = rf"(?:{_NOT_DOT}{_SEGMENT_CHAR}*|\.{_NOT_DOT}{_SEGMENT_CHAR}*|\.\.{_SEGMENT_CHAR}+)?"  # never . or ..
_DOCUMENT_NAME = rf"^{_SEGMENT}(?:[/\\]{_SEGMENT})*$"
_BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
Name = Annotated[str, PathParam(pattern=f"^{NAME_PATTERN}$", description=f"A dataset name: {NAME_RULE}.")]


class _Body(BaseModel):
    """Unknown fields and loose types are refused (400), not guessed at."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="after")
    def _encodable(self) -> _Body:
        # JSON may carry lone surrogates ("\\ud800"); no store or index can take them
        for field_name, value in self:
            if isinstance(value, str):
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    raise ValueError(f"{field_name} holds a lone surrogate; send valid Unicode text") from None
        return self


# A vector's numbers: finite in float32 (what the indexes store), and not all zero (no direction).
_FLOAT32_MAX = 3.4028234663852886e38
_FLOAT32_TINY = 1.2e-38  # below float32's smallest normal number a value may round to zero
Number = Annotated[float, Field(ge=-_FLOAT32_MAX, le=_FLOAT32_MAX, json_schema_extra={"anyOf": [
    {"const": 0}, {"minimum": _FLOAT32_TINY}, {"maximum": -_FLOAT32_TINY}]})]
_SOME_NONZERO: dict[str, Any] = {"contains": {"not": {"const": 0}}}


class DocumentIn(_Body):
    """One document: exactly one of `text` or `data_base64`; `vector` for all documents or none."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"oneOf": [
        {"required": ["text"], "properties": {"text": {"type": "string"}, "data_base64": {"type": "null"}}},
        {"required": ["data_base64"], "properties": {"data_base64": {"type": "string"}, "text": {"type": "null"}}},
    ]})

    text: str | None = Field(None, description="The document as a string (stored as its UTF-8 bytes).")
    data_base64: str | None = Field(None, pattern=_BASE64, description="The document's raw bytes, base64 "
                                                                       "(standard alphabet, padded).")
    name: str | None = Field(None, min_length=1, max_length=1024, pattern=_DOCUMENT_NAME,
                             description="Display name; default derived from the bytes. No control characters, "
                                         "no '.' or '..' path segments.")
    media_type: str | None = Field(None, max_length=200, description="How to read the bytes (application/pdf, "
                                   "text/markdown, ...); default text/plain.")
    source_path: str | None = Field(None, max_length=4096, pattern=_NO_CONTROL,
                                    description="Where the client read it from; no control characters. Stored "
                                                "marked as client-supplied (prefixed 'client:'), never taken for "
                                                "a path on the gateway's machine.")
    vector: list[Number] | None = Field(None, min_length=1, json_schema_extra=_SOME_NONZERO,
                                        description="A pre-computed embedding: the document becomes one "
                                                    "passage with this vector (no model needed).")


class IngestIn(_Body):
    documents: list[DocumentIn] = Field(..., min_length=1, max_length=100_000, json_schema_extra={"anyOf": [
        {"items": {"required": ["vector"], "properties": {"vector": {"type": "array"}}}},  # a vector for every one
        {"items": {"properties": {"vector": {"type": "null"}}}},                            # or for none
    ]}, description="The documents; give a vector for every one of them (all of one length: the dataset's "
                    "dimension) or for none.")


# The shape of one --where clause (engine/filters.py); a date that is no calendar day, or pages B < A, are
# refused by the engine with INVALID_ARGUMENT (rules a pattern cannot state).
WHERE_PATTERN = (r"^(name:.*\S.*|type:(pdf|docx|word|html|epub|md|markdown|txt|text|rst|record|jsonl"
                 r"|[A-Za-z0-9.+-]+/[A-Za-z0-9.+-]+)|(after|before):[0-9]{4}-[0-9]{2}-[0-9]{2}"
                 r"|pages:[1-9][0-9]{0,8}(-[1-9][0-9]{0,8})?|ref:[0-9a-fA-F]{6,64}(,[0-9a-fA-F]{6,64})*)$")


def _json_number(value: Any) -> Any:
    """Refuse "5" and true where the schema says integer: lax validation would turn them into 5 and 1."""
    if isinstance(value, (str, bool)):
        raise ValueError("must be a JSON number, not a string or a boolean")
    return value


class QueryIn(_Body):
    """Text, or a vector (which searches dense: not with mode sparse), or both."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"anyOf": [
        {"required": ["text"], "properties": {"text": {"type": "string"}}},
        {"required": ["vector"], "properties": {"vector": {"type": "array"}, "text": {"type": "null"},
                                                "mode": {"enum": ["dense", "hybrid", None]}}},
    ]})

    text: str | None = Field(None, pattern=_NOT_BLANK, description="The question or words to search for (not blank).")
    vector: list[Number] | None = Field(None, min_length=1, json_schema_extra=_SOME_NONZERO,
                                        description="A pre-computed query embedding (searches dense).")
    # lax, so 10.0 (an integer to JSON Schema) is taken; a string or a boolean is not a number at all
    k: Annotated[int | None, BeforeValidator(_json_number)] = Field(
        None, ge=1, le=MAX_OFFSET, strict=False, description="Hits wanted (clamped to the operator's KX_MAX_K).")
    mode: RetrievalMode | None = Field(None, strict=False,  # strict bodies would want an enum object, not "dense"
                                       description="hybrid, dense or sparse (default KX_DEFAULT_MODE).")
    rerank: bool | None = Field(None, description="Apply the MMR pass (default KX_RERANK).")
    expand: bool | None = Field(None, description="Expand the query from a first pass's top passages: RM3 terms "
                                                  "for the sparse list, a Rocchio-moved vector for the dense "
                                                  "list (default KX_QUERY_EXPANSION).")
    where: list[Annotated[str, Field(max_length=1000, pattern=WHERE_PATTERN)]] | None = Field(
        None, max_length=64,
        description="Filters, all of which must hold (two of one kind: either): name:GLOB (document name or "
                    "source path), type:pdf, after:YYYY-MM-DD, before:YYYY-MM-DD (a calendar day), pages:A-B "
                    "(1 <= A <= B), ref:REF[,REF] (6 to 64 hex digits). Applied inside both retrievers, before "
                    "fusion.")
    versions: VersionView | None = Field(None, strict=False,
                                         description="latest (default): each lineage's current version only; "
                                                     "all: every stored version.")


class AgentRunIn(_Body):
    goal: str = Field(..., min_length=1, max_length=4000, pattern=_NOT_BLANK,
                      description="What the agent should find out (not blank).")
    dataset: str | None = Field(None, pattern=f"^{NAME_PATTERN}$",
                                description="The dataset to research; none: a plain chat agent, if the "
                                            "gateway has a chat model (KX_AGENT_CHAT_URL).")
    max_steps: int | None = Field(None, ge=1, le=MAX_OFFSET, strict=False,
                                  description="Most searches (never above the gateway's KX_AGENT_MAX_STEPS).")


class ErrorOut(BaseModel):
    code: str
    message: str


class HitOut(BaseModel):
    """One passage of an answer: where it lies (chunk, characters, pages, section) and why it ranks where it does."""

    rank: int
    score: float = Field(description="The mode's relevance: fused RRF (hybrid), cosine (dense) or BM25 (sparse).")
    text: str
    passage_ref: str
    document_ref: str
    document_name: str = Field(description="A watched folder's documents are named by their path in it "
                                           "(guide/index); a file's by its name without extension.")
    document_title: str | None = Field(description="The document's own title (metadata, front matter), if any.")
    source_path: str | None = Field(description="The file the document was read from, if it came from one.")
    chunk: str = Field(description='"[chunk i/N]"')
    chunk_index: int
    chunk_count: int
    char_start: int = Field(description="Where the passage begins in the document's stored text.")
    char_end: int
    page_start: int | None = Field(description="First page of the passage (1-based); null without pages.")
    page_end: int | None = Field(description="Last page of the passage; null without pages.")
    section: str | None = Field(description='Heading path at the passage\'s start, e.g. "3 Model › 3.1 LRS '
                                            'model"; null when no heading precedes it.')
    dense_rank: int | None
    dense_score: float | None
    sparse_rank: int | None
    sparse_score: float | None
    fused_score: float
    fused_rank: int
    mmr_moved: int
    duplicate_of: str | None = Field(
        default=None, description="MMR: the passage ref of a higher hit this one nearly repeats, else null.")
    answer_span: tuple[int, int] | None = Field(
        default=None, description="[start, end) in the document's text of the sentence or two of the passage "
                                  "that best answer the query; null without query text.")
    version: int | None = Field(default=None, description="Which version of its lineage (1 = first ingested).")
    superseded_by: str | None = Field(default=None, description="The ref of the lineage's current version when "
                                                                "this hit is from an older one (versions=all).")
    sentence_rank: int | None = Field(
        default=None, description="Hybrid: the passage's rank among the best fused passages by its best sentence "
                                  "(the third RRF list); null outside that head or in a single-retriever mode.")
    sentence_score: float | None = Field(default=None, description="Hybrid: that best sentence's score.")
    lead_ratio: float | None = Field(
        default=None, description="Hybrid: set on sparse's best passage when its BM25 score is at least 1.4 times "
                                  "the runner-up's (this ratio); RRF then counts it once more, at rank 1.")


class QueryOut(BaseModel):
    dataset: str
    query: str | None
    mode: str
    rerank: bool
    k: int
    requested_k: int
    clamped: bool
    notes: list[str]
    timings_ms: dict[str, float]
    dense_coverage: float = Field(
        default=1.0, ge=0.0, le=1.0,
        description="Share of the dataset's passages dense search covered: below 1 while an ingest's embedding "
                    "stage is still working through its backlog (sparse covers every committed passage).")
    expanded_terms: list[str] | None = Field(
        default=None, description="With expand: the terms the first pass's top passages added to the sparse "
                                  "query, best first; null when the query was not expanded.")
    hits: list[HitOut]


class DocumentTextOut(BaseModel):
    ref: str
    text: str = Field(description="The text passages' character ranges index into, as stored at ingest.")


_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut} for code in (400, 401, 403, 404, 412, 413, 500)
}


# -- the guard: token and size, before the body ----------------------------------------


class _Guard:
    """ASGI middleware: bearer token, then size, then the whole body read and counted.

    Pure ASGI (not BaseHTTPMiddleware) so it can answer before a single body
    byte is read, and so a chunked body is counted as it streams.
    """

    def __init__(self, app: Any, token: str | None, max_bytes: int, allow_local: bool,
                 health_needs_token: bool, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy
        self.token = token.encode() if token else None
        self.max_bytes = max_bytes
        self.allow_local = allow_local
        self.health_needs_token = health_needs_token

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        server = scope.get("server")
        port = int(server[1]) if server and server[1] else None
        refusal = _repeated_header(scope, (b"host", b"origin"))
        refusal = refusal or self.policy.check_host(_header(scope, b"host"), port)
        origin = _header(scope, b"origin")
        refusal = refusal or self.policy.check_origin(origin, _header(scope, b"sec-fetch-site"), port)
        if refusal is not None:
            await _send_error(send, refusal)
            return
        # CORS headers only for an origin the operator named; the gateway's own pages need none
        cors = ([(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]
                if origin is not None and self.policy.origin_allowed(origin) else [])
        if cors and scope.get("method") == "OPTIONS" and _header(scope, b"access-control-request-method"):
            await _send_error(send, None, cors + _CORS_PREFLIGHT)  # a preflight carries no token
            return
        if not self._admitted(scope):
            await _send_error(send, KxError(Status.UNAUTHENTICATED,
                                            "missing or wrong bearer token; send 'Authorization: Bearer <token>' "
                                            "with the token from $KX_HOME/gateway.token on the gateway's machine"),
                              cors)
            return
        declared = _header(scope, b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await _send_error(send, invalid("Content-Length is not a number"), cors)
                return
            if size > self.max_bytes:
                await _send_error(send, self._too_large(f"{size:,} bytes"), cors)
                return
        chunks, total = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left mid-upload: nothing reached the engine
            body = message.get("body", b"")
            total += len(body)
            if total > self.max_bytes:
                await _send_error(send, self._too_large(f"more than {self.max_bytes:,} bytes"), cors)
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
            if message["type"] == "http.response.start":
                started = True
                if cors:
                    message = {**message, "headers": [*message.get("headers", []), *cors]}
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
                                                                 "gateway's log and report it"), cors)

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


def _repeated_header(scope: dict, names: Sequence[bytes]) -> KxError | None:
    """PERMISSION_DENIED when one of `names` comes more than once: only one of them could be checked."""
    for name in names:
        if sum(1 for key, _value in scope.get("headers", []) if key.lower() == name) > 1:
            shown = name.decode().capitalize()
            return KxError(Status.PERMISSION_DENIED,
                           f"the request carries more than one {shown} header; the gateway checks exactly one "
                           f"(a second could name another site). Send a single {shown}")
    return None


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


async def _send_error(send: Any, error: KxError | None, extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    """Answer `error` as {code, message} and close; None answers an empty 204 (a CORS preflight)."""
    body = b"" if error is None else json.dumps(error.to_dict()).encode()
    headers = [(b"content-length", str(len(body)).encode()), (b"connection", b"close"), *extra]
    if error is not None:
        headers.insert(0, (b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": 204 if error is None else error.status.http_status,
                "headers": headers})
    await send({"type": "http.response.body", "body": body})


# -- the app ---------------------------------------------------------------------------


def create_app(engine: Engine, token: str | None, *, allow_local: bool = False,
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
        elif exc.status_code == 405:
            message = f"{_request.method} is not served on {_request.url.path}; see /openapi.json for its methods"
        # the HTTP status is always the code's, so a client can read either (405 reads as 400)
        return JSONResponse({"code": status.name, "message": message}, status_code=status.http_status)

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

    @app.post(f"{API_PREFIX}/datasets/{{name}}/documents", tags=["datasets"], responses=_ERRORS)
    def ingest(name: Name, body: IngestIn) -> dict[str, Any]:
        validate_name(name)
        docs, vectors = _documents(body, engine.settings.max_document_bytes)
        return engine.ingest(name, docs, vectors).to_dict()

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
        result = engine.query(name, body.text, vector=body.vector, k=body.k, mode=body.mode, rerank=body.rerank,
                              where=body.where, versions=body.versions, expand=body.expand)
        # plain json.dumps of plain data: FastAPI's jsonable_encoder walk of
        # every hit's fields cost more than the engine's own fusion and MMR
        return JSONResponse(result.to_dict())

    policy = HostPolicy(
        bind_host,
        engine.settings.gateway_allowed_hosts if allowed_hosts is None else allowed_hosts,
        engine.settings.gateway_allowed_origins if allowed_origins is None else allowed_origins,
    )
    @app.post(f"{API_PREFIX}/agent/runs", tags=["agent"], responses=_ERRORS, response_class=JSONResponse)
    def agent_run(body: AgentRunIn) -> JSONResponse:
        if body.dataset is not None:
            validate_name(body.dataset)
        # bounded by the gateway's own KX_AGENT_* settings; runs in the threadpool like every engine call
        return JSONResponse(engine.run_agent(body.goal, body.dataset, max_steps=body.max_steps).to_dict())

    app.add_middleware(_Guard, token=token, max_bytes=limit, allow_local=allow_local,
                       health_needs_token=health_needs_token, policy=policy)
    return app


def guard(app: Any, token: str | None, *, max_bytes: int, bind_host: str | None = None,
          allowed_hosts: Sequence[str] = (), allowed_origins: Sequence[str] = (), allow_local: bool = False) -> Any:
    """Any ASGI app behind the gateway's Host, Origin, token and size checks (`kx mcp --http` serves through it).

    Unlike `create_app`, every path needs the token: there is no health route to leave open.
    """
    return _Guard(app, token=token, max_bytes=max_bytes, allow_local=allow_local, health_needs_token=True,
                  policy=HostPolicy(bind_host, allowed_hosts, allowed_origins))


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
        if item.name is not None:
            check_document_name(item.name, label)
        if item.source_path is not None:
            check_source_path(item.source_path, label)
        name = item.name or f"{'text' if item.text is not None else 'bytes'}-{hashlib.sha256(data).hexdigest()[:12]}"
        error = None
        if len(data) > max_bytes:
            error = invalid(f"{name} is {len(data):,} bytes, over the {max_bytes:,}-byte limit "
                            "(KX_MAX_DOCUMENT_BYTES); split it or raise the limit")
        docs.append(DocumentInput(name=name, data=data, source_path=client_supplied(item.source_path),
                                  media_type=media, error=error))
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
