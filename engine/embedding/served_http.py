"""The wire to a served embedding model: POST {base}/embeddings, OpenAI's shape, over httpx.

One `EmbeddingsClient` serves every base URL of one served model. Each
request goes to the URL with the fewest requests in flight among those not
found down; a URL that refuses connections is down for DOWN_SECONDS and its
request goes to another. A timeout, a dropped connection or an answer of 429
or 5xx is retried with backoff (0.5 s doubling to 8 s, or the server's
Retry-After), on any URL, up to `retries` times; then the model is
UNAVAILABLE, naming the URLs and what they answered. An answer that can never
succeed (401, 404, a model the server does not serve, vectors of the wrong
shape) is a FAILED_PRECONDITION at once, saying what to fix.

The key is read from the environment (KX_EMBED_API_KEY) by the caller and
sent as a bearer token: never from a flag or a dataset file.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..config import ENV
from ..errors import KxError, Status, precondition

DOWN_SECONDS = 10.0
_BACKOFF_FIRST, _BACKOFF_MAX = 0.5, 8.0
_RETRIED = {408, 425, 429, 500, 502, 503, 504}
API_KEY_ENV = "KX_EMBED_API_KEY"


@dataclass
class _Url:
    base: str
    in_flight: int = 0
    down_until: float = 0.0
    answered: int = 0
    seconds: float = 0.0  # summed over answered requests: `kx info` and the benchmark's per-URL share
    last_error: str = ""


@dataclass
class _Attempts:
    left: int
    tried: list[str] = field(default_factory=list)


class EmbeddingsClient:
    """Several base URLs of one served model behind one `embed(texts)` call (thread-safe)."""

    def __init__(self, model: str, urls: Sequence[str], *, key: str = "", timeout: float = 60.0,
                 retries: int = 4, connections: int = 8, transport: Any = None) -> None:
        import httpx  # deferred: only a served model needs it

        self.model = model
        self._urls = [_Url(u.rstrip("/")) for u in urls]
        self._timeout = timeout
        self._retries = retries
        self._lock = threading.Lock()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        self._http = httpx.Client(headers=headers, limits=limits, transport=transport, trust_env=False)

    @property
    def urls(self) -> list[str]:
        return [u.base for u in self._urls]

    def embed(self, texts: Sequence[str], only: str | None = None,
              stop: threading.Event | None = None) -> list[list[float]]:
        """The server's vectors for `texts`, in order (as it sent them: not yet checked or normalised).

        `only`: ask this base URL and no other (the probe of one URL). `stop` set: no retry, no backoff
        (the caller has given up on this batch).
        """
        attempts = _Attempts(self._retries + 1)
        while True:
            if stop is not None and stop.is_set():
                raise Abandoned
            url = self._pick(only)
            if url is None:
                raise self._unavailable(attempts, only)
            attempts.left -= 1
            attempts.tried.append(url.base)
            pause = 0.0
            try:
                return self._post(url, texts)
            except _Retry as retry:
                url.last_error = retry.reason
                if attempts.left <= 0:
                    raise self._unavailable(attempts, only) from None
                pause = retry.wait(len(attempts.tried))
            except _Down as down:
                url.last_error = down.reason
                with self._lock:
                    url.down_until = time.monotonic() + DOWN_SECONDS
                if only is not None or attempts.left <= 0:
                    raise self._unavailable(attempts, only) from None
            finally:
                with self._lock:
                    url.in_flight -= 1
            if stop is not None:
                stop.wait(pause)  # not counted in flight: another request may use the URL meanwhile
            else:
                time.sleep(pause)

    def models(self, base: str) -> list[dict[str, Any]]:
        """The server's `GET {base}/models` entries; [] when it has none or does not answer (metadata only)."""
        try:
            response = self._http.get(f"{base}/models", timeout=min(self._timeout, 5.0))
            data = response.json().get("data") if response.is_success else None
        except Exception:  # any failure: the metadata is a nicety, the probe decides
            return []
        return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []

    def timings(self) -> dict[str, dict[str, float]]:
        """Per base URL: requests answered and their mean latency in ms."""
        with self._lock:
            return {u.base: {"requests": u.answered,
                             "mean_ms": round(1000.0 * u.seconds / u.answered, 1) if u.answered else 0.0}
                    for u in self._urls}

    def close(self) -> None:
        self._http.close()

    def _pick(self, only: str | None) -> _Url | None:
        """The URL to ask next (counted in flight), or None when every URL is down."""
        now = time.monotonic()
        with self._lock:
            live = [u for u in self._urls if (only is None or u.base == only) and (only or u.down_until <= now)]
            if not live:
                return None
            url = min(live, key=lambda u: u.in_flight)
            url.in_flight += 1
            return url

    def _post(self, url: _Url, texts: Sequence[str]) -> list[list[float]]:
        import httpx

        started = time.monotonic()
        endpoint = f"{url.base}/embeddings"
        try:
            response = self._http.post(endpoint, json={"model": self.model, "input": list(texts)},
                                       timeout=httpx.Timeout(self._timeout, connect=min(self._timeout, 10.0)))
        except httpx.ConnectError as exc:
            raise _Down(f"connection refused or no route ({type(exc).__name__})") from None
        except httpx.TimeoutException:
            raise _Retry(f"no answer within {self._timeout:g} s ({ENV.embed_endpoint_timeout})") from None
        except httpx.TransportError as exc:
            raise _Retry(f"the connection failed ({type(exc).__name__})") from None
        if response.status_code in _RETRIED:
            raise _Retry(f"HTTP {response.status_code}", _retry_after(response.headers.get("retry-after")))
        if not response.is_success:
            raise _refused(endpoint, self.model, response.status_code, response.text)
        vectors = _vectors(endpoint, response, len(texts))
        with self._lock:
            url.answered += 1
            url.seconds += time.monotonic() - started
        return vectors

    def _unavailable(self, attempts: _Attempts, only: str | None) -> KxError:
        with self._lock:
            named = [u for u in self._urls if only is None or u.base == only]
            said = "; ".join(f"{u.base}/embeddings: {u.last_error or 'down'}" for u in named)
        tries = len(attempts.tried)
        return KxError(Status.UNAVAILABLE,
                       f"the served embedding model {self.model!r} is unavailable ({said}; {tries} request(s) "
                       f"tried); start or fix the server, or point {ENV.embed_model} at one that answers")


