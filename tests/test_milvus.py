"""What only the Milvus backend has to prove: its operational edges, `kx info`, and the surfaces over it.

The shared contract is tests/test_backend_contract.py. Here: a refused
connection, a server that never answers and one that rejects the token are
UNAVAILABLE / UNAUTHENTICATED naming the URI; a milvus-lite .db held by
another process is FAILED_PRECONDITION; writes go in batches and a passage
longer than a Milvus VARCHAR comes back whole; `kx info` shows the backend
with the token hidden; and the CLI with the real model, the TUI and the
gateway work unchanged over Milvus.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from concurrent import futures
from pathlib import Path

import numpy as np
import pytest

from engine import KxError, Status, load_settings
from engine.milvus.backend import MilvusBackend
from engine.text.inputs import from_file, from_text

from .backends import milvus_settings
from .helpers import REPO, HashEmbedder, free_port, run_cli, serving


def _milvus(uri: str, **settings) -> MilvusBackend:
    return MilvusBackend(load_settings({"backend": "milvus", "milvus_uri": uri, "chunk_size": 200,
                                        "chunk_overlap": 40, **settings}), embedder=HashEmbedder())


def _refusal(backend: MilvusBackend) -> KxError:
    with pytest.raises(KxError) as err:
        backend.list_datasets()
    backend.close()
    return err.value


def test_a_refused_connection_is_unavailable_with_the_uri() -> None:
    uri = f"http://127.0.0.1:{free_port()}"   # nothing listens there
    error = _refusal(_milvus(uri, milvus_timeout=5))
    assert error.status is Status.UNAVAILABLE and uri in error.message and "KX_MILVUS_URI" in error.message
    assert "Traceback" not in error.message


def test_a_server_that_never_answers_times_out_as_unavailable() -> None:
    with socket.socket() as silent:    # accepts TCP connections (the kernel does) and never speaks gRPC
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        error = _refusal(_milvus(uri, milvus_timeout=1))
    assert error.status is Status.UNAVAILABLE and uri in error.message
    assert time.monotonic() - started < 30   # bounded by KX_MILVUS_TIMEOUT, not pymilvus's minutes of retries


class _RejectEveryCall:
    """A gRPC server's handler that answers every method UNAUTHENTICATED, as Milvus does for a bad token."""

    def service(self, details):
        import grpc

        def reject(_request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "auth check failure, please check api key is correct")

        return grpc.unary_unary_rpc_method_handler(reject, request_deserializer=None, response_serializer=None)


def test_rejected_credentials_are_unauthenticated_with_the_uri() -> None:
    import grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2),
                         handlers=[type("H", (grpc.GenericRpcHandler,), {"service": _RejectEveryCall.service})()])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        uri = f"http://127.0.0.1:{port}"
        error = _refusal(_milvus(uri, milvus_token="root:wrong", milvus_timeout=5))
    finally:
        server.stop(grace=0)
    assert error.status is Status.UNAUTHENTICATED and uri in error.message and "KX_MILVUS_TOKEN" in error.message
    assert "wrong" not in error.message


_HOLDER = """
import sys, time
from engine import load_settings
from engine.text.inputs import from_text
from engine.milvus.backend import MilvusBackend
from tests.helpers import HashEmbedder
b = MilvusBackend(load_settings({{"backend": "milvus", "milvus_uri": {uri!r}}}, env={{}}), embedder=HashEmbedder())
b.ingest("notes", [from_text("held by another process")])
print("ready", flush=True)
time.sleep(60)
"""


def test_writes_are_batched_and_a_passage_longer_than_a_varchar_comes_back_whole(tmp_path: Path) -> None:
    backend = MilvusBackend(load_settings({"backend": "milvus", "milvus_uri": str(tmp_path / "m.db"),
                                           "embed_model": "none"}), embedder=None)
    sent: list[int] = []
    original = backend.store().conn.client.upsert
    backend.store().conn.client.upsert = (
        lambda name, rows, **kw: (sent.append(len(rows)), original(name, rows, **kw))[1])
    rng = np.random.default_rng(3)
    huge = "ünïcode " * 9000   # 72,000 characters, 90,000 UTF-8 bytes: over Milvus's 65,535
    docs = [from_text(f"record {i}", f"r{i}") for i in range(1200)] + [from_text(huge, "huge")]
    vectors = rng.standard_normal((len(docs), 8)).astype(np.float32)
    report = backend.ingest("bulk", docs, vectors=vectors)
    assert report.count("added") == 1201 and (report.documents, report.passages) == (1201, 1201)
    assert max(sent) <= 512 and sum(sent) >= 3 * 1201   # passages, texts and documents, in batches
    hit = backend.query("bulk", vector=vectors[-1], k=1).hits[0]
    assert hit.document_name == "huge" and hit.text == huge and (hit.char_start, hit.char_end) == (0, len(huge))
    assert backend.query("bulk", "ünïcode", mode="sparse", k=1).hits[0].document_name == "huge"
    backend.close()


