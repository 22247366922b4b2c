"""The QA regression checks' arithmetic (tests/test_qa_dev.py, tests/test_qa_own.py): success@1 and @5 of
hybrid and sparse over a slice of a question set, held against what the slice measured."""

from __future__ import annotations

import re
import unicodedata
from typing import Callable

from engine import Engine
from engine.records import Hit

MODES = ("hybrid", "sparse")


def norm(text: str) -> str:
    """Text as the QA sets compare it: NFKC, soft hyphens out, lower case, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).replace("\u00ad", "").lower()
    return re.sub(r"\s+", " ", text).strip()


def qa_figures(engine: Engine, dataset: str, questions: list[dict], ask: Callable[[dict], str],
               answers: Callable[[dict, Hit], bool]) -> dict[str, dict[str, float]]:
    """Per mode, the share of `questions` whose first answering hit (`answers(question, hit)`) is first, and in
    the top 5; `ask(question)` is its text."""
    figures = {}
    for mode in MODES:
        ranks = []
        for q in questions:
            hits = engine.query(dataset, ask(q), k=5, mode=mode).hits
            ranks.append(next((i + 1 for i, h in enumerate(hits) if answers(q, h)), None))
        figures[mode] = {"success@1": sum(r == 1 for r in ranks) / len(ranks),
                         "success@5": sum(r is not None for r in ranks) / len(ranks)}
    return figures


def assert_near_measured(figures: dict[str, dict[str, float]], measured: dict[str, dict[str, float]],
                         questions: int) -> None:
    """Each figure at most two questions under what was measured, and hybrid at most one question under its
    keyword half (another CPU's floats may move a near tie)."""
    for mode, expected in measured.items():
        for measure, value in expected.items():
            assert figures[mode][measure] >= value - 2 / questions, (mode, measure, figures)
    for measure in ("success@1", "success@5"):
        assert figures["hybrid"][measure] >= figures["sparse"][measure] - 1 / questions, figures
