"""`kx eval`: standard IR measures per mode, a document counted once at its best passage."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine import KxError, Status
from engine.evaluation import document_run, evaluate, read_qrels

from ..helpers import run_cli


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
