"""A served embedding model: `openai:MODEL@BASE_URL[,BASE_URL...]` (Ollama, TEI, vLLM, infinity, a hosted API).

`served_card` describes it by asking: every base URL embeds the fixed probe
sentences (engine/embedding/probe.py), which gives the dimension, the
latency and the sketch that is the model's identity in a fingerprint; the
URLs must agree (one model behind them all), and a URL that does not answer
is left out for this process. `ServedEmbedder` embeds through
engine/embedding/served_http.py with several requests in flight across the
URLs; its vectors are checked (shape, finite, non-zero) and made unit length
as kx's own are. What leaves the machine: the texts being embedded (the
passages at ingest, the query text at query time) and the probe sentences,
sent to the URLs named, with the key from KX_EMBED_API_KEY when it is set.
"""

from __future__ import annotations

import os
import queue
import re
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..config import ENV
from ..errors import KxError, Status, precondition
from ..setting_values import served_model
from .cards import ModelCard
from .probe import PROBES, same_sketch, served_model_id, sketch, sketch_distance
from .runtime import ProgressFn
from .served_http import API_KEY_ENV, EmbeddingsClient

if TYPE_CHECKING:
    from ..config import Settings

RECHECK_SECONDS = 60.0
_EMBEDDER_NAME = re.compile(r"embed|minilm|mpnet|bge|gte|e5|nomic|arctic|jina|sentence|retriev|rerank", re.I)
_CHAT_NAME = re.compile(r"chat|instruct|llama|mistral|mixtral|qwen|gemma|phi|gpt|deepseek|falcon|vicuna|hermes|"
                        r"command|claude|olmo|granite", re.I)


def client_for(model: str, urls: Sequence[str], settings: Settings) -> EmbeddingsClient:
    return EmbeddingsClient(model, urls, key=os.environ.get(API_KEY_ENV, "").strip(),
                            timeout=settings.embed_endpoint_timeout, retries=settings.embed_endpoint_retries,
                            connections=max(len(urls) * settings.embed_endpoint_requests, 1))


def served_card(settings: Settings) -> ModelCard:
    """Ask every base URL for the probe sentences' vectors: the model's card; UNAVAILABLE when none answers."""
    parsed = served_model(settings.embed_model)
    assert parsed is not None  # the caller checked the setting names a served model
    model, urls = parsed
    client = client_for(model, urls, settings)
    try:
        answered: dict[str, tuple[np.ndarray, float]] = {}
        failures: list[KxError] = []
        for url in urls:
            started = time.perf_counter()
            try:
                rows = unit_rows(client.embed(PROBES, only=url), f"{url}/embeddings", None)
            except KxError as exc:
                if exc.status is not Status.UNAVAILABLE:
                    raise
                failures.append(exc)
                continue
            answered[url] = rows, round((time.perf_counter() - started) * 1000.0, 1)
        if not answered:
            raise KxError(Status.UNAVAILABLE, " ".join(f.message for f in failures) +
                          "; sparse (keyword) search still answers: --mode sparse")
        first = next(iter(answered))
        vectors, latency = answered[first]
        mine = sketch(vectors)
        for url, (rows, _ms) in answered.items():
            theirs = sketch(rows) if rows.shape == vectors.shape else ""
            if not same_sketch(mine, theirs):
                raise precondition(
                    f"{first} and {url} answer with different vectors for model {model!r} (probe sketch "
                    f"distance {sketch_distance(mine, theirs):.2f}); every base URL of one served model must "
                    f"serve the same model: fix the server, or drop that URL from {ENV.embed_model}")
        chat, why = chat_signals(model, client.models(first))
    finally:
        client.close()
    return ModelCard(
        model_id=served_model_id(model, mine), name=model, path=Path(first), pooling="served",
        dimension=int(vectors.shape[1]), normalized=True, max_seq_length=None, causal_lm=chat,
        architecture=why, endpoint=tuple(answered), endpoint_down=tuple(u for u in urls if u not in answered),
        latency_ms=latency)


def chat_signals(model: str, entries: list[dict[str, Any]]) -> tuple[bool, str]:
    """(is it a chat model?, what says so) from the server's /models entry and the model's name."""
    entry = next((e for e in entries if e.get("id") == model), entries[0] if len(entries) == 1 else {})
    capabilities = {str(c).lower() for c in entry.get("capabilities") or []}
    kind = str(entry.get("type", "")).lower()
    if capabilities and "embed" not in capabilities and capabilities & {"chat", "generate", "completion"}:
        return True, f"served; the server lists its capabilities as {', '.join(sorted(capabilities))}"
    if kind in ("llm", "vlm"):
        return True, f"served; the server lists its type as {kind}"
    if "embed" in capabilities or kind == "embeddings":
        return False, "served embedding model"
    if not _EMBEDDER_NAME.search(model) and _CHAT_NAME.search(model):
        return True, "served; its name is a chat model's"
    return False, "served embedding model"


