"""The end-to-end half of tests/unit/test_answer_span.py (a model, processes or servers there):
answer_span: the sentence or two of each hit that answer the query (engine/text/answer_span.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Engine, load_settings


@pytest.mark.slow
def test_every_hit_of_a_real_query_carries_its_answering_sentence(handbook_home: Path, real_embedder) -> None:
    from engine.server.client import _query_result

    engine = Engine(load_settings({"home": str(handbook_home)}, env={}), embedder=real_embedder)
    result = engine.query("handbook", "how many days do card refunds take to appear", k=5)
    assert result.hits and all(h.answer_span is not None for h in result.hits)
    top = result.hits[0]
    text = engine.document_text("handbook", top.document_ref)
    start, end = top.answer_span
    assert top.char_start <= start < end <= top.char_end
    assert "5 to 7 business days" in text[start:end]
    assert "answer_span" in result.timings_ms
    # --json and the gateway send it as a list; the SDK gives the tuple back
    record = result.to_dict()
    assert record["hits"][0]["answer_span"] == [start, end]
    import json

    again = _query_result(json.loads(json.dumps(record)))
    assert again.hits[0].answer_span == (start, end)
    engine.close()
