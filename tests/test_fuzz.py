"""Fuzzing with hypothesis: CLI argument lists, JSONL lines, file bytes and gateway requests.

A fast slice runs by default (25 inputs per target); `--fuzz-examples N`
(or KX_FUZZ_EXAMPLES=N) runs N per target, KX_FUZZ_SEED picks the seed.
Every target counts the inputs it really ran and asserts: no traceback, no
INTERNAL error, no HTTP 500, every refusal a KxError status. The model is
the tiny test embedder (the inputs, not the model, are under test), and
commands that would run until stopped (`serve`, `watch`, the TUI) return
at once.
"""

from __future__ import annotations

import base64
import json
import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from engine import Status
from engine.text.inputs import from_file, from_jsonl, from_text

from .helpers import REPO, SHARED_DOCS, HashEmbedder, needs_shared, run_cli, small_engine

DOCS = SHARED_DOCS


EXIT_CODES = {0, 1, 2, 130} | {s.exit_code for s in Status}


STATUS_NAMES = set(Status.__members__)


@pytest.fixture
def budget(request: pytest.FixtureRequest):
    count, chosen = request.config.kx_fuzz_examples, request.config.kx_fuzz_seed

    def apply(test):
        return seed(chosen)(settings(max_examples=count, deadline=None, database=None,
                                     suppress_health_check=list(HealthCheck))(test))
    return apply


def _fresh_random() -> None:
    # hypothesis seeds the global `random` the same way for every example, and whoosh names its
    # segments with it: without this, the second example's segment collides with the first's
    random.seed(os.urandom(16))


_WORDS = st.sampled_from([
    "--home", "--set", "--gateway", "--token", "--json", "--help", "-h", "--version", "--file", "--text", "-t",
    "--jsonl", "--chunk-size", "--chunk-overlap", "--k", "-k", "--mode", "--rerank", "--queries", "--qrels",
    "--corpus", "--settle", "--host", "--port", "--dev-allow-local", "hybrid", "dense", "sparse", "on", "off",
    "notes", "Bad Name", "0", "-1", "99999999999", "nan", "chunk_size=10", "max_k=0", "x=y", "=", "",
    "http://127.0.0.1:9", "/dev/null", "/nonexistent", "README.md", "samples/handbook/onboarding.md",
])


_COMMANDS = [["info"], ["datasets", "list"], ["datasets", "ingest"], ["datasets", "query"], ["datasets", "watch"],
             ["eval"], ["serve"], ["datasets"]]


@pytest.fixture
def quiet_cli(monkeypatch: pytest.MonkeyPatch, kx_home: Path):
    import engine.embedding.embedders
    import engine.watch.watcher
    import kx_tui.cli.serve
    import kx_tui.tui.app

    # the engine imports load_embedder when it first needs a model: patch it where it lives
    monkeypatch.setattr(engine.embedding.embedders, "load_embedder",
                        lambda card, *args, **kwargs: HashEmbedder(card.dimension) if card else None)
    monkeypatch.setattr(kx_tui.cli.serve, "_run", lambda *args, **kwargs: None)
    monkeypatch.setattr(engine.watch.watcher.FolderWatcher, "wait", lambda self, timeout=None: True)
    monkeypatch.setattr(kx_tui.tui.app.KxApp, "run", lambda self, *a, **k: None)
    monkeypatch.chdir(REPO)
    small_engine(HashEmbedder(384)).ingest("notes", [from_text("The parking garage opens at seven."),
                                                     from_text("Refunds take 30 days.")])


def test_cli_argument_lists_never_trace(quiet_cli, budget) -> None:
    ran = []

    @budget
    @given(command=st.sampled_from(_COMMANDS), words=st.lists(_WORDS | st.text(max_size=12), max_size=7))
    def probe(command, words) -> None:
        _fresh_random()
        result = run_cli(*command, *words)
        ran.append(1)
        assert "Traceback" not in result.stderr + result.stdout, (command, words, result.stderr)
        assert "error: INTERNAL" not in result.stderr, (command, words, result.stderr)
        assert result.code in EXIT_CODES, (command, words, result.code, result.stderr)

    probe()
    print(f"\nfuzz: {len(ran)} inputs")
    assert ran


_JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
                            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                        max_size=3), max_leaves=8)


_RECORDS = st.fixed_dictionaries({}, optional={"_id": _JSON_VALUES, "id": _JSON_VALUES, "title": _JSON_VALUES,
                                               "text": _JSON_VALUES | st.text(min_size=1, max_size=200)})


_LINES = st.one_of(_RECORDS.map(lambda r: json.dumps(r).encode()), st.binary(max_size=200),
                   _JSON_VALUES.map(lambda v: json.dumps(v).encode()))


def _assert_refusals_are_statuses(report) -> None:
    for result in report.results:
        assert result.status in ("added", "unchanged", "refused"), result
        if result.status == "refused":
            assert result.code in STATUS_NAMES and result.code != "INTERNAL" and result.reason, result


def test_jsonl_lines_are_documents_or_reasons(tmp_path: Path, budget) -> None:
    engine, ran = small_engine(HashEmbedder(384)), []

    @budget
    @given(lines=st.lists(_LINES, min_size=1, max_size=6))
    def probe(lines) -> None:
        path = tmp_path / "corpus.jsonl"
        path.write_bytes(b"\n".join(line.replace(b"\n", b" ") for line in lines))
        docs = list(from_jsonl(path, 10_000))
        ran.append(1)
        _fresh_random()
        if docs:
            _assert_refusals_are_statuses(engine.ingest("jsonl", docs))

    probe()
    engine.close()
    print(f"\nfuzz: {len(ran)} inputs")
    assert ran


