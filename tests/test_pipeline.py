"""The end-to-end half of tests/unit/test_pipeline.py (a model, processes or servers there):
The two-stage ingest: keyword-searchable at once, embedded behind, resumable after any stop.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import numpy as np
import pytest

from engine import Engine, KxError, load_settings
from engine.embedded.dataset import Dataset
from engine.text.inputs import from_jsonl, from_text

from .helpers import kx_process, needs_shared, run_cli
from .unit.test_pipeline import HANDBOOK, _scifact_jsonl, _vector_lengths, _wait_for  # noqa: F401 - helpers and fixtures


@pytest.mark.slow
@needs_shared("scifact", "corpus.jsonl")
def test_searchable_while_embedding_killed_then_resumed_by_two_racing_embeds(
        tmp_path: Path, kx_home: Path, real_embedder) -> None:
    corpus = _scifact_jsonl(tmp_path, 130)  # ~260 passages at the default chunk size
    writer = kx_process("datasets", "ingest", "sf", "--jsonl", str(corpus))
    reader = Engine(load_settings())
    try:
        def sparse_hits():
            try:
                return reader.query("sf", "microstructural development of white matter", mode="sparse", k=10)
            except KxError:
                return None  # the dataset's first commit has not landed yet

        # stage 1 makes passages keyword-searchable while stage 2 is still embedding
        early = _wait_for(sparse_hits, 120, "the first keyword hits")
        total = reader.dataset_summary("sf").passages
        hybrid = reader.query("sf", "microstructural development of white matter", mode="hybrid", k=10)
        assert len(early) > 0 and len(hybrid) > 0 and hybrid.dense_coverage < 1.0
        assert any("embedding continues" in note for note in hybrid.notes)

        # kill it once some vectors are committed and some are not
        def mid_embedding() -> bool:
            summary = reader.dataset_summary("sf")
            return summary.passages >= 200 and 0 < summary.backlog < summary.passages - 32
        _wait_for(mid_embedding, 300, "stage 2 under way")
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.communicate()
        reader.close()
    after_kill = Engine(load_settings()).dataset_summary("sf")
    assert after_kill.passages >= 200 and after_kill.passages >= total and 0 < after_kill.backlog

    # two resumers at once: the write lock makes one wait, so the backlog is embedded exactly once
    racers = [kx_process("datasets", "embed", "sf", "--json") for _ in range(2)]
    outputs = [proc.communicate(timeout=600) for proc in racers]
    assert [proc.returncode for proc in racers] == [0, 0], [err for _out, err in outputs]
    reports = [json.loads(out) for out, _err in outputs]
    assert sorted(r["embedded"] for r in reports) == [0, after_kill.backlog]
    assert all(r["backlog"] == 0 for r in reports)
    assert set(_vector_lengths(kx_home, "sf")) == {384 * 4}

    # the same top-10 as an uninterrupted ingest of the same documents, in every mode
    resumed = Engine(load_settings())
    fresh = Engine(load_settings({"home": str(tmp_path / "fresh")}), embedder=real_embedder)
    fresh.ingest("sf", list(from_jsonl(corpus, 10**7)))
    for mode in ("dense", "sparse", "hybrid"):
        ours = resumed.query("sf", "microstructural development of white matter", mode=mode, k=10)
        theirs = fresh.query("sf", "microstructural development of white matter", mode=mode, k=10)
        assert [h.passage_ref for h in ours] == [h.passage_ref for h in theirs], mode
        assert ours.dense_coverage == 1.0
    vectors = Dataset(resumed.settings, "sf").dense(384)
    assert len(vectors) == after_kill.passages
    np.testing.assert_equal(len(set(_vector_lengths(kx_home, "sf"))), 1)


def test_a_cuda_request_on_this_machine_falls_back_to_cpu_and_says_why(real_embedder, model_cache: Path,
                                                                         kx_home: Path) -> None:
    from engine.embedding.onnx_runtime import OnnxEmbedder

    inner = real_embedder.prepare()
    gpu_asked = OnnxEmbedder(inner.card, inner.graph, 2, "cuda")
    assert gpu_asked.device in ("cpu", "cuda")
    if gpu_asked.device == "cpu":  # no onnxruntime-gpu here (or no GPU): CPU, with the reason in kx info
        assert gpu_asked.device_reason.startswith("CPU: KX_EMBED_DEVICE=cuda")
    vectors = gpu_asked.encode(["paid leave", "refund for a damaged logger"])
    assert np.allclose(vectors, inner.encode(["paid leave", "refund for a damaged logger"]), atol=1e-4)
    info = run_cli("--set", "embed_device=cuda", "info", "--json")
    runtime = json.loads(info.stdout)["embed_model"]["runtime"]
    assert runtime["device"] in ("cpu", "cuda") and runtime["device_reason"]


@pytest.mark.slow
def test_kx_serve_finishes_backlogs_at_start(tmp_path: Path, kx_home: Path) -> None:
    # stage 1 only, with the real model's fingerprint, stopped before embedding
    from engine.embedding.cards import model_card_for
    from engine.embedding.embedders import load_embedder

    real = Engine(load_settings(), embedder=load_embedder(model_card_for("default"), load_settings()))
    real.ingest("hb", [from_text(t) for t in HANDBOOK], should_stop=lambda: True)
    real.close()
    assert Engine(load_settings()).dataset_summary("hb").backlog == 4
    server = kx_process("serve", "--port", "0", "--dev-allow-local", "--quiet")
    try:
        _wait_for(lambda: Engine(load_settings()).dataset_summary("hb").backlog == 0, 180,
                  "kx serve to embed the backlog")
    finally:
        server.send_signal(signal.SIGTERM)
        _out, err = server.communicate(timeout=60)
    assert "hb: embedding the 4 passages an earlier ingest left" in err and "hb: 4 passages embedded" in err
