"""The end-to-end half of tests/unit/test_milvus.py (a model, processes or servers there):
What only the Milvus backend has to prove: its operational edges, `kx info`, and the surfaces over it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine import KxError, Status, load_settings
from engine.milvus.backend import MilvusBackend
from engine.text.inputs import from_file, from_text

from .backends import milvus_settings
from .helpers import REPO, HashEmbedder, run_cli, serving
from .unit.test_milvus import _HOLDER, _milvus, _refusal  # noqa: F401 - helpers and fixtures


@pytest.mark.slow  # a second process holds the file
def test_a_lite_file_open_in_another_process_is_a_failed_precondition(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER.format(uri=path)], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    try:
        assert holder.stdout.readline().strip() == "ready", holder.stderr.read()
        error = _refusal(_milvus(path))
    finally:
        holder.kill()
        holder.wait()
    assert error.status is Status.FAILED_PRECONDITION and path in error.message
    assert "milvus-lite server" in error.message   # the way to share it
    again = _milvus(path)                           # the holder is gone: the file opens
    assert [s.name for s in again.list_datasets()] == ["notes"]
    again.close()


@pytest.mark.slow  # spawns kx
def test_a_cli_reading_a_milvus_dataset_prints_no_pymilvus_warnings(kx_home: Path) -> None:
    """Importing pymilvus sets up its own stderr logging; a kx command must not print its iterator warnings."""
    from milvus_lite.server_manager import server_manager_instance

    from .helpers import run_kx

    path = str(kx_home.parent / "quiet.db")
    backend = _milvus(path)
    backend.ingest("notes", [from_text("parcels leave the depot at noon", "guide")])
    backend.close()
    server_manager_instance.release_server(path)
    shown = run_kx("datasets", "documents", "notes", "--versions", "all",
                   env={"KX_BACKEND": "milvus", "KX_MILVUS_URI": path, "KX_EMBED_MODEL": "none"}, timeout=120)
    assert shown.code == 0 and "guide" in shown.stdout, shown.stderr
    assert shown.stderr == ""


@pytest.mark.slow
def test_the_cli_with_the_real_model_over_milvus_lite(kx_home: Path, monkeypatch, real_embedder) -> None:
    from milvus_lite.server_manager import server_manager_instance

    path = str(kx_home.parent / "cli.db")
    monkeypatch.setenv("KX_BACKEND", "milvus")
    monkeypatch.setenv("KX_MILVUS_URI", path)
    try:
        samples = sorted((REPO / "samples" / "handbook").glob("*.md"))
        added = run_cli("datasets", "ingest", "handbook", *map(str, samples), "--json")
        assert added.code == 0, added.stderr
        assert json.loads(added.stdout)["added"] == len(samples)
        listed = json.loads(run_cli("datasets", "list", "--json").stdout)
        assert [d["name"] for d in listed] == ["handbook"] and listed[0]["embed_model"].startswith("all-MiniLM")
        for mode in ("hybrid", "dense", "sparse"):
            answer = run_cli("datasets", "query", "handbook", "--text", "how many days of annual leave",
                             "--mode", mode, "--json")
            assert answer.code == 0, answer.stderr
            hits = json.loads(answer.stdout)["hits"]
            assert "leave-and-holidays" in hits[0]["document_name"], (mode, [h["document_name"] for h in hits])
    finally:
        server_manager_instance.release_server(path)


@pytest.mark.slow  # the whole TUI over milvus-lite: seconds
async def test_the_tui_over_milvus(tmp_path: Path, kx_home: Path) -> None:
    from textual.widgets import Input

    from kx_tui.tui.app import SAMPLES, KxApp
    from kx_tui.tui.screens.hit_detail import PassageDetailScreen

    backend = _milvus(str(tmp_path / "tui.db"), chunk_size=1000, chunk_overlap=200)
    backend.ingest("handbook", [from_file(f, 10**7) for f in sorted(SAMPLES.glob("*.md"))])
    app = KxApp(backend, settings=backend.settings)
    try:
        async with app.run_test(size=(140, 45)) as pilot:
            for _ in range(3):
                await pilot.pause()
                await app.workers.wait_for_complete()
            main = app.screen_stack[0]
            assert main.dataset == "handbook"
            app.query_one("#query", Input).focus()
            await pilot.press(*"expenses receipts", "enter")
            for _ in range(3):
                await pilot.pause()
                await app.workers.wait_for_complete()
            expected = backend.query("handbook", "expenses receipts", k=app.k, mode="hybrid", rerank=True)
            assert main.result is not None and len(main.result.hits) > 1
            assert [h.passage_ref for h in main.result.hits] == [h.passage_ref for h in expected.hits]
            await pilot.press("escape", "down", "enter")
            for _ in range(3):
                await pilot.pause()
                await app.workers.wait_for_complete()
            assert isinstance(app.screen, PassageDetailScreen)
            hit = main.result.hits[1]
            assert app.screen.document_text[hit.char_start:hit.char_end] == hit.text
    finally:
        backend.close()


@pytest.mark.slow  # a server on loopback
def test_the_gateway_fronts_milvus_over_http(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """`kx serve`'s app over a MilvusBackend on the http:// path, driven by the SDK over real loopback HTTP."""
    from engine import KxClient

    from .backends import _drop_database

    store = milvus_settings("milvus-server", tmp_path, request)
    backend = MilvusBackend(load_settings({**store, "chunk_size": 200, "chunk_overlap": 40}), embedder=HashEmbedder())
    try:
        with serving(backend) as (url, token), KxClient(url, token=token, timeout=60) as client:
            report = client.ingest_documents("notes", ["The parking garage opens at seven.",
                                                       "Refunds are paid within thirty days."],
                                             names=["parking", "refunds"])
            assert report.count("added") == 2
            assert [s.name for s in client.list_datasets()] == ["notes"]
            result = client.query_dataset("notes", text="refunds thirty days", k=2)
            assert result.hits[0].document_name == "refunds" and result.hits[0].sparse_rank == 1
            direct = backend.query("notes", "refunds thirty days", k=2)
            assert [h.to_dict() for h in result.hits] == [h.to_dict() for h in direct.hits]
            text = client.document_text("notes", result.hits[0].document_ref)
            assert text == "Refunds are paid within thirty days."
            narrowed = client.query_dataset("notes", text="refunds thirty days", k=2, where=["name:park*"])
            assert [h.document_name for h in narrowed.hits] == ["parking"]   # filtered inside Milvus's searches
            client.ingest_documents("notes", ["Refunds are paid within ten days."], names=["refunds"])
            latest = client.query_dataset("notes", text="refunds days", k=5)
            assert [h.text for h in latest.hits if h.document_name == "refunds"] == [
                "Refunds are paid within ten days."]
            every = client.query_dataset("notes", text="refunds days", k=5, versions="all")
            assert sorted(h.version for h in every.hits if h.document_name == "refunds") == [1, 2]
            assert len(client.list_documents("notes", versions="all")) == 3
            assert len(client.list_documents("notes")) == 2
            info = client.info()
            assert info["backend"]["kind"] == "milvus" and info["backend"]["uri"] == store["milvus_uri"]
            with pytest.raises(KxError) as err:
                client.query_dataset("missing", text="x")
            assert err.value.status is Status.NOT_FOUND
    finally:
        backend.close()
        _drop_database(store)
