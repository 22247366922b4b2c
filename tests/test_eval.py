"""The end-to-end half of tests/unit/test_eval.py (a model, processes or servers there):
`kx eval`: standard IR measures per mode, a document counted once at its best passage.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .helpers import run_cli


@pytest.mark.slow
def test_kx_eval_ingests_the_corpus_and_prints_each_mode(tmp_path: Path, kx_home: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in [
        {"_id": "d1", "title": "Token", "text": "The KX-4021 hardware token unlocks the VPN."},
        {"_id": "d2", "title": "Refunds", "text": "Customers get their money back within 30 days."},
        {"_id": "d3", "title": "Leave", "text": "Staff have 25 days of annual leave a year."},
        {"_id": "d4", "title": "Travel", "text": "Claim mileage at 30 cents per kilometre with form EXP-220."},
    ]))
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"_id": "q1", "text": "KX-4021"}\n{"_id": "q2", "text": "EXP-220 mileage"}\n'
                       '{"_id": "q3", "text": "unjudged question"}\n')
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td4\t1\n")
    result = run_cli("eval", "hb", "--corpus", str(corpus), "--queries", str(queries), "--qrels", str(qrels),
                     "--json")
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["judged_queries"] == 2 and report["queries"] == 3
    assert set(report["measures"]) == {"dense", "sparse", "hybrid", "hybrid+mmr"}
    assert report["measures"]["sparse"] == {"nDCG@10": 1.0, "Recall@100": 1.0, "MRR@10": 1.0}
    for figures in report["measures"].values():
        assert set(figures) == {"nDCG@10", "Recall@100", "MRR@10"}
        assert all(0.0 <= v <= 1.0 for v in figures.values())

    again = run_cli("eval", "hb", "--corpus", str(corpus), "--queries", str(queries), "--qrels", str(qrels),
                    "--mode", "sparse")
    assert again.code == 0, again.stderr
    assert "4 unchanged" in again.stderr  # the corpus was already there
    assert "nDCG@10" in again.stdout and "sparse" in again.stdout and "hybrid" not in again.stdout
