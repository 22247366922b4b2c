"""Talking to Milvus without letting pymilvus speak to the user: connecting, and its failures as KxError.

Every call into pymilvus goes through `MilvusConnection.call`, which passes
the operator's timeout (pymilvus otherwise retries a vanished server 75
times with back-off: minutes of silence) and turns what comes back into a
`KxError` naming the URI: connection refused and timeouts are UNAVAILABLE,
a rejected token UNAUTHENTICATED, a refused permission PERMISSION_DENIED, a
milvus-lite .db held by another process FAILED_PRECONDITION. pymilvus and
milvus-lite log each failed call with a traceback at ERROR level; those
loggers are silenced here, since the KxError says it all.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..config import ENV
from ..errors import KxError, Status

T = TypeVar("T")

_AUTH_WORDS = re.compile(r"auth|credential|password|unauthenticated|token|api key", re.IGNORECASE)
_TIMEOUT_WORDS = re.compile(r"deadline|timed? ?out|timeout", re.IGNORECASE)
_UNAVAILABLE_WORDS = re.compile(r"fail connecting|unavailable|connection refused|connect failed|server is "
                                r"not ready|failed to connect|channel", re.IGNORECASE)


def redacted(uri: str) -> str:
    """The URI as messages and `kx info` show it: any user:password@ part masked."""
    return re.sub(r"(://)[^/@]+@", r"\1***@", uri)


def is_local(uri: str) -> bool:
    return not uri.startswith(("http://", "https://", "tcp://", "unix:"))


def _quiet_loggers() -> None:
    for name in ("pymilvus", "milvus_lite", "grpc"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.CRITICAL + 1)
        logger.propagate = False


def lite_lock_held(path: str) -> bool:
    """True when another process holds this milvus-lite folder (its LOCK file is flocked)."""
    from milvus_lite.server_manager import server_manager_instance

    if os.path.abspath(path) in getattr(server_manager_instance, "_servers", {}):
        return False  # this process holds it: pymilvus reuses the running in-process server
    lock = Path(path) / "LOCK"
    if not lock.exists():
        return False
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def translate(exc: BaseException, uri: str) -> KxError:
    """What a pymilvus / gRPC failure means for the user, with the URI and what to do."""
    import grpc

    shown = redacted(uri)
    rpc = _rpc_error_in(exc, grpc.RpcError)   # pymilvus wraps a failed handshake, keeping the gRPC error as cause
    code = rpc.code() if rpc is not None and callable(getattr(rpc, "code", None)) else None
    detail = rpc.details() if rpc is not None and callable(getattr(rpc, "details", None)) else None
    if code in (None, grpc.StatusCode.UNAVAILABLE):
        detail = None   # pymilvus's own message names the address; gRPC's is a socket error string
    message = str(detail or getattr(exc, "message", None) or exc).strip() or type(exc).__name__
    message = message.splitlines()[0][:300]
    names = (code.name if code is not None else "", message)
    if code == grpc.StatusCode.UNAUTHENTICATED or (code is None and _AUTH_WORDS.search(message)):
        return KxError(Status.UNAUTHENTICATED, f"Milvus at {shown} refused the credentials ({message}); "
                                               f"check {ENV.milvus_token} (user:password or an API key)")
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return KxError(Status.PERMISSION_DENIED, f"Milvus at {shown} refused the operation ({message}); "
                                                 "grant this user the privilege, or use another user")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED or _TIMEOUT_WORDS.search(" ".join(names)):
        return KxError(Status.UNAVAILABLE, f"Milvus at {shown} did not answer in time ({message}); check that "
                                           f"it runs and is reachable, or raise {ENV.milvus_timeout}")
    if code == grpc.StatusCode.UNAVAILABLE or _UNAVAILABLE_WORDS.search(message) or isinstance(exc, OSError):
        return KxError(Status.UNAVAILABLE, f"cannot reach Milvus at {shown} ({message}); start it, or point "
                                           f"{ENV.milvus_uri} at a running one")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return KxError(Status.RESOURCE_EXHAUSTED, f"Milvus at {shown} is out of room ({message}); "
                                                  "send smaller batches or give it more memory or disk")
    return KxError(Status.INTERNAL, f"Milvus at {shown} failed ({message}); "
                                    "run with KX_DEBUG=1 and report it if it persists")


def _rpc_error_in(exc: BaseException, kind: type) -> Any:
    """The first `kind` (grpc.RpcError) in exc's chain of causes, or None."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 10:
        if isinstance(current, kind):
            return current
        current = current.__cause__ or current.__context__
        seen += 1
    return None


