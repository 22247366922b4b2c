"""Test doubles and runners shared by the test modules."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import pytest

from engine import Engine, KxError, load_settings
from engine.embedding.cards import ModelCard

REPO = Path(__file__).resolve().parent.parent
# The real documents and BEIR collections, beside the clone (not in it: they are large and not ours to ship)
SHARED_DATA = REPO.parent / "shared" / "data"
SHARED_DOCS = SHARED_DATA / "docs"


def needs_shared(*parts: str) -> pytest.MarkDecorator:
    """Mark a test that reads ../shared/data/PARTS.

    Where it is missing the test is skipped and the run says so once (tests/conftest.py); under CI=true
    it fails instead, since CI has the shared data and a silent skip there would hide a lost check.
    """
    return pytest.mark.shared_data(SHARED_DATA.joinpath(*parts))


class HashEmbedder:
    """A tiny deterministic embedder for unit tests of engine plumbing.

    Each word adds a pseudo-random direction, so texts sharing words point the
    same way; no model, no torch. Feature tests also run through the real model.
    """

    def __init__(self, dimension: int = 16) -> None:
        self._card = ModelCard(
            model_id="hash-words@test", name="hash-words", path=Path("."), pooling="mean",
            dimension=dimension, normalized=True, max_seq_length=None, causal_lm=False, architecture="Hash",
        )
        self.calls = 0

    @property
    def card(self) -> ModelCard:
        return self._card

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress=None) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self._card.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "little")
                out[i] += np.random.default_rng(seed).standard_normal(self._card.dimension)
            norm = np.linalg.norm(out[i])
            out[i] = out[i] / norm if norm else 1.0 / np.sqrt(self._card.dimension)
        if progress:
            progress(len(texts))
        return out


class BlockingEmbedder(HashEmbedder):
    """HashEmbedder whose every encode waits until the test calls `release()` (a model still loading)."""

    def __init__(self) -> None:
        super().__init__()
        self.released = threading.Event()
        self.waiting = threading.Event()   # set once something is stuck in encode

    def release(self) -> None:
        self.released.set()

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress=None) -> np.ndarray:
        self.waiting.set()
        assert self.released.wait(30), "the test never released the embedder"
        return super().encode(texts, batch_size, progress)


class EventLog:
    """Collects a watcher's events; `wait_for` blocks until a predicate holds or a deadline passes."""

    def __init__(self) -> None:
        self.events: list[object] = []
        # re-entrant: a predicate reads the log through of() while wait_for holds the lock
        self._cond = threading.Condition(threading.RLock())

    def __call__(self, event: object) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def of(self, kind: type) -> list:
        with self._cond:
            return [e for e in self.events if isinstance(e, kind)]

    def wait_for(self, predicate: Callable[[EventLog], bool], what: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if predicate(self):
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out after {timeout} s waiting for {what}; "
                                         f"last events: {self.events[-12:]}")
                self._cond.wait(remaining)

    def paths(self, kind: type) -> list[str]:
        return [Path(e.path).name for e in self.of(kind)]


def mcp_call(server, tool: str, arguments: dict | None = None):
    """Call `tool` on an MCP server object (build_server's) through the `mcp` SDK's in-memory client; its
    CallToolResult."""
    import anyio
    from mcp import Client

    async def run():
        async with Client(server) as client:
            return await client.call_tool(tool, arguments or {})
    return anyio.run(run)


def mcp_text(result) -> str:
    """The text blocks of an MCP CallToolResult, joined."""
    return "".join(getattr(block, "text", "") for block in result.content)


def blank_pdf(pages: int = 2) -> bytes:
    """A PDF of `pages` empty A4 pages (no text layer: what a scan without OCR reads as)."""
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument.new()
    for _ in range(pages):
        pdf.new_page(595, 842)
    out = io.BytesIO()
    pdf.save(out)
    return out.getvalue()


