"""Retrieval quality on a judged query set: nDCG@10, Recall@100 and MRR@10 per mode.

Relevance judgements name documents, kx returns passages: a document counts
once, at the rank of its best passage. Measures come from ir-measures (backed
by pytrec_eval), so figures match trec_eval's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .errors import invalid, not_found
from .records import RetrievalMode

# Columns a report can hold: (label, mode, rerank)
VARIANTS: dict[str, tuple[RetrievalMode, bool]] = {
    RetrievalMode.DENSE.value: (RetrievalMode.DENSE, False),
    RetrievalMode.SPARSE.value: (RetrievalMode.SPARSE, False),
    RetrievalMode.HYBRID.value: (RetrievalMode.HYBRID, False),
    f"{RetrievalMode.HYBRID.value}+mmr": (RetrievalMode.HYBRID, True),
}
MEASURES = ("nDCG@10", "R@100", "RR@10")
MEASURE_LABELS = {"nDCG@10": "nDCG@10", "R@100": "Recall@100", "RR@10": "MRR@10"}
# Passages each retriever hands to fusion during evaluation: deep enough that
# the fused list still holds 100 distinct documents for Recall@100 when long
# documents are several passages each.
EVAL_DEPTH = 300


@dataclass
class EvalReport:
    dataset: str
    queries: int
    judged_queries: int
    scores: dict[str, dict[str, float]] = field(default_factory=dict)   # variant -> measure -> value
    mean_ms: dict[str, float] = field(default_factory=dict)             # variant -> mean query time

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "queries": self.queries,
            "judged_queries": self.judged_queries,
            "measures": {v: {MEASURE_LABELS[m]: round(s[m], 4) for m in MEASURES} for v, s in self.scores.items()},
            "mean_query_ms": {v: round(ms, 2) for v, ms in self.mean_ms.items()},
        }


def read_queries(path: Path) -> dict[str, str]:
    """{query id: text} from a JSONL file of {"_id" (or "id"), "text"} objects."""
    if not path.exists():
        raise not_found(f"queries file {path} does not exist; check the path")
    queries: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            qid, text = record.get("_id", record.get("id")), record["text"]
        except (ValueError, KeyError, AttributeError):
            raise invalid(f"{path.name}:{number} is not a JSON object with \"_id\" and \"text\"") from None
        queries[str(qid)] = str(text)
    return queries


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """{query id: {document id: relevance}} from a TSV (query-id, corpus-id, score; header optional)."""
    if not path.exists():
        raise not_found(f"qrels file {path} does not exist; check the path")
    qrels: dict[str, dict[str, int]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        parts = line.split("\t") if "\t" in line else line.split()
        if not parts or not line.strip():
            continue
        if len(parts) == 4:  # trec layout: qid iteration docid rel
            parts = [parts[0], parts[2], parts[3]]
        if len(parts) != 3:
            raise invalid(f"{path.name}:{number} needs three columns: query-id, corpus-id, score")
        try:
            relevance = int(float(parts[2]))
        except ValueError:
            if number == 1:
                continue  # the header row
            raise invalid(f"{path.name}:{number} has a non-numeric score {parts[2]!r}") from None
        qrels.setdefault(parts[0], {})[parts[1]] = relevance
    return qrels


def document_run(hits: list[Any]) -> dict[str, float]:
    """Passage hits -> {document name: score}, each document at its best passage's rank."""
    run: dict[str, float] = {}
    for hit in hits:
        if hit.document_name not in run:
            run[hit.document_name] = float(len(hits) - len(run))  # strictly decreasing with rank
    return run


def evaluate(
    query_fn: Callable[[str, str, bool], list[Any]],
    dataset: str,
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    variants: list[str],
    on_progress: Callable[[str, int, int], None] | None = None,
) -> EvalReport:
    """Run every judged query under each variant and score the document rankings.

    `query_fn(text, mode, rerank)` returns the ranked passage hits.
    """
    import time

    import ir_measures
    from ir_measures import Qrel, ScoredDoc

    judged = {qid: text for qid, text in queries.items() if qid in qrels}
    if not judged:
        raise invalid("no query in the queries file has a judgement in the qrels file; check that their ids match")
    qrel_rows = [Qrel(q, d, rel) for q, docs in qrels.items() if q in judged for d, rel in docs.items()]
    measures = [ir_measures.parse_measure(m) for m in MEASURES]
    report = EvalReport(dataset, len(queries), len(judged))
    for variant in variants:
        mode, rerank = VARIANTS[variant]
        run = []
        started = time.perf_counter()
        for i, (qid, text) in enumerate(judged.items(), start=1):
            for doc, score in document_run(query_fn(text, mode, rerank)).items():
                run.append(ScoredDoc(qid, doc, score))
            if on_progress:
                on_progress(variant, i, len(judged))
        report.mean_ms[variant] = (time.perf_counter() - started) * 1000.0 / len(judged)
        # Average over every judged query: one with no hit at all counts as
        # zero (trec_eval -c), instead of silently leaving the mean.
        totals = {str(m): 0.0 for m in measures}
        for metric in ir_measures.iter_calc(measures, qrel_rows, run):
            totals[str(metric.measure)] += float(metric.value)
        report.scores[variant] = {m: totals[str(ir_measures.parse_measure(m))] / len(judged) for m in MEASURES}
    return report