class MilvusConnection:
    """One pymilvus client, every call timed out and translated."""

    def __init__(self, uri: str, token: str, timeout: float, database: str = "default") -> None:
        _quiet_loggers()
        self.uri = uri
        self.timeout = timeout
        try:
            from pymilvus import MilvusClient
        except ImportError:
            raise KxError(Status.FAILED_PRECONDITION, "backend=milvus needs pymilvus and milvus-lite; install them "
                                                      "with: pip install -c constraints.txt -e '.[milvus]'") from None
        _quiet_loggers()   # again: importing pymilvus configures its logger (WARNING, to stderr) over ours
        target = uri
        if is_local(uri):
            target = self._local_target(uri)
        try:
            self.client = MilvusClient(uri=target, token=token or "", timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a KxError with the URI
            raise self._connect_error(exc) from None
        if database != "default":
            if database not in self.call("list_databases"):
                try:
                    self.call("create_database", database)
                except KxError:
                    if database not in self.call("list_databases"):  # another process may have just made it
                        raise
            self.call("use_database", database)

    def _local_target(self, path: str) -> str:
        folder = Path(path)
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise KxError(Status.FAILED_PRECONDITION, f"cannot create the folder of milvus-lite file {path} "
                                                      f"({exc.strerror}); point {ENV.milvus_uri} elsewhere") from None
        if lite_lock_held(path):
            raise self._held(path)
        return path

    def _held(self, path: str) -> KxError:
        return KxError(Status.FAILED_PRECONDITION,
                       f"the milvus-lite file {path} is open in another process (milvus-lite serves one process "
                       "at a time); stop that process, or serve the file with `milvus-lite server --data-dir "
                       f"{path} --host 127.0.0.1` and set {ENV.milvus_uri}=http://127.0.0.1:19530 in every process")

    def _connect_error(self, exc: BaseException) -> KxError:
        if is_local(self.uri) and lite_lock_held(self.uri):
            return self._held(self.uri)
        if is_local(self.uri):
            return KxError(Status.FAILED_PRECONDITION, f"milvus-lite could not open {self.uri} "
                                                       f"({getattr(exc, 'message', exc)}); check the path")
        return translate(exc, self.uri)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """`client.<method>(*args, **kwargs)` under the timeout; failures as KxError."""
        kwargs.setdefault("timeout", self.timeout)
        try:
            return getattr(self.client, method)(*args, **kwargs)
        except KxError:
            raise
        except Exception as exc:  # noqa: BLE001 - pymilvus raises MilvusException, grpc.RpcError, OSError...
            raise translate(exc, self.uri) from None

    def load(self, collection: str) -> None:
        """Load `collection` for searching. On a milvus-lite file, a load that fails on a cut-short index
        sidecar (the process writing it was killed) drops the collection's sidecars and loads again."""
        try:
            self.call("load_collection", collection)
        except KxError as error:
            # INTERNAL only: a timeout or an unreachable server says nothing about the files, and dropping the
            # sidecars of a large collection costs a full index rebuild.
            if error.status is not Status.INTERNAL or not is_local(self.uri):
                raise
            from .lite_sidecars import drop_index_sidecars

            if not drop_index_sidecars(self.uri, collection):
                raise
            self.call("load_collection", collection)

    def guarded(self, fn: Callable[[], T]) -> T:
        """Run `fn` (which touches the client directly, e.g. an iterator) with failures translated."""
        try:
            return fn()
        except KxError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise translate(exc, self.uri) from None

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing a dead connection is not worth a message
            self.client.close()