def _real_files() -> list[bytes]:
    files = sorted(p for p in DOCS.rglob("*") if p.is_file() and p.suffix in (".pdf", ".docx", ".html"))
    return [p.read_bytes()[:200_000] for p in files]


@st.composite
def _file_bytes(draw, originals: list[bytes]):
    if not originals or draw(st.booleans()):
        return draw(st.binary(max_size=2000)), draw(st.sampled_from([".txt", ".md", ".pdf", ".docx", ".html"]))
    index = draw(st.integers(0, len(originals) - 1))
    data = bytearray(originals[index])
    for _ in range(draw(st.integers(1, 8))):  # byte-wise mutations: flips, cuts, inserts
        at = draw(st.integers(0, max(0, len(data) - 1)))
        kind = draw(st.sampled_from(["flip", "cut", "insert"]))
        if kind == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del data[at:at + draw(st.integers(1, 4096))]
        else:
            data[at:at] = draw(st.binary(min_size=1, max_size=64))
    suffix = {b"%PDF": ".pdf", b"PK\x03\x04": ".docx"}.get(bytes(originals[index][:4]), ".html")
    return bytes(data), suffix


_ROUTES = [("GET", "/v1/health"), ("GET", "/v1/info"), ("GET", "/v1/datasets"), ("GET", "/v1/datasets/notes"),
           ("GET", "/v1/datasets/notes/documents/" + "0" * 64), ("POST", "/v1/datasets/notes/documents"),
           ("POST", "/v1/datasets/notes/query"), ("POST", "/v1/datasets/Bad%20Name/query"), ("OPTIONS", "/v1/datasets")]


_HEADER_VALUES = st.sampled_from(["testserver", "evil.example", "127.0.0.1:80", "", "null", "http://testserver",
                                  "http://evil.example", "text/plain", "application/json", "-1", "12", "Bearer x",
                                  "Bearer fuzz-token", "cross-site", "same-origin"]) | st.text(
    st.characters(min_codepoint=32, max_codepoint=126), max_size=20)


_HEADERS = st.dictionaries(st.sampled_from(["host", "origin", "content-type", "authorization", "sec-fetch-site",
                                            "access-control-request-method", "content-length"]),
                           _HEADER_VALUES, max_size=4)


_BODIES = st.one_of(
    st.binary(max_size=300),
    _JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries({}, optional={"text": _JSON_VALUES, "vector": _JSON_VALUES, "k": _JSON_VALUES,
                                        "mode": _JSON_VALUES, "rerank": _JSON_VALUES}).map(
        lambda v: json.dumps(v).encode()),
    st.lists(st.fixed_dictionaries({}, optional={
        "text": st.text(max_size=50) | _JSON_VALUES, "data_base64": st.binary(max_size=40).map(
            lambda b: base64.b64encode(b).decode()) | st.text(max_size=10), "name": _JSON_VALUES,
        "media_type": st.sampled_from(["text/plain", "application/x-kx-record+json", "application/pdf"]),
        "vector": _JSON_VALUES}), max_size=3).map(lambda docs: json.dumps({"documents": docs}).encode()),
)


def test_gateway_raw_bodies_and_headers_never_500(kx_home: Path, budget) -> None:
    from fastapi.testclient import TestClient

    from engine.server.gateway import create_app

    engine = small_engine(HashEmbedder(384))
    engine.ingest("notes", [from_text("The parking garage opens at seven.")])
    app = create_app(engine, "fuzz-token", max_request_bytes=1 << 16, allowed_hosts=["testserver"])
    ran = []
    with TestClient(app, raise_server_exceptions=False) as client:
        @budget
        @given(route=st.sampled_from(_ROUTES), headers=_HEADERS, body=_BODIES, token=st.booleans())
        def probe(route, headers, body, token) -> None:
            method, path = route
            sent = {"authorization": "Bearer fuzz-token"} if token else {}
            sent.update(headers)
            if "content-length" in sent:  # a lying length is the server's to refuse, not httpx's to send
                sent.pop("content-length")
            _fresh_random()
            response = client.request(method, path, content=body if method == "POST" else None, headers=sent)
            ran.append(1)
            assert response.status_code < 500, (route, headers, body, response.text)
            if response.status_code >= 400:
                answer = response.json()
                assert set(answer) == {"code", "message"} and answer["code"] in STATUS_NAMES, answer
                assert Status[answer["code"]].http_status == response.status_code

        probe()
    engine.close()
    print(f"\nfuzz: {len(ran)} inputs")
    assert ran


@pytest.mark.slow  # ~2 s of extraction per run even at the fast slice
@needs_shared("docs")
def test_file_bytes_random_and_mutated_real_files(tmp_path: Path, budget) -> None:
    engine, ran, originals = small_engine(HashEmbedder(384)), [], _real_files()

    @budget
    @given(case=_file_bytes(originals))
    def probe(case) -> None:
        data, suffix = case
        path = tmp_path / f"fuzzed{suffix}"
        path.write_bytes(data)
        doc = from_file(path, 1 << 20)
        ran.append(1)
        _fresh_random()
        _assert_refusals_are_statuses(engine.ingest("files", [doc]))

    probe()
    engine.close()
    print(f"\nfuzz: {len(ran)} inputs")
    assert ran
