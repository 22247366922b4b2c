"""The ONNX Runtime path: the same vectors as torch, a cache that heals, and cold commands without torch.

Everything runs the real model: the graph is exported once per session into
the session's model cache (tests/conftest.py), and tests that change the cache
work on copies of it, so only the damaged-graph test pays for a second export.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine import Engine, KxError, Status, load_settings
from engine.embedding.cards import model_card_for
from engine.embedding.embedders import SentenceTransformerEmbedder
from engine.embedding.onnx_cache import GRAPH, model_folder, plan_runtime
from engine.records import Notice
from engine.text.inputs import from_text

from .helpers import REPO, run_cli

pytestmark = pytest.mark.slow

SCIFACT = REPO.parent / "shared" / "data" / "scifact" / "corpus.jsonl"
HANDBOOK = REPO / "samples" / "handbook"
QUERIES = ["how much leave do new employees get", "can I expense a taxi to the airport",
           "returning a damaged item after thirty days", "two-factor authentication for remote access",
           "what equipment do remote workers receive", "first week onboarding checklist"]


def _real_passages(limit: int = 48) -> list[str]:
    """SciFact passages as the chunker cuts them (some past 256 tokens), else the handbook's."""
    from engine.text.chunking import chunk_text

    texts: list[str] = []
    if SCIFACT.exists():
        with SCIFACT.open(encoding="utf-8") as fh:
            for line in fh:
                doc = json.loads(line)
                texts.append(f"{doc['title']}\n{doc['text']}"[:1600])  # long ones exercise truncation at 256
                if len(texts) >= limit:
                    break
    else:
        for path in sorted(HANDBOOK.glob("*.md")):
            texts.extend(p.text for p in chunk_text(path.read_text(encoding="utf-8"), 1000, 200))
    return texts


def _settings(home: Path, cache: Path, **more: str):
    return load_settings({"home": str(home), "model_cache": str(cache), **more}, env={})


@pytest.fixture(scope="module")
def torch_embedder():
    return SentenceTransformerEmbedder(model_card_for("default"))


@pytest.fixture
def cache_copy(model_cache: Path, real_embedder, tmp_path: Path) -> Path:
    """A private copy of the session's exported cache (the export itself already paid)."""
    real_embedder.prepare()
    target = tmp_path / "models"
    shutil.copytree(model_cache, target, ignore=shutil.ignore_patterns(".export.lock"))
    return target


def _handbook_docs():
    return [from_text(p.read_text(encoding="utf-8"), name=p.name) for p in sorted(HANDBOOK.glob("*.md"))]


# -- same vectors ---------------------------------------------------------------------


def test_onnx_gives_torchs_vectors_on_real_passages(real_embedder, torch_embedder) -> None:
    texts = _real_passages()
    onnx = real_embedder.encode(texts)
    assert real_embedder.status()["runtime"] == "onnx"
    reference = torch_embedder.encode(texts)
    cosines = np.sum(onnx * reference, axis=1)
    assert onnx.shape == reference.shape == (len(texts), 384)
    assert float(cosines.min()) >= 0.9999, f"lowest cosine {cosines.min()} at passage {cosines.argmin()}"
    assert np.allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-5)


def test_a_dataset_built_with_torch_answers_the_same_top10_through_onnx(kx_home: Path, model_cache: Path,
                                                                        real_embedder, torch_embedder) -> None:
    real_embedder.prepare()
    torch_engine = Engine(_settings(kx_home, model_cache, embed_runtime="torch"), embedder=torch_embedder)
    torch_engine.ingest("handbook", _handbook_docs())
    onnx_engine = Engine(_settings(kx_home, model_cache))
    assert onnx_engine.prepare_model()["runtime"] == "onnx"
    for text in QUERIES:
        for mode in ("dense", "hybrid"):
            want = [h.passage_ref for h in torch_engine.query("handbook", text, k=10, mode=mode, rerank=False).hits]
            got = [h.passage_ref for h in onnx_engine.query("handbook", text, k=10, mode=mode, rerank=False).hits]
            assert got == want, (text, mode)
    # and the other way round: a dataset built through ONNX takes torch's queries (no re-ingest)
    onnx_engine.ingest("handbook-onnx", _handbook_docs())
    hit = torch_engine.query("handbook-onnx", QUERIES[0], k=3, mode="dense").hits
    assert hit and hit[0].document_name == "leave-and-holidays.md"


def test_torch_runtime_is_still_there_and_said_so(kx_home: Path, model_cache: Path) -> None:
    engine = Engine(_settings(kx_home, model_cache, embed_runtime="torch"))
    engine.ingest("h", [from_text("Employees accrue 25 days of paid leave a year.", name="leave")])
    assert engine.query("h", "paid holidays", mode="dense").hits[0].document_name == "leave"
    runtime = engine.info()["embed_model"]["runtime"]
    assert runtime == {"runtime": "torch", "reason": "KX_EMBED_RUNTIME=torch", "loaded": True}


# -- the cache ------------------------------------------------------------------------


def test_the_cache_is_reused_not_exported_again(kx_home: Path, cache_copy: Path) -> None:
    settings = _settings(kx_home, cache_copy)
    graph = model_folder(settings, model_card_for("default")) / GRAPH
    before = graph.stat().st_mtime_ns
    lines: list[str] = []
    status = Engine(settings).prepare_model(lines.append)
    assert status["runtime"] == "onnx" and status["loaded"] is True
    assert lines == [] and graph.stat().st_mtime_ns == before


