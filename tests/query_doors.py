"""Every query option through every door: one small dataset, and for each QueryOptions field a value that
changes the answer (tests/test_query_doors.py for the CLI, the Python SDK, the gateway's HTTP and MCP;
sdk/typescript/test/doors.test.mjs for the TypeScript SDK).

    python -m tests.query_doors KX_HOME    # builds the dataset there; prints the cases and their answers

Answers are compared by `shape`: which passages, in which places of the answer and of each list, and the
answer's own fields (mode, k, rerank, expanded terms), integers and strings only, so a door in another
process (a `kx serve` with its own model) answers the same to the last digit.
"""

from __future__ import annotations

import json
import sys
from typing import Any

DATASET = "doors"
QUESTION = "how long do I have to return a tent?"
# a second question whose pre-computed vector stands in for the text's own (the `vector` case)
OTHER_QUESTION = "when does the parking garage open?"

DOCUMENTS: tuple[tuple[str, str], ...] = (
    ("tents/returns", "Tents may be returned within 30 days of purchase with the receipt. Opened tents are "
                      "refunded as store credit."),
    ("tents/returns-copy", "Tents may be returned within 30 days of purchase with the receipt. Opened tents are "
                           "refunded as store credit only."),
    ("tents/care", "Dry a tent fully before storing it; mildew voids the warranty on every tent we sell."),
    ("stoves/returns", "Camping stoves can be returned within 14 days if unused and in their box."),
    ("garage", "The parking garage opens at 6 am and closes at midnight; the return lane is on level 1."),
    ("policy", "Any item may be returned to the front desk; refunds go to the original card within a week."),
)
# a second version of one document: `versions: all` shows the first one too
NEW_VERSION = ("policy", "Any item may be returned to the front desk within 60 days; refunds take a week.")

# for each QueryOptions field, what a query sets it to (the vector is filled in by `cases`)
CHANGES: dict[str, Any] = {
    "vector": None,
    "k": 2,
    "mode": "sparse",
    "rerank": False,
    "where": ["name:tents/*"],
    "versions": "all",
    "expand": True,
}


def build(engine: Any) -> None:
    """The dataset, in `engine` (an Engine with a model): six documents, then a new version of one."""
    from engine.text.inputs import from_text

    engine.ingest(DATASET, [from_text(text, name) for name, text in DOCUMENTS])
    engine.ingest(DATASET, [from_text(NEW_VERSION[1], NEW_VERSION[0])])


def cases(engine: Any) -> dict[str, dict[str, Any]]:
    """Each option's query options: the option set to its changed value."""
    vector = [float(x) for x in engine.embedder().encode([OTHER_QUESTION])[0]]
    return {name: {name: vector if name == "vector" else value} for name, value in CHANGES.items()}


def shape(answer: dict[str, Any]) -> dict[str, Any]:
    """What a door's answer (a QueryResult's to_dict, as JSON carries it) is compared by."""
    return {"mode": str(answer["mode"]), "k": answer["k"], "rerank": answer["rerank"],
            "expanded_terms": answer.get("expanded_terms"),
            "hits": [[h["passage_ref"], h["rank"], h["fused_rank"], h["dense_rank"], h["sparse_rank"], h["version"]]
                     for h in answer["hits"]]}


def main(home: str) -> None:
    from engine import Engine, load_settings

    engine = Engine(load_settings({"home": home}))
    try:
        build(engine)
        out = {"dataset": DATASET, "question": QUESTION, "cases": []}
        for name, options in cases(engine).items():
            answer = engine.query(DATASET, QUESTION, **options).to_dict()
            out["cases"].append({"option": name, "options": options, "shape": shape(json.loads(json.dumps(answer)))})
        print(json.dumps(out))
    finally:
        engine.close()


if __name__ == "__main__":
    main(sys.argv[1])
