"""A served embedding model end to end: kx's own OpenAI-compatible server (engine/embedding/openai_server.py,
the bundled model on ONNX Runtime) in real processes on loopback, and kx's CLI pointed at it.

Every stored vector is checked against the bundled model run here on the passage's own text, so a backlog
resumed after a crash, or split between two servers, is shown to hold each passage's own vector exactly once.
tests/test_infinity.py does the same against infinity where it is installed.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest

from engine.errors import Status

from .helpers import REPO, kx_process, run_cli
from .model_servers import kx_server, stored_vectors

pytestmark = pytest.mark.slow
HANDBOOK = REPO / "samples" / "handbook"
MODEL = "all-MiniLM-L6-v2"


def _spec(*servers) -> str:
    return f"openai:{MODEL}@" + ",".join(s.url for s in servers)


def _assert_own_vectors(home: Path, name: str, real_embedder) -> int:
    """Every passage has a vector, and it is the bundled model's vector of that passage's own text."""
    texts, vectors, waiting = stored_vectors(home, name)
    assert waiting == 0 and texts
    local = real_embedder.encode(texts)
    cosines = np.sum(local * vectors, axis=1)
    assert cosines.min() > 0.9999, cosines.min()
    return len(texts)


def _some_embedded(home: Path) -> bool:
    try:
        return bool(stored_vectors(home, "hb")[0])
    except sqlite3.Error:  # not created yet
        return False


def test_two_servers_share_an_ingest_and_queries_embed_through_them(kx_home: Path, tmp_path: Path,
                                                                     model_cache: Path, monkeypatch,
                                                                     real_embedder) -> None:
    first, second = kx_server(tmp_path, model_cache).start(), kx_server(tmp_path, model_cache).start()
    try:
        first.wait_ready(), second.wait_ready()
        monkeypatch.setenv("KX_SERVE_EMBED_MODEL", _spec(first, second))
        monkeypatch.setenv("KX_EMBED_BATCH_SIZE", "4")
        ingest = run_cli("datasets", "ingest", "hb", str(HANDBOOK), "--json")
        assert ingest.code == 0, ingest.stderr
        assert first.requests() > 2 and second.requests() > 2  # both servers embedded part of the backlog
        _assert_own_vectors(kx_home, "hb", real_embedder)

        info = json.loads(run_cli("info", "--json").stdout)["embed_model"]
        assert info["endpoint"] == [first.url, second.url] and info["dimension"] == 384
        assert info["model_id"].startswith(f"openai:{MODEL}#") and info["latency_ms"] > 0
        before = first.requests() + second.requests()
        dense = json.loads(run_cli("datasets", "query", "hb", "how long is the refund window", "--mode", "dense",
                                   "--json", "-k", "1").stdout)
        assert dense["hits"][0]["document_name"] == "refunds-and-returns"
        # the command's probe asks each URL once, and the query is embedded there once
        assert first.requests() + second.requests() == before + 2 + 1
        sparse = run_cli("datasets", "query", "hb", "refund window", "--mode", "sparse", "--json")
        assert sparse.code == 0 and first.requests() + second.requests() == before + 3  # nothing sent for it
    finally:
        first.kill(), second.kill()


def test_a_crash_mid_backlog_resumes_and_a_swapped_model_is_refused(kx_home: Path, tmp_path: Path,
                                                                     model_cache: Path, monkeypatch,
                                                                     real_embedder) -> None:
    # `spare` serves the same model at another URL: the backlog resumes there (the URL is not the model's identity)
    server, spare = kx_server(tmp_path, model_cache).start(), kx_server(tmp_path, model_cache).start()
    swapped = None
    try:
        server.wait_ready(), spare.wait_ready()
        spec = _spec(server)
        env = {"KX_SERVE_EMBED_MODEL": spec, "KX_EMBED_BATCH_SIZE": "2", "KX_EMBED_ENDPOINT_REQUESTS": "1",
               "KX_CHUNK_SIZE": "300", "KX_CHUNK_OVERLAP": "50"}
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        ingest = kx_process("datasets", "ingest", "hb", str(HANDBOOK), env=env)
        while ingest.poll() is None and not _some_embedded(kx_home):
            time.sleep(0.05)  # until the first chunk of vectors is committed
        server.kill()  # mid-backlog: some passages have vectors, the rest wait
        _out, err = ingest.communicate(timeout=120)
        assert ingest.returncode == Status.UNAVAILABLE.exit_code, err
        assert f"{server.url}/embeddings" in err and "kx datasets embed hb" in err
        texts, vectors, waiting = stored_vectors(kx_home, "hb")
        assert texts and waiting > 0  # a part embedded, the rest in the backlog

        sparse = run_cli("datasets", "query", "hb", "refund window", "--mode", "sparse", "--json")
        assert sparse.code == 0 and json.loads(sparse.stdout)["hits"]
        hybrid = json.loads(run_cli("datasets", "query", "hb", "refund window", "--json").stdout)
        assert hybrid["hits"] and any("dense search skipped" in n and server.url in n for n in hybrid["notes"])
        dense = run_cli("datasets", "query", "hb", "refund window", "--mode", "dense")
        assert dense.code == Status.UNAVAILABLE.exit_code and server.url in dense.stderr
        assert "--mode sparse" in dense.stderr

        # the int8 variant, under the same name at the same URL, loads while the backlog resumes on `spare`
        swapped = kx_server(tmp_path, model_cache, port=server.port, model="default-int8").start()
        monkeypatch.setenv("KX_SERVE_EMBED_MODEL", _spec(spare))
        resumed = run_cli("datasets", "embed", "hb")
        assert resumed.code == 0, resumed.stderr
        embedded = _assert_own_vectors(kx_home, "hb", real_embedder)
        assert embedded == len(texts) + waiting  # nothing lost, nothing twice

        swapped.wait_ready()
        monkeypatch.setenv("KX_SERVE_EMBED_MODEL", spec)
        query = run_cli("datasets", "query", "hb", "refund window", "--mode", "dense")
        assert query.code == Status.FAILED_PRECONDITION.exit_code and "embed_model" in query.stderr
        more = run_cli("datasets", "ingest", "hb", str(REPO / "README.md"))
        assert more.code == Status.FAILED_PRECONDITION.exit_code and "kx datasets rebuild" in more.stderr
    finally:
        for running in (server, spare, swapped):
            if running is not None:
                running.kill()