def test_a_damaged_graph_is_exported_again_on_first_ingest(kx_home: Path, cache_copy: Path) -> None:
    settings = _settings(kx_home, cache_copy)
    graph = model_folder(settings, model_card_for("default")) / GRAPH
    with graph.open("r+b") as fh:  # same size, garbage in the middle of the weights
        fh.seek(graph.stat().st_size // 2)
        fh.write(os.urandom(4096))
    events: list[object] = []
    Engine(settings).ingest("h", [from_text("The travel policy covers taxis to the airport.", name="travel")],
                            on_event=events.append)
    lines = [e.message for e in events if isinstance(e, Notice) and e.kind == "preparing"]
    assert any("damaged" in line for line in lines), lines
    assert any("exporting" in line for line in lines) and any("ready" in line for line in lines), lines
    assert plan_runtime(settings, model_card_for("default")).graph == graph
    hits = Engine(settings).query("h", "airport taxi", mode="dense").hits
    assert hits[0].document_name == "travel"


def _readonly_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        (folder / "probe").write_text("x")  # root writes anyway: use a place nobody can write
    except OSError:
        return folder / "models"
    return Path("/proc/kx-model-cache")


def test_a_read_only_cache_falls_back_to_torch_and_says_why(kx_home: Path, tmp_path: Path) -> None:
    cache = _readonly_folder(tmp_path)
    result = run_cli("--set", f"model_cache={cache}", "datasets", "ingest", "h",
                     "--text", "Remote workers get a laptop.")
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr and "using torch" in result.stderr
    info = run_cli("--set", f"model_cache={cache}", "info")
    assert "runtime      torch" in info.stdout and "not writable" in info.stdout, info.stdout
    query = run_cli("--set", f"model_cache={cache}", "datasets", "query", "h", "--text", "laptop", "--json")
    assert json.loads(query.stdout)["hits"][0]["document_name"].startswith("text-")

    # int8 exists only as a graph: refused in one line, and nothing is left behind
    int8 = run_cli("--set", f"model_cache={cache}", "--set", "embed_model=default-int8",
                   "datasets", "ingest", "i", "--text", "x")
    assert int8.code == Status.FAILED_PRECONDITION.exit_code
    assert int8.stderr.startswith("error: FAILED_PRECONDITION:") and "ONNX Runtime only" in int8.stderr
    assert not (kx_home / "datasets" / "i").exists()


# -- int8 -----------------------------------------------------------------------------


def test_int8_is_its_own_model_and_an_fp32_dataset_refuses_it(kx_home: Path, model_cache: Path) -> None:
    fp32 = Engine(_settings(kx_home, model_cache))
    fp32.ingest("fp32", _handbook_docs())
    int8_settings = _settings(kx_home, model_cache, embed_model="default-int8")
    int8 = Engine(int8_settings)
    assert int8.model_card().model_id == fp32.model_card().model_id + "+int8-u8u8"  # the scheme is in the id
    for attempt in (lambda: int8.query("fp32", "paid leave"),
                    lambda: int8.ingest("fp32", [from_text("more text", name="more")])):
        with pytest.raises(KxError) as refused:
            attempt()
        assert refused.value.status is Status.FAILED_PRECONDITION and "embed_model" in refused.value.message
    assert plan_runtime(int8_settings, int8.model_card()).graph is None  # refused before any export

    int8.ingest("int8", _handbook_docs())
    assert int8.info()["embed_model"]["runtime"]["runtime"] == "onnx"
    assert [s.embed_model for s in int8.list_datasets() if s.name == "int8"] == [int8.model_card().model_id]
    for text in QUERIES[:3]:
        want = fp32.query("fp32", text, k=1, mode="dense").hits[0].document_name
        assert int8.query("int8", text, k=1, mode="dense").hits[0].document_name == want, text


# -- commands -------------------------------------------------------------------------


def test_models_prepare_reports_the_runtime(model_cache: Path, real_embedder) -> None:
    real_embedder.prepare()
    result = run_cli("models", "prepare", "--json")
    assert result.code == 0, result.stderr
    [status] = json.loads(result.stdout)
    assert status["runtime"] == "onnx" and status["model"] == "default" and str(model_cache) in status["reason"]
    human = run_cli("models", "prepare")
    assert human.stdout.startswith(status["model_id"] + ": onnx: graph at ")


_COLD_QUERY = """
import json, sys
from kx_tui.cli.root import main
try:
    main(["datasets", "query", "handbook", "--text", "how many days of leave", "--json"])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in ("torch", "transformers", "sentence_transformers") if m in sys.modules)),
      file=sys.stderr)
"""


def test_a_cold_query_never_imports_torch_once_the_cache_exists(kx_home: Path, model_cache: Path,
                                                               real_embedder) -> None:
    real_embedder.prepare()
    Engine(load_settings()).ingest("handbook", _handbook_docs())
    env = {"KX_HOME": str(kx_home), "KX_MODEL_CACHE": str(model_cache), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", _COLD_QUERY], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == [], proc.stderr
    assert json.loads(proc.stdout)["hits"][0]["document_name"] == "leave-and-holidays.md"


def test_thread_count_comes_from_the_setting() -> None:
    from engine.embedding.onnx_runtime import session_options

    assert session_options(3).intra_op_num_threads == 3
    assert session_options(0).intra_op_num_threads == (os.cpu_count() or 1)
    assert load_settings({"embed_threads": "2"}, env={}).embed_threads == 2
    with pytest.raises(KxError):
        load_settings(env={"KX_EMBED_RUNTIME": "tensorflow"})
