"""The same documents give the same answers, however they were committed (issue 38).

A property test: the same final set of documents reached through random commit groups
(KX_INGEST_COMMIT_PASSAGES), file orders, ingests split in several commands, older versions and retired
documents met on the way, stops part-way (resumed by the next command) and a lowered sparse watermark
(what a kill between the catalogue's commit and the keyword index's leaves, and a re-index) answers with
the same hits and bit-identical scores as one ingest of those documents. The hash embedder stands in for
the model there (its vectors are the same for the same text).

With the real model (slow): the shipped handbook ingested in one go, against the same files reached
another way: small commit groups, the files in reverse order over two commands, an older version of one
file first, a stop in the embedding stage resumed by `embed`, and a sparse watermark lowered. Every hit
and every score the same, in every mode.
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Engine, load_settings
from engine.text.inputs import from_file, from_text

from .helpers import REPO, small_engine

WORDS = ("tumor cancer cells growth risk cardiovascular disease blood pressure heart vaccine immune response "
         "protein gene expression mutation therapy dose patients trial outcome mortality infection virus "
         "bacteria antibiotic resistance diet exercise sleep stress brain memory").split()
QUERIES = ["cancer cells tumor growth", "risk of cardiovascular disease", "immune response to the vaccine",
           "gene mutation therapy", "sleep stress memory brain", "antibiotic resistance of bacteria"]


def _text(seed: int, sentences: int) -> str:
    rng = random.Random(seed)
    return " ".join(" ".join(rng.choices(WORDS, k=rng.randint(6, 14))).capitalize() + "."
                    for _ in range(sentences))


FINAL = {f"doc{i}": _text(i, 3 + i % 5) for i in range(8)}
OLDER = {name: _text(100 + i, 4) for i, name in enumerate(FINAL)}      # an earlier version of each
GONE = {f"gone{i}": _text(200 + i, 4) for i in range(2)}               # ingested, then retired


def _answers(engine: Engine, name: str) -> list[Any]:
    """Every query's hits, in sparse and hybrid mode: refs and every score, exactly."""
    out = []
    for query in QUERIES:
        for mode in ("sparse", "hybrid"):
            result = engine.query(name, query, mode=mode, k=10)
            out.append((query, mode, [(h.passage_ref, h.score, h.sparse_score, h.dense_score, h.sparse_rank,
                                       h.dense_rank) for h in result.hits]))
    return out


@pytest.fixture(scope="module")
def one_shot(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    engine = small_engine(env={}, home=str(tmp_path_factory.mktemp("one-shot")))
    engine.ingest("a", [from_text(text, name) for name, text in FINAL.items()])
    answers = _answers(engine, "a")
    engine.close()
    return answers


def _lower_watermark(engine: Engine, name: str, to: int) -> None:
    sidecar = engine.settings.datasets_dir / name / "sparse.json"
    meta = json.loads(sidecar.read_text())
    meta["watermark"] = min(to, meta["watermark"])
    sidecar.write_text(json.dumps(meta))


@st.composite
def histories(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.permutations(sorted(FINAL)))
    versioned = draw(st.sets(st.sampled_from(sorted(FINAL)), max_size=3))
    gone = draw(st.sets(st.sampled_from(sorted(GONE))))
    # what goes in, in order: older versions and doomed documents first, each final document later
    steps = [("old", n) for n in sorted(versioned)] + [("gone", n) for n in sorted(gone)] + \
            [("final", n) for n in names]
    cuts = sorted(draw(st.sets(st.integers(1, len(steps) - 1), max_size=3)))
    calls = [steps[a:b] for a, b in zip([0, *cuts], [*cuts, len(steps)])]
    return {"calls": calls, "commit": draw(st.sampled_from([1, 2, 3, 5, 8, 2048])),
            "stops": [draw(st.integers(0, 6)) for _ in calls],           # 0: not stopped
            "watermarks": [draw(st.none() | st.integers(0, 40)) for _ in calls]}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories())
def test_the_same_documents_answer_the_same_whatever_the_commits(one_shot: list[Any],
                                                                 history: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as home:
        engine = small_engine(env={}, home=str(home), ingest_commit_passages=history["commit"])
        try:
            texts = {"old": OLDER, "gone": GONE, "final": FINAL}
            for call, stop_after, watermark in zip(history["calls"], history["stops"], history["watermarks"]):
                events = [0]

                def count(_event: object) -> None:
                    events[0] += 1

                engine.ingest("a", [from_text(texts[kind][n], n) for kind, n in call], on_event=count,
                              should_stop=(lambda: events[0] >= stop_after) if stop_after else None)
                if watermark is not None:
                    _lower_watermark(engine, "a", watermark)
            gone = [n for call in history["calls"] for kind, n in call if kind == "gone"]
            if gone:
                engine.retire("a", gone)
            engine.embed("a")   # what a stop left for the next command
            assert _answers(engine, "a") == one_shot
        finally:
            engine.close()


HANDBOOK_QUERIES = ["how long do I have to return a logger?", "hotel costs abroad", "who gets a security badge",
                    "carry over unused holiday", "working from home equipment stipend"]


def _handbook_answers(engine: Engine) -> list:
    return [[(h.passage_ref, h.score, h.dense_score, h.sparse_score) for h in
             engine.query("handbook", query, mode=mode, k=8).hits]
            for query in HANDBOOK_QUERIES for mode in ("hybrid", "dense", "sparse")]


@pytest.mark.slow
def test_the_handbook_answers_the_same_however_it_was_committed(tmp_path: Path, real_embedder) -> None:
    files = sorted((REPO / "samples" / "handbook").glob("*.md"))
    one = Engine(load_settings({"home": str(tmp_path / "one")}, env={}), embedder=real_embedder)
    one.ingest("handbook", [from_file(p, 10**7) for p in files])
    expected = _handbook_answers(one)
    one.close()

    other = Engine(load_settings({"home": str(tmp_path / "other"), "ingest_commit_passages": 3}, env={}),
                   embedder=real_embedder)
    first = files[0]
    other.ingest("handbook", [from_text(first.read_text() + "\nAn older draft said otherwise.", first.stem)])
    stops = iter(range(4))
    other.ingest("handbook", [from_file(p, 10**7) for p in reversed(files[3:])],
                 should_stop=lambda: next(stops, 4) >= 3)   # a stop part-way through the embedding
    sidecar = tmp_path / "other" / "datasets" / "handbook" / "sparse.json"
    meta = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**meta, "watermark": 2}))   # the keyword index re-indexes from passage 3
    other.ingest("handbook", [from_file(p, 10**7) for p in reversed(files[:3])])
    other.embed("handbook")
    assert _handbook_answers(other) == expected
    other.close()
