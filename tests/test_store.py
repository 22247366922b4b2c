"""The end-to-end half of tests/unit/test_store.py (a model, processes or servers there):
The dataset store: names, dedupe, refusals, provenance, fingerprint, derived indexes.
"""

from __future__ import annotations

import pytest

from engine import Engine
from engine.text.inputs import from_text

from .unit.test_store import HANDBOOK  # noqa: F401 - helpers and fixtures


@pytest.mark.slow  # threads racing an ingest: seconds
def test_queries_from_many_threads_while_ingesting_all_answer(hash_engine: Engine) -> None:
    import threading

    hash_engine.ingest("live", [from_text(t) for t in HANDBOOK])
    errors: list[BaseException] = []
    answers: list[int] = []

    def ask() -> None:
        try:
            for _ in range(25):
                answers.append(len(hash_engine.query("live", "annual leave token refunds", k=5).hits))
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
    for i in range(10):  # each ingest makes the open readers stale mid-flight
        hash_engine.ingest("live", [from_text(f"Parking note {i}: bays close at ten.")])
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert len(answers) == 150 and all(n > 0 for n in answers)
    assert any("Parking note 9" in h.text for h in hash_engine.query("live", "parking bays", k=20).hits)
