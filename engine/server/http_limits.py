"""Connection limits uvicorn has no setting for: a header-read deadline and a per-client connection cap.

`kx serve` runs uvicorn with `http=guarded_protocol(...)`, a subclass of
uvicorn's h11 protocol that adds two limits before any request reaches the
gateway's app (engine/server/gateway.py):

- **headers within `header_timeout` seconds**: from the moment a connection
  opens, and again from the end of each response on a kept-alive one, the
  next request's headers must be complete in time, or the connection is
  closed. uvicorn's keep-alive timeout only covers a connection that sends
  nothing; one byte every few seconds ("slowloris") kept it open for ever.
- **at most `per_client` open connections from one address**: one more is
  answered `503 {"code": "UNAVAILABLE", ...}` and closed at once, so one
  client cannot hold every socket the server has.

uvicorn is imported when `guarded_protocol` is called, never at module import.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

from ..errors import KxError, Status

DEFAULT_HEADER_TIMEOUT = 10.0  # seconds for a request's headers to arrive whole
DEFAULT_PER_CLIENT = 64        # open connections from one address (the soak benchmark's 32 clients fit twice)


def _refusal(error: KxError) -> bytes:
    body = json.dumps(error.to_dict()).encode()
    head = (f"HTTP/1.1 {error.status.http_status} Service Unavailable\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode("latin-1") + body


def guarded_protocol(header_timeout: float = DEFAULT_HEADER_TIMEOUT, per_client: int = DEFAULT_PER_CLIENT) -> type:
    """uvicorn's h11 protocol class with the two limits above (a fresh class, with its own counts)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    open_from: Counter[str] = Counter()  # the event loop's thread only: no lock needed

    class GuardedH11Protocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._kx_host = str(self.client[0]) if self.client else ""
            self._kx_deadline: asyncio.TimerHandle | None = None
            self._kx_refused = False
            open_from[self._kx_host] += 1
            if open_from[self._kx_host] > per_client:
                self._kx_refused = True
                transport.write(_refusal(KxError(
                    Status.UNAVAILABLE, f"{open_from[self._kx_host] - 1} connections from {self._kx_host} are "
                                        f"open already, the gateway's most from one client ({per_client}); "
                                        "reuse a connection (keep-alive) or close some")))
                # closed a moment later, not at once: a request still arriving at a closed socket would
                # make the kernel reset the connection before the client could read the answer
                self._kx_deadline = self.loop.call_later(1.0, transport.close)
                return
            self._kx_arm()

        def _kx_arm(self) -> None:
            self._kx_cancel()
            self._kx_deadline = self.loop.call_later(header_timeout, self._kx_too_slow)

        def _kx_cancel(self) -> None:
            if self._kx_deadline is not None:
                self._kx_deadline.cancel()
                self._kx_deadline = None

        def _kx_too_slow(self) -> None:
            self._kx_deadline = None
            if not self.transport.is_closing():
                self.logger.warning("closing a connection from %s: its request headers took over %g s",
                                    self._kx_host, header_timeout)
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            if self._kx_refused:
                return  # answered 503 already; whatever the client sends is dropped
            cycle = self.cycle
            super().data_received(data)
            if self.cycle is not None and self.cycle is not cycle:  # a request's headers are complete
                self._kx_cancel()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._kx_arm()  # the next request on this connection gets the same deadline

        def connection_lost(self, exc: Exception | None) -> None:
            self._kx_cancel()
            open_from[self._kx_host] -= 1
            if open_from[self._kx_host] <= 0:
                del open_from[self._kx_host]
            super().connection_lost(exc)

    return GuardedH11Protocol

