"""`kx serve` as a process for the gateway's tests: start it on a free loopback port, talk to it, stop it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from engine.server.client import KxClient

from .helpers import REPO, free_port


@dataclass
class Gateway:
    url: str
    port: int
    home: Path
    token: str
    proc: subprocess.Popen
    log: Path

    def client(self, token: str | None = "default") -> KxClient:
        return KxClient(self.url, token=self.token if token == "default" else token, timeout=120)

    def raw(self, method: str, path: str, token: str | None = "default", **kwargs) -> httpx.Response:
        headers = dict(kwargs.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {self.token if token == 'default' else token}"
        return httpx.request(method, self.url + path, headers=headers, timeout=120, **kwargs)


def start_gateway(home: Path, *args: str, env: dict[str, str] | None = None) -> Gateway:
    """`kx serve` on a free loopback port over `home` (`args` added to its command line, `env` to a KX_-free
    environment), once it answers /v1/health."""
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("KX_")}
    full_env.update({"KX_HOME": str(home), **(env or {})})
    home.mkdir(parents=True, exist_ok=True)
    log = home.parent / f"serve-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kx_tui", "serve", "--port", str(port), *args],
                                cwd=REPO, env=full_env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            pytest.fail(f"kx serve exited with {proc.returncode}: {log.read_text()}")
        try:
            if httpx.get(url + "/v1/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"kx serve did not answer /v1/health within 60 s: {log.read_text()}")
        time.sleep(0.1)
    token = (home / "gateway.token").read_text().strip()
    return Gateway(url, port, home, token, proc, log)


def stop_gateway(gateway: Gateway) -> int:
    """SIGTERM, then the exit code (killed after 30 s)."""
    if gateway.proc.poll() is None:
        gateway.proc.send_signal(signal.SIGTERM)
    try:
        return gateway.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        gateway.proc.kill()
        raise


def error_of(response: httpx.Response) -> tuple[int, str]:
    """(HTTP status, code) of a refusal, checking it has the {code, message} shape."""
    body = response.json()
    assert set(body) == {"code", "message"} and body["message"], body
    return response.status_code, body["code"]
