"""`kx serve` caps glibc's malloc arenas before its threads start (the soak's RSS growth, RELIABILITY.md)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .helpers import REPO

pytestmark = pytest.mark.slow  # starts a fresh process

_PROBE = """
import ctypes, ctypes.util, json, threading
from kx_tui.cli.serve import limit_malloc_arenas
set_now = limit_malloc_arenas()
# threads that allocate side by side after the cap: the process keeps working
threads = [threading.Thread(target=lambda: [bytearray(4096) for _ in range(1000)]) for _ in range(8)]
[t.start() for t in threads]; [t.join() for t in threads]
print(json.dumps(set_now))
"""


def _run(env_extra: dict[str, str]) -> str:
    env = {"PATH": "/usr/bin:/bin", **env_extra}
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_serve_caps_malloc_arenas_unless_the_operator_chose() -> None:
    assert _run({}) == "true"
    assert _run({"MALLOC_ARENA_MAX": "4"}) == "false"  # the operator's MALLOC_ARENA_MAX wins