class Abandoned(Exception):
    """The caller stopped waiting for this batch (a stop request, another batch's failure)."""


class _Retry(Exception):
    def __init__(self, reason: str, after: float | None = None) -> None:
        super().__init__(reason)
        self.reason, self.after = reason, after

    def wait(self, attempt: int) -> float:
        if self.after is not None:
            return min(self.after, 60.0)
        return min(_BACKOFF_FIRST * 2 ** max(attempt - 1, 0), _BACKOFF_MAX)


class _Down(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _retry_after(value: str | None) -> float | None:
    try:
        return max(float(value), 0.0) if value else None
    except ValueError:  # an HTTP date: back off by the clock instead
        return None


def _refused(endpoint: str, model: str, status: int, body: str) -> KxError:
    said = body.strip().replace("\n", " ")[:200]
    if status in (401, 403):
        fix = f"set the environment variable {API_KEY_ENV} to a key the server accepts"
    elif status == 404:
        fix = ("check the base URL: kx calls BASE_URL/embeddings (Ollama, vLLM, TEI and LM Studio: "
               "http://HOST:PORT/v1; infinity: http://HOST:PORT with no /v1)")
    elif status == 413:
        fix = f"lower {ENV.embed_batch_size}"
    else:
        fix = f"check that the server serves the embedding model {model!r} (its /models list names it)"
    return precondition(f"{endpoint} refused the embedding request (HTTP {status}: {said!r}); {fix}")


def _vectors(endpoint: str, response: Any, count: int) -> list[list[float]]:
    """The answer's vectors in input order; FAILED_PRECONDITION when it is not an OpenAI embeddings answer."""
    try:
        data = response.json()["data"]
        rows = sorted(data, key=lambda d: int(d.get("index", 0))) if all("index" in d for d in data) else data
        vectors = [row["embedding"] for row in rows]
        if len(vectors) != count or not all(isinstance(v, list) and v for v in vectors):
            raise ValueError
    except (ValueError, KeyError, TypeError, AttributeError):
        raise precondition(f"{endpoint} answered without {count} embedding(s) in OpenAI's shape "
                           "({\"data\": [{\"embedding\": [...], \"index\": i}]}); is it an OpenAI-compatible "
                           "embeddings endpoint? (a base64 answer is not asked for and not read)") from None
    return vectors