def unit_rows(raw: list[list[float]], where: str, dimension: int | None) -> np.ndarray:
    """The answer as unit-length float32 rows; FAILED_PRECONDITION for ragged, non-finite or zero vectors."""
    try:
        rows = np.asarray(raw, dtype=np.float32)
    except (ValueError, TypeError):
        raise precondition(f"{where} answered vectors of different lengths or non-numbers; is it an "
                           "embedding model?") from None
    if rows.ndim != 2 or rows.shape[1] == 0:
        raise precondition(f"{where} answered vectors of different lengths; is it an embedding model?")
    if dimension is not None and rows.shape[1] != dimension:
        raise precondition(f"{where} now answers {rows.shape[1]}-dimensional vectors where it answered "
                           f"{dimension} when this command began: another model is being served there. "
                           "Nothing of this batch was stored; serve the dataset's model again")
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    if not np.isfinite(rows).all() or not (norms > 0).all():
        raise precondition(f"{where} answered a vector that is zero or not finite; check the server's model")
    return (rows / norms).astype(np.float32)


class ServedEmbedder:
    """The served model behind the Embedder seam: batches in flight across its base URLs, unit vectors back."""

    runtime = "served"

    def __init__(self, card: ModelCard, settings: Settings) -> None:
        self._card = card
        self._client = client_for(card.name, card.endpoint, settings)
        self._workers = max(len(card.endpoint) * settings.embed_endpoint_requests, 1)  # requests in flight
        self._checked = time.monotonic()  # the card's probe just now
        self._check_lock = threading.Lock()

    @property
    def card(self) -> ModelCard:
        return self._card

    @property
    def in_flight(self) -> int:
        """Requests it keeps in flight: the backlog's chunks hold at least two batches for each."""
        return self._workers

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress: ProgressFn | None = None) -> np.ndarray:
        """Longest first (the server pads less), several batches in flight; `progress` after each batch.

        `progress` raising (a stop request) abandons the rest: batches not yet sent are never sent, those in
        flight are dropped when they come back (no retry), and nothing waits for them.
        """
        self._recheck()
        out = np.empty((len(texts), self._card.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        step = max(batch_size, 1)
        batches = [order[s:s + step] for s in range(0, len(order), step)]
        if len(batches) <= 1:
            for picked in batches:
                out[picked] = self._batch([texts[i] for i in picked])
                if progress is not None:
                    progress(len(picked))
            return out
        return self._in_flight(texts, batches, out, progress)

    def _in_flight(self, texts: Sequence[str], batches: list[list[int]], out: np.ndarray,
                   progress: ProgressFn | None) -> np.ndarray:
        """The batches on daemon threads (a stop or an exit never waits for a slow server's answer), their
        results taken in as they come; on any failure the threads stop retrying and nothing more is sent."""
        work: queue.SimpleQueue[list[int]] = queue.SimpleQueue()
        for picked in batches:
            work.put(picked)
        results: queue.SimpleQueue[tuple[list[int], Any]] = queue.SimpleQueue()
        stop = threading.Event()

        def worker() -> None:
            while not stop.is_set():
                try:
                    picked = work.get_nowait()
                except queue.Empty:
                    return
                try:
                    results.put((picked, self._batch([texts[i] for i in picked], stop)))
                except BaseException as exc:  # handed to the caller's thread, which raises it
                    results.put((picked, exc))
                    return

        for _ in range(min(self._workers, len(batches))):
            threading.Thread(target=worker, name="kx-served", daemon=True).start()
        try:
            for _ in batches:
                picked, answer = results.get()
                if isinstance(answer, BaseException):
                    raise answer
                out[picked] = answer
                if progress is not None:
                    progress(len(picked))
        finally:
            stop.set()
        return out

    def _recheck(self) -> None:
        """A long-lived process (`kx serve`, the TUI, a watcher, a long backlog) probes its URLs again every
        RECHECK_SECONDS, so a model swapped behind them is refused before its vectors mix with the old ones."""
        with self._check_lock:
            if time.monotonic() - self._checked < RECHECK_SECONDS:
                return
            for url in self._card.endpoint:
                try:
                    rows = unit_rows(self._client.embed(PROBES, only=url), f"{url}/embeddings", self._card.dimension)
                except KxError as exc:
                    if exc.status is Status.UNAVAILABLE:
                        continue  # down: the batches' own requests say so, or go elsewhere
                    raise
                then = self._card.model_id.rpartition("#")[2]
                if not same_sketch(then, sketch(rows)):
                    raise precondition(
                        f"{url} now answers with other vectors for model {self._card.name!r} than when this "
                        f"process began (probe sketch distance {sketch_distance(then, sketch(rows)):.2f}): "
                        "another model is served there. Nothing of this batch was stored; serve the model "
                        "again, or restart kx to use the new one (a dataset of the old model refuses it)")
            self._checked = time.monotonic()

    def _batch(self, texts: list[str], stop: threading.Event | None = None) -> np.ndarray:
        return unit_rows(self._client.embed(texts, stop=stop), f"the served model {self._card.name!r}",
                         self._card.dimension)

    def status(self) -> dict[str, Any]:
        return {**served_status(self._card), "loaded": True, "requests": self._client.timings()}

    def close(self) -> None:
        self._client.close()


def served_status(card: ModelCard) -> dict[str, Any]:
    """`kx info`'s runtime entry for a served model: where it is served, and how fast the probe came back."""
    status: dict[str, Any] = {
        "runtime": "served", "loaded": False, "endpoint": list(card.endpoint), "model": card.name,
        "dimension": card.dimension, "probe_latency_ms": card.latency_ms,
        "reason": f"served at {', '.join(card.endpoint)} (BASE_URL/embeddings)",
    }
    if card.endpoint_down:
        status["down"] = list(card.endpoint_down)
        status["reason"] += (f"; {', '.join(card.endpoint_down)} did not answer the probe and is left out "
                             "until the next command")
    return status
