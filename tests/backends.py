"""Fixtures that give a test the backend under contract: embedded, milvus-lite (.db), milvus-lite server, a cluster.

`backend_factory` makes backends of the test's kind over one store per test:
the embedded engine under the test's KX_HOME; milvus-lite in a .db folder of
the test's own (released in teardown: milvus-lite holds a folder for its
process until told); `milvus-lite server` on 127.0.0.1, started once per
session, the http:// path a cluster takes, with a Milvus database per test
(dropped in teardown); and, when KX_TEST_MILVUS_URI is set (with
KX_TEST_MILVUS_TOKEN if it needs one), a real cluster the same way.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import load_settings

from .helpers import HashEmbedder, free_port

CLUSTER_URI = os.environ.get("KX_TEST_MILVUS_URI", "")   # read at import: the autouse fixture clears KX_*
CLUSTER_TOKEN = os.environ.get("KX_TEST_MILVUS_TOKEN", "")
KINDS = ["embedded", "milvus-lite", "milvus-server"] + (["milvus-cluster"] if CLUSTER_URI else [])
MILVUS_KINDS = [k for k in KINDS if k != "embedded"]
SMALL = {"chunk_size": 200, "chunk_overlap": 40}


@pytest.fixture(scope="module")
def lite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`milvus-lite server` on a free loopback port for one test module; its http:// URI.

    Per module, not per session: a server that had sat idle through the other modules once refused
    test_milvus.py's connection in a full run (it passed alone and in the run before); a fresh one
    costs about two seconds."""
    folder = tmp_path_factory.mktemp("milvus-server")
    port = free_port()
    log = (folder / "server.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(folder / "data"),
                             "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"milvus-lite server exited: {(folder / 'server.log').read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("milvus-lite server did not listen within 60 s") from None
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def milvus_settings(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The backend=milvus settings of one test's store."""
    if kind == "milvus-lite":
        return {"backend": "milvus", "milvus_uri": str(tmp_path / "milvus.db")}
    uri = request.getfixturevalue("lite_server") if kind == "milvus-server" else CLUSTER_URI
    return {"backend": "milvus", "milvus_uri": uri, "milvus_database": f"kxt_{uuid.uuid4().hex[:12]}",
            "milvus_token": CLUSTER_TOKEN if kind == "milvus-cluster" else ""}


def _drop_database(settings: dict[str, Any]) -> None:
    from pymilvus import MilvusClient

    client = MilvusClient(uri=settings["milvus_uri"], token=settings.get("milvus_token", ""), timeout=10)
    try:
        database = settings["milvus_database"]
        if database in client.list_databases():
            client.use_database(database)
            for collection in client.list_collections():
                client.drop_collection(collection)
            client.use_database("default")
            client.drop_database(database)
    finally:
        client.close()


@pytest.fixture(params=KINDS)
def backend_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def backend_factory(backend_kind: str, kx_home: Path, tmp_path: Path,
                    request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """make(embedder=HashEmbedder(), **settings): a backend of the test's kind over the test's one store."""
    from engine.open_backend import open_backend

    store = {} if backend_kind == "embedded" else milvus_settings(backend_kind, tmp_path, request)
    made: list[Any] = []

    def make(embedder: Any = "hash", **settings: Any) -> Any:
        chosen = HashEmbedder() if embedder == "hash" else embedder
        backend = open_backend(load_settings({**SMALL, **store, **settings}), embedder=chosen)
        made.append(backend)
        return backend

    make.kind = backend_kind  # type: ignore[attr-defined]
    make.store = store        # type: ignore[attr-defined]
    yield make
    for backend in reversed(made):  # the first one started milvus-lite: it releases the folder last
        backend.close()
    if "milvus_database" in store:
        _drop_database(store)
