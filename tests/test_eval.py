"""`kx eval`: standard IR measures per mode, a document counted once at its best passage.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine import KxError, Status
from engine.evaluation import document_run, evaluate, read_qrels

from .helpers import run_cli


@dataclass
class FakeHit:
    document_name: str


def test_a_document_counts_once_at_its_best_passage() -> None:
    run = document_run([FakeHit("a"), FakeHit("b"), FakeHit("a"), FakeHit("c")])
    assert sorted(run, key=run.get, reverse=True) == ["a", "b", "c"]


def test_measures_match_hand_worked_values() -> None:
    # One query; relevant documents a and b (gain 1). Ranking: x, a, y, b.
    # DCG@10 = 1/log2(3) + 1/log2(5); ideal = 1 + 1/log2(3). RR = 1/2. Recall@100 = 1.
    ranking = [FakeHit(n) for n in ("x", "a", "y", "b")]
    report = evaluate(lambda text, mode, rerank: ranking, "t", {"q1": "question"}, {"q1": {"a": 1, "b": 1}},
                      ["dense"])
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    ideal = 1 + 1 / math.log2(3)
    assert report.scores["dense"]["nDCG@10"] == pytest.approx(dcg / ideal, abs=1e-6)
    assert report.scores["dense"]["RR@10"] == pytest.approx(0.5)
    assert report.scores["dense"]["R@100"] == pytest.approx(1.0)


def test_a_judged_query_with_no_hit_counts_as_zero() -> None:
    answers = {"first": [FakeHit("a")], "second": []}
    report = evaluate(lambda text, mode, rerank: answers[text], "t", {"q1": "first", "q2": "second"},
                      {"q1": {"a": 1}, "q2": {"b": 1}}, ["sparse"])
    assert report.scores["sparse"]["nDCG@10"] == pytest.approx(0.5)


def test_qrels_with_a_header_and_graded_scores_are_read(tmp_path: Path) -> None:
    path = tmp_path / "qrels.tsv"
    path.write_text("query-id\tcorpus-id\tscore\n1\td1\t2\n1\td2\t0\n2\td3\t1\n")
    assert read_qrels(path) == {"1": {"d1": 2, "d2": 0}, "2": {"d3": 1}}


def test_eval_errors_are_one_line(tmp_path: Path, kx_home: Path) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"_id": "q1", "text": "x"}\n')
    qrels = tmp_path / "r.tsv"
    qrels.write_text("q9\td1\t1\n")
    missing = run_cli("eval", "hb", "--queries", str(tmp_path / "nope.jsonl"), "--qrels", str(qrels))
    assert missing.code == Status.NOT_FOUND.exit_code and missing.stderr.startswith("error: NOT_FOUND:")
    unmatched = run_cli("eval", "hb", "--queries", str(queries), "--qrels", str(qrels))
    assert unmatched.code == Status.INVALID_ARGUMENT.exit_code
    assert "no query in the queries file has a judgement" in unmatched.stderr
    with pytest.raises(KxError):
        read_qrels(tmp_path / "absent.tsv")


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
