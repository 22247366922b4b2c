"""What dense's long-document correction (engine/ranking.py `dense_list`) costs a query: thread CPU of
hybrid+MMR with it and without it (the graph's plain answer), alternating query by query in one process
so the machine's load hits both alike.

    KX_BENCH_DIR=DIR python benchmarks/long_documents.py [--dataset qa-dev] [--rounds 5]

The dataset must hold long documents (qa.py's `qa-dev` or `qa-pile`: Walden, a 1,167-passage EPUB), or
the correction takes its plain path and there is nothing to time. Questions: both QA sets' 99, the
vectors embedded once and given with the text, 20 warm-up queries first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from common import cpu_name
from qa import DEV_NAME, ensure_qa_dataset, load_dev_questions, load_questions

from engine import ranking


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=DEV_NAME)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    engine = ensure_qa_dataset(name=args.dataset)
    questions = [q["question"] for q in load_dev_questions() + load_questions()]
    vectors = dict(zip(questions, engine.embedder().encode(questions)))
    corrected = ranking.dense_list

    def plain(searcher, vector, pool, only):
        return searcher.dense_candidates(vector, pool, only)

    for q in questions[:20]:
        engine.query(args.dataset, q, k=10, vector=vectors[q])
    times: dict[str, list[float]] = {"plain": [], "corrected": []}
    for round_ in range(args.rounds):
        for i, q in enumerate(questions):
            for which in (("plain", "corrected") if (i + round_) % 2 else ("corrected", "plain")):
                ranking.dense_list = corrected if which == "corrected" else plain  # type: ignore[assignment]
                start = time.thread_time()
                engine.query(args.dataset, q, k=10, vector=vectors[q])
                times[which].append((time.thread_time() - start) * 1000)
    ranking.dense_list = corrected
    p50 = {which: statistics.median(values) for which, values in times.items()}
    print(json.dumps({"dataset": args.dataset, "cpu": cpu_name(), "thread CPU p50 ms": p50,
                      "corrected / plain": p50["corrected"] / p50["plain"]}))


if __name__ == "__main__":
    main()
