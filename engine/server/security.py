"""What `kx serve` and `kx mcp --http` let in, checked before any byte of a body is read: the Host header
(DNS rebinding), the Origin header, the bearer token and the declared size (`HostPolicy`, the `_Guard`
middleware, `guard`), and the gateway's token file.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import os
import secrets
from pathlib import Path
from typing import Any, Sequence

from ..config import ENV
from ..errors import KxError, Status, invalid, precondition
from ..text.kx_files import TOKEN_FILE
from .client import read_token, token_is_a_folder, token_path

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
    if path.is_dir():  # checked first: a folder's mode (755) would read as "readable by others"
        raise token_is_a_folder(home)
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
                 allowed_origins: Sequence[str] = (), command: str = "kx serve") -> None:
        self.command = command  # the command the operator restarts with a setting: its own, in every message
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
                       f"this machine's, the operator can start `{self.command}` with it in "
                       f"{ENV.gateway_allowed_hosts}")

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
                       f"origin in, start `{self.command}` with {ENV.gateway_allowed_origins} set to it")

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
        refusal = _repeated_header(scope, (b"host", b"origin", b"authorization"))
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
                                            f"with the token from ${ENV.home}/gateway.token on the gateway's machine"),
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
        whole = await self._body(scope, receive, send, cors)
        if whole is None:
            return
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

    async def _body(self, scope: dict, receive: Any, send: Any, cors: list[tuple[bytes, bytes]]) -> bytes | None:
        """The whole request body, counted as it streams; None once refused (answered) or the client left."""
        chunks, total = [], 0
        started_at = asyncio.get_running_loop().time()
        while True:
            try:  # the body keeps arriving, or the connection is given back (a slow body held one ~46 s)
                message = await asyncio.wait_for(receive(), body_deadline(started_at, total))
            except TimeoutError:
                log.warning("closing a request from %s: its body came slower than the gateway reads bodies "
                            "(%s bytes in)", (scope.get("client") or ("?",))[0], f"{total:,}")
                await _send_error(send, _too_slow(total), cors)
                return None
            if message["type"] == "http.disconnect":
                return None  # the client left mid-upload: nothing reached the engine
            body = message.get("body", b"")
            total += len(body)
            if total > self.max_bytes:
                await _send_error(send, self._too_large(f"more than {self.max_bytes:,} bytes"), cors)
                return None
            chunks.append(body)
            if not message.get("more_body", False):
                return b"".join(chunks)

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
                       f"({ENV.max_request_bytes}); send fewer documents per request or ask the operator to raise it")


_WHY_ONE = {b"host": "a second could name another site", b"origin": "a second could name another site",
            b"authorization": "which one a proxy or a server reads differs, so the one checked may not be the one "
                              "acted on"}


# A request's body must arrive at BODY_GRACE_SECONDS plus one second per BODY_MIN_RATE bytes it has sent so
# far: a legitimate upload (64 MiB at 256 KiB/s and up) never waits on it, a trickle is cut off in seconds.
BODY_GRACE_SECONDS = 10.0
BODY_MIN_RATE = 256 * 1024


def body_deadline(started_at: float, received: int) -> float:
    """Seconds left for the next piece of a body begun at `started_at` (the loop's clock), `received` bytes in."""
    allowed = BODY_GRACE_SECONDS + received / BODY_MIN_RATE
    return max(0.0, started_at + allowed - asyncio.get_running_loop().time())


def _too_slow(received: int) -> KxError:
    return invalid(f"the request body arrived too slowly ({received:,} bytes; the gateway waits "
                   f"{BODY_GRACE_SECONDS:g} s plus a second per {BODY_MIN_RATE // 1024} KiB); send the whole body "
                   "at once, or fewer documents per request")


def _repeated_header(scope: dict, names: Sequence[bytes]) -> KxError | None:
    """PERMISSION_DENIED when one of `names` comes more than once: only one of them could be checked."""
    for name in names:
        if sum(1 for key, _value in scope.get("headers", []) if key.lower() == name) > 1:
            shown = name.decode().capitalize()
            return KxError(Status.PERMISSION_DENIED,
                           f"the request carries more than one {shown} header; the gateway checks exactly one "
                           f"({_WHY_ONE[name]}). Send a single {shown}")
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


def guard(app: Any, token: str | None, *, max_bytes: int, bind_host: str | None = None,
          allowed_hosts: Sequence[str] = (), allowed_origins: Sequence[str] = (), allow_local: bool = False,
          command: str = "kx serve") -> Any:
    """Any ASGI app behind the gateway's Host, Origin, token and size checks (`kx mcp --http` serves through it).

    Unlike `create_app`, every path needs the token: there is no health route to leave open.
    """
    return _Guard(app, token=token, max_bytes=max_bytes, allow_local=allow_local, health_needs_token=True,
                  policy=HostPolicy(bind_host, allowed_hosts, allowed_origins, command))