def small_engine(embedder=None, env: dict[str, str] | None = None, **settings: object) -> Engine:
    """An engine over the hash embedder (or `embedder`) with small passages (chunk 200, overlap 40), so a few
    sentences make several. `settings` add to or override those (home=..., ingest_commit_passages=...); `env`
    stands for the process environment load_settings reads (None: the test's own, its KX_HOME included)."""
    return Engine(load_settings({"chunk_size": 200, "chunk_overlap": 40, **settings}, env=env),
                  embedder=embedder or HashEmbedder())


def kx_error(call) -> KxError:
    """The KxError that `call()` raises; the test fails if it raises none (or another exception)."""
    with pytest.raises(KxError) as caught:
        call()
    return caught.value


def free_port() -> int:
    """A loopback port that nothing listens on now, for a server process started right after."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


def run_cli(*args: str) -> CliResult:
    """Run the real CLI entry point in this process (the model stays warm between calls)."""
    from kx_tui.cli.root import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return CliResult(code, out.getvalue(), err.getvalue())


def kx_process(*args: str, env: dict[str, str] | None = None, **popen) -> subprocess.Popen:
    """Start `kx ARGS` as its own process, as a user's shell would."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.Popen([sys.executable, "-m", "kx_tui", *args], env=full_env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def run_kx(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> CliResult:
    proc = kx_process(*args, env=env)
    out, err = proc.communicate(timeout=timeout)
    return CliResult(proc.returncode, out, err)


def catalogue_counts(kx_home: Path, name: str) -> tuple[int, int]:
    """(documents, passages) as the catalogue holds them, read-only."""
    db = sqlite3.connect(f"file:{kx_home / 'datasets' / name / 'catalog.sqlite'}?mode=ro", uri=True)
    try:
        return (db.execute("SELECT COUNT(*) FROM documents").fetchone()[0],
                db.execute("SELECT COUNT(*) FROM passages").fetchone()[0])
    finally:
        db.close()


def assert_dataset_consistent(kx_home: Path, name: str, unique_names: bool = False) -> None:
    """Every document whole with its bytes, and both indexes hold every passage."""
    folder = kx_home / "datasets" / name
    db = sqlite3.connect(f"file:{folder / 'catalog.sqlite'}?mode=ro", uri=True)
    try:
        broken = db.execute("SELECT d.name FROM documents d LEFT JOIN passages p ON p.doc_ref = d.ref "
                            "GROUP BY d.ref HAVING COUNT(p.seq) != d.passage_count").fetchall()
        passages, top = db.execute("SELECT COUNT(*), MAX(seq) FROM passages").fetchone()
        missing_blobs = db.execute("SELECT COUNT(*) FROM documents d LEFT JOIN blobs b ON b.ref = d.ref "
                                   "WHERE b.ref IS NULL").fetchone()[0]
        names = [row[0] for row in db.execute("SELECT name FROM documents")]
    finally:
        db.close()
    assert broken == [] and missing_blobs == 0
    if unique_names:
        assert len(names) == len(set(names))
    dense = json.loads((folder / "dense.json").read_text())
    assert dense["watermark"] == top and dense["count"] == passages
    assert json.loads((folder / "sparse.json").read_text())["watermark"] == top


def inject_extraction(monkeypatch, fake) -> None:
    """Route ingest's extraction through `fake(doc) -> Extracted | None` (None: the real extractor).

    Patched at every name ingest may reach it by (`extract`, `extract_many`),
    so a test can hand the store an Extracted with pages and sections that no
    real file has to produce.
    """
    import engine.extract as extraction
    import engine.ingest as ingest
    from engine.errors import KxError

    real = extraction.extract

    def extract(doc):
        made = fake(doc)
        return real(doc) if made is None else made

    def extract_many(docs, settings=None, on_progress=None):   # in-process: no worker has progress to report
        for doc in docs:
            try:
                yield doc, extract(doc)
            except KxError as exc:
                yield doc, exc

    for module in (extraction, ingest):
        monkeypatch.setattr(module, "extract", extract, raising=False)
        monkeypatch.setattr(module, "extract_many", extract_many, raising=False)