def test_a_dataset_from_before_lineages_reads_as_before_and_takes_them_on(tmp_path: Path) -> None:
    """No `kxl_` collection (written before lineages): each name's newest document is current."""
    backend = _milvus(str(tmp_path / "old.db"))
    first = backend.ingest("notes", [from_text("parcels leave the depot at noon", "guide"),
                                     from_text("the garage opens at seven", "parking")])
    time.sleep(0.01)   # ingested_at orders the versions of a dataset without events
    second = backend.ingest("notes", [from_text("parcels leave the depot at dawn", "guide")])
    catalogue = backend._catalogue("notes")
    backend.store().drop(catalogue.lineages_col)   # what a dataset from before lineages looks like
    backend.close()
    reopened = _milvus(str(tmp_path / "old.db"))
    assert [h.text for h in reopened.query("notes", "parcels depot", k=5) if h.document_name == "guide"] == \
        ["parcels leave the depot at dawn"]
    assert reopened.dataset_summary("notes").documents == 2
    assert [d.version for d in reopened.list_documents("notes", versions="all") if d.name == "guide"] == [1, 2]
    assert reopened.retire("notes", ["parking"]) == ["parking"]   # the first event makes the collection
    assert {d.name for d in reopened.list_documents("notes")} == {"guide"}
    assert first.results[0].ref != second.results[0].ref
    reopened.close()


