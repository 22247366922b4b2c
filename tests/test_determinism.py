"""The same documents give the same answers with the real model, however they were committed (issue 38).

The shipped handbook ingested in one go, against the same files reached another way: small commit
groups, the files in reverse order over two commands, an older version of one file first, a stop in
the embedding stage resumed by `embed`, and a sparse watermark lowered (a kill between the catalogue's
commit and the keyword index's, or a re-index). Every hit and every score the same, in every mode.
tests/unit/test_determinism.py holds the property over random histories with the hash embedder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import Engine, load_settings
from engine.text.inputs import from_file, from_text

from .helpers import REPO

QUERIES = ["how long do I have to return a logger?", "hotel costs abroad", "who gets a security badge",
           "carry over unused holiday", "working from home equipment stipend"]


def _answers(engine: Engine) -> list:
    return [[(h.passage_ref, h.score, h.dense_score, h.sparse_score) for h in
             engine.query("handbook", query, mode=mode, k=8).hits]
            for query in QUERIES for mode in ("hybrid", "dense", "sparse")]


@pytest.mark.slow
def test_the_handbook_answers_the_same_however_it_was_committed(tmp_path: Path, real_embedder) -> None:
    files = sorted((REPO / "samples" / "handbook").glob("*.md"))
    one = Engine(load_settings({"home": str(tmp_path / "one")}, env={}), embedder=real_embedder)
    one.ingest("handbook", [from_file(p, 10**7) for p in files])
    expected = _answers(one)
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
    assert _answers(other) == expected
    other.close()
