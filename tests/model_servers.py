"""Real embedding servers on loopback for the served-model tests: kx's own (engine/embedding/openai_server.py)
and, where it is installed, infinity (`pip install "infinity-emb[server,torch]"`)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

from .helpers import REPO, free_port

INFINITY_INSTALL = 'pip install "infinity-emb[server,torch]"'


class ModelServer:
    """One server process; `url` is its base URL (BASE_URL/embeddings is what kx calls)."""

    def __init__(self, command: list[str], port: int, env: dict[str, str], log: Path) -> None:
        self.command, self.port, self.env, self.log = command, port, env, log
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> ModelServer:
        self.proc = subprocess.Popen(self.command, env=self.env, cwd=REPO, stdout=self.log.open("ab"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def wait_ready(self, timeout: float = 240.0) -> ModelServer:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited ({self.proc.returncode}): {self.log.read_text()[-2000:]}")
            if self.models() is not None:
                return self
            time.sleep(0.3)
        raise AssertionError(f"the server did not answer within {timeout:g} s: {self.log.read_text()[-2000:]}")

    def models(self) -> list[dict] | None:
        try:
            with urllib.request.urlopen(f"{self.url}/models", timeout=2) as response:
                return json.loads(response.read())["data"]
        except OSError:
            return None

    def requests(self) -> int:
        """Embedding requests kx's own server has answered (its /models stats)."""
        return int(((self.models() or [{}])[0].get("stats") or {}).get("requests", 0))

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # a crash, not a goodbye
            self.proc.wait(timeout=30)


def kx_server(tmp: Path, model_cache: Path, port: int | None = None, model: str = "default",
              name: str = "all-MiniLM-L6-v2") -> ModelServer:
    """kx's own server of the bundled model (ONNX Runtime from the session's export cache)."""
    port = port or free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KX_")}
    env.update(KX_HOME=str(tmp / f"server-home-{port}"), KX_MODEL_CACHE=str(model_cache), KX_EMBED_THREADS="1")
    command = [sys.executable, "-m", "engine.embedding.openai_server", "--port", str(port), "--model", model,
               "--name", name]
    return ModelServer(command, port, env, tmp / f"server-{port}.log")


def infinity_command() -> str | None:
    """The infinity_emb executable: on PATH, beside this Python, or named by INFINITY_EMB_BIN (a venv)."""
    named = os.environ.get("INFINITY_EMB_BIN")
    if named and Path(named).exists():
        return named
    beside = Path(sys.executable).with_name("infinity_emb")
    return str(beside) if beside.exists() else shutil.which("infinity_emb")


def infinity_server(tmp: Path, model_path: Path) -> ModelServer:
    port = free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", INFINITY_ANONYMOUS_USAGE_STATS="0", DO_NOT_TRACK="1")
    command = [str(infinity_command()), "v2", "--model-id", str(model_path), "--port", str(port),
               "--engine", "torch", "--host", "127.0.0.1"]
    return ModelServer(command, port, env, tmp / f"infinity-{port}.log")


def stored_vectors(home: Path, name: str) -> tuple[list[str], np.ndarray, int]:
    """(texts, vectors, passages still waiting) of a dataset's embedded passages, read from its catalogue."""
    db = sqlite3.connect(f"file:{home / 'datasets' / name / 'catalog.sqlite'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT text, vector FROM passages WHERE length(vector) > 0 ORDER BY seq").fetchall()
        waiting = db.execute("SELECT COUNT(*) FROM passages WHERE length(vector) = 0").fetchone()[0]
    finally:
        db.close()
    vectors = np.stack([np.frombuffer(v, dtype=np.float32) for _t, v in rows]) if rows else np.zeros((0, 0))
    return [t for t, _v in rows], vectors, int(waiting)