async def settle(app, pilot, rounds: int = 4) -> None:
    """Let a Textual app's workers finish and their messages land, `rounds` times (a handler may start
    another worker), then one more pause."""
    for _ in range(rounds):
        await pilot.pause()
        await app.workers.wait_for_complete()
    await pilot.pause()


async def ask(app, pilot, text: str, rounds: int = 4) -> None:
    """Type `text` into the app's query box, send it, and wait for its answer (`settle` `rounds` times)."""
    from textual.widgets import Input

    app.query_one("#query", Input).focus()
    await pilot.press(*text, "enter")
    await settle(app, pilot, rounds=rounds)


def main_screen(app):
    """The workbench's default screen (at the bottom of the stack, whatever is pushed on it)."""
    from kx_tui.tui.screens.main import MainScreen

    screen = app.screen_stack[0]
    assert isinstance(screen, MainScreen)
    return screen


def plain_text(renderable, keep_lines: bool = False) -> str:
    """What a Rich renderable (a widget's content) shows, without styles; lines joined by spaces unless
    `keep_lines`."""
    from rich.console import Console

    console = Console(record=True, width=400, color_system=None)
    console.print(renderable)
    text = console.export_text()
    return text if keep_lines else text.replace("\n", " ")


def status_line(app) -> str:
    """The main screen's status line under the query box, whitespace folded."""
    from textual.widgets import Static

    return " ".join(plain_text(main_screen(app).query_one("#query-status", Static).content).split())


async def until(pilot, condition, what: str, seconds: float = 20.0) -> None:
    """Pause the app in small steps until `condition()` holds; fail naming `what` after `seconds`."""
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def recording_notify(app) -> list[tuple[str, str]]:
    """Every (message, severity) the app notifies from now on, in order (the notifications still show)."""
    seen: list[tuple[str, str]] = []
    original = app.notify

    def notify(message, *args, **kwargs):
        seen.append((str(message), kwargs.get("severity", "information")))
        return original(message, *args, **kwargs)

    app.notify = notify
    return seen


def ingest_handbook(engine: Engine, name: str = "handbook") -> None:
    """The shipped samples (samples/handbook) ingested as dataset `name`."""
    from engine.text.inputs import from_file

    files = sorted((REPO / "samples" / "handbook").glob("*.md"))
    assert files, "the shipped samples are missing"
    engine.ingest(name, [from_file(f, engine.settings.max_document_bytes) for f in files])


@contextmanager
def serving(backend, token: str | None = None) -> Iterator[tuple[str, str]]:
    """(url, token) of the real gateway app over `backend` (an Engine or a MilvusBackend) under a real uvicorn
    server on a loopback port, in a thread of this process (so it shares the test's backend and model), until
    the block ends. `token`: the bearer token; a random one by default."""
    import secrets

    import uvicorn

    from engine.server.gateway import create_app

    token = token or secrets.token_urlsafe(32)
    server = uvicorn.Server(uvicorn.Config(create_app(backend, token), log_level="warning", access_log=False,
                                           lifespan="off"))
    thread, url, sock = start_server(server)
    try:
        yield url, token
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def start_server(server) -> tuple[threading.Thread, str, socket.socket]:
    """Run a uvicorn.Server in a thread on a free loopback port; (the thread, its URL, its socket: the caller
    closes it) once it is serving."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the gateway did not start"
        time.sleep(0.02)
    return thread, f"http://127.0.0.1:{sock.getsockname()[1]}", sock


def wait_until_answering(proc: subprocess.Popen, url: str, log: Path, within: float = 60.0) -> None:
    """Wait until a server process we started answers `url` (any HTTP status); fail with its log if it exits
    first or stays silent past `within` seconds."""
    import httpx

    deadline = time.monotonic() + within
    while True:
        assert proc.poll() is None, f"exited with {proc.returncode}: {log.read_text()}"
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"{url} did not answer within {within:.0f} s: {log.read_text()}")
            time.sleep(0.1)