def test_index_files_cut_short_by_a_killed_process_are_rebuilt_and_lose_nothing(tmp_path: Path) -> None:
    """milvus-lite writes each segment's index file in the background after a flush; a process killed mid-write
    leaves it cut short. The next process opens the dataset (the indexes rebuilt from the stored rows)
    instead of failing every call with INTERNAL."""
    path = tmp_path / "killed.db"
    backend = _milvus(str(path))
    backend.ingest("notes", [from_text("parcels leave the depot at noon", "guide"),
                             from_text("the garage opens at seven", "parking")])
    backend.close()
    sidecars = sorted(path.glob("collections/*/partitions/*/indexes/*.idx"))
    assert len({s.parts[-5] for s in sidecars}) >= 4   # every collection of the dataset and the registry
    for sidecar in sidecars:
        sidecar.write_bytes(sidecar.read_bytes()[: sidecar.stat().st_size // 2])
    reopened = _milvus(str(path))
    assert [(s.name, s.documents, s.passages) for s in reopened.list_datasets()] == [("notes", 2, 2)]
    for mode in ("dense", "sparse", "hybrid"):
        assert reopened.query("notes", "when does the garage open", k=1, mode=mode)[0].document_name == "parking"
    reopened.ingest("notes", [from_text("the canteen serves lunch from twelve", "canteen")])
    assert {d.name for d in reopened.list_documents("notes")} == {"guide", "parking", "canteen"}
    reopened.close()


def test_a_damaged_registry_fingerprint_is_data_loss_and_listed_beside_the_healthy(tmp_path: Path) -> None:
    """As on the embedded backend: a fingerprint that is not JSON is DATA_LOSS naming where it is (it was
    INTERNAL), and `list_datasets` shows the dataset with that error instead of failing for every dataset."""
    from engine.milvus.schema import PLACEHOLDER, REGISTRY

    backend = _milvus(str(tmp_path / "reg.db"))
    for name in ("good", "bad"):
        backend.ingest(name, [from_text(f"parcels leave the depot at noon ({name})", "guide")])
    row = backend.store().registry_row("bad")
    backend.store().conn.call("upsert", REGISTRY, [{**row, "fingerprint": "{garbage", "schema_version": 1,
                                                    "_v": PLACEHOLDER}])
    backend.close()
    reopened = _milvus(str(tmp_path / "reg.db"))
    with pytest.raises(KxError) as err:
        reopened.query("bad", "parcels")
    assert err.value.status is Status.DATA_LOSS and "registry row of dataset 'bad'" in err.value.message
    listed = {s.name: s for s in reopened.list_datasets()}
    assert listed["good"].error is None and listed["good"].documents == 1
    assert listed["bad"].error is not None and listed["bad"].error.startswith("DATA_LOSS: ")
    reopened.close()


def test_a_crash_between_documents_and_their_events_keeps_the_version_before(tmp_path: Path, monkeypatch) -> None:
    """Milvus has no transactions: documents land first, events after; a crash between leaves the new version
    stored but not current, and offering the file again (a watcher's start scan) makes it current."""
    from engine.milvus.store import MilvusCatalogue

    backend = _milvus(str(tmp_path / "crash.db"))
    backend.ingest("notes", [from_text("parcels leave the depot at noon", "guide")])
    real = MilvusCatalogue._append_events

    def crash(self, events):
        raise KxError(Status.UNAVAILABLE, "the process died here")

    monkeypatch.setattr(MilvusCatalogue, "_append_events", crash)
    with pytest.raises(KxError):
        backend.ingest("notes", [from_text("parcels leave the depot at dawn", "guide")])
    monkeypatch.setattr(MilvusCatalogue, "_append_events", real)
    assert [h.text for h in backend.query("notes", "parcels depot", k=5)] == ["parcels leave the depot at noon"]
    assert len(backend.list_documents("notes", versions="all")) == 2
    again = backend.ingest("notes", [from_text("parcels leave the depot at dawn", "guide")])
    assert [r.status for r in again.results] == ["unchanged"]
    assert [h.text for h in backend.query("notes", "parcels depot", k=5)] == ["parcels leave the depot at dawn"]
    backend.close()


def test_rebuild_is_refused_on_milvus_saying_why_and_what_to_do(kx_home: Path, monkeypatch) -> None:
    from milvus_lite.server_manager import server_manager_instance

    path = str(kx_home.parent / "rebuild.db")
    backend = _milvus(path)
    backend.ingest("notes", [from_text("parcels leave the depot at noon", "guide")])
    with pytest.raises(KxError) as err:
        backend.rebuild("notes", "notes-small")
    assert err.value.status is Status.FAILED_PRECONDITION
    assert "original" in err.value.message and "kx datasets ingest notes-small" in err.value.message
    with pytest.raises(KxError) as missing:
        backend.rebuild("nothing", "other")
    assert missing.value.status is Status.NOT_FOUND
    backend.close()
    monkeypatch.setenv("KX_BACKEND", "milvus")
    monkeypatch.setenv("KX_MILVUS_URI", path)
    monkeypatch.setenv("KX_EMBED_MODEL", "none")
    try:
        shown = run_cli("datasets", "rebuild", "notes", "--as", "notes-small", "--chunk-size", "300")
        assert shown.code != 0 and "FAILED_PRECONDITION" in shown.stderr and "original" in shown.stderr
        after = _milvus(path)
        assert [d.name for d in after.list_datasets()] == ["notes"]   # nothing was made
        after.close()
    finally:
        server_manager_instance.release_server(path)


def test_kx_info_shows_the_backend_and_never_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    uri = f"http://root:hunter2@127.0.0.1:{free_port()}"
    monkeypatch.setenv("KX_BACKEND", "milvus")
    monkeypatch.setenv("KX_MILVUS_URI", uri)
    monkeypatch.setenv("KX_MILVUS_TOKEN", "root:sekrit")
    monkeypatch.setenv("KX_MILVUS_TIMEOUT", "3")
    shown = run_cli("info")
    assert shown.code == 0, shown.stderr
    assert "backend      milvus" in shown.stdout and "127.0.0.1" in shown.stdout and "unreachable" in shown.stdout
    as_json = run_cli("info", "--json")
    data = json.loads(as_json.stdout)
    assert data["backend"]["kind"] == "milvus" and data["backend"]["token"] == "***"
    assert data["backend"]["error"]["code"] == "UNAVAILABLE"
    for out in (shown.stdout + shown.stderr, as_json.stdout):
        assert "sekrit" not in out and "hunter2" not in out
    monkeypatch.delenv("KX_BACKEND")
    embedded = json.loads(run_cli("info", "--json").stdout)
    assert embedded["backend"]["kind"] == "embedded"


def test_milvus_settings_are_checked_where_declared(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    for env, name in (({"KX_BACKEND": "mongo"}, "KX_BACKEND"), ({"KX_MILVUS_URI": "ftp://db:19530"}, "KX_MILVUS_URI"),
                      ({"KX_MILVUS_URI": "/data/store.sqlite"}, "KX_MILVUS_URI"),
                      ({"KX_MILVUS_DATABASE": "9 lives"}, "KX_MILVUS_DATABASE")):
        with pytest.raises(KxError) as err:
            load_settings(env={"KX_HOME": home, **env})
        assert err.value.status is Status.INVALID_ARGUMENT and name in err.value.message
    settings = load_settings({"backend": "milvus"}, env={"KX_HOME": home})
    assert settings.milvus_target == str(Path(home) / "milvus.db") and settings.sources["backend"] == "flag"
    assert load_settings(env={"KX_HOME": home, "KX_MILVUS_URI": "https://m.example:443"}).milvus_target == \
        "https://m.example:443"


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
