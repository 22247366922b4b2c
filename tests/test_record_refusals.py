"""One bad record refused alone, with its line; a stopped ingest reports every document it committed (issue 38).

The real JSONL reader, engine and gateway (under uvicorn on loopback), over the hash embedder.
"""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest

from engine import Engine, load_settings
from engine.records import DocumentResult, DocumentStatus, Progress
from engine.text.inputs import RECORD_MEDIA_TYPE, from_jsonl, from_text

from .helpers import HashEmbedder, catalogue_counts, serving


def test_a_bad_jsonl_line_is_refused_with_its_number_and_the_rest_goes_in(hash_engine: Engine,
                                                                          tmp_path: Path) -> None:
    deep = "[" * 3000 + "]" * 3000
    lines = ['{"_id": "a", "text": "Otters hold hands while they sleep."}',
             '{"_id": "deep", "text": "x", "extra": ' + deep + '}',                      # line 2: too deep
             '{"_id": "big", "text": "' + "w " * 40_000 + '"}',                         # line 3: too long
             '{"_id": {"no": 1}, "text": "an object for an id"}',                       # line 4: wrong type
             '{"_id": 7, "text": "Walruses sleep floating upright."}',                  # a number is an id
             '{"_id": true, "text": "true is no id"}',                                  # line 6: wrong type
             '{"_id": "huge", "text": "' + "w " * 70_000 + '"}',                        # line 7: read no further
             '{"_id": "last", "text": "The last line still goes in."}']
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n")
    docs = list(from_jsonl(path, 10_000))
    refused = {d.name: d.error.message for d in docs if d.error is not None}
    assert set(refused) == {"corpus.jsonl:2", "big", "corpus.jsonl:4", "corpus.jsonl:6", "corpus.jsonl:7"}, refused
    assert "nests its JSON too deep" in refused["corpus.jsonl:2"]
    assert "(corpus.jsonl:3) is over the 10,000-byte limit" in refused["big"]
    assert "is over 125,536 bytes" in refused["corpus.jsonl:7"]
    assert "not an object" in refused["corpus.jsonl:4"] and "not true/false" in refused["corpus.jsonl:6"]
    report = hash_engine.ingest("records", docs)
    assert [(r.name, r.status) for r in report.results if r.status == DocumentStatus.ADDED] == \
        [("a", DocumentStatus.ADDED), ("7", DocumentStatus.ADDED), ("last", DocumentStatus.ADDED)]
    assert all(r.code == "INVALID_ARGUMENT" for r in report.results if r.status == DocumentStatus.REFUSED)


def test_the_gateway_refuses_a_record_nested_too_deep_as_invalid(hash_engine: Engine) -> None:
    hash_engine.ingest("records", [from_text("a first document", "first")])
    deep = ("[" * 3000 + "]" * 3000).encode()
    with serving(hash_engine) as (url, token):
        answer = httpx.post(f"{url}/v1/datasets/records/documents", timeout=30,
                            headers={"Authorization": f"Bearer {token}"},
                            json={"documents": [{"name": "deep", "media_type": RECORD_MEDIA_TYPE,
                                                 "data_base64": base64.b64encode(deep).decode()}]})
    assert answer.status_code == 400 and answer.json()["code"] == "INVALID_ARGUMENT", answer.text


class Stopped(Exception):
    """What the CLI's handler raises on the first event after a signal (kx_tui/cli/root.py's Interrupted)."""


def test_a_stop_while_a_group_is_indexed_still_reports_that_group(kx_home: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI counts the added results it was told of, and stops at the next event after a signal: one
    inside the keyword indexing of a group already committed left that group unreported (a SIGTERM'd
    `ingest --json` said 20 documents while the catalogue held 24)."""
    monkeypatch.setattr("engine.ingest.PART_SECONDS", 0.0)   # the indexing reports progress at every step
    engine = Engine(load_settings({"chunk_size": 200, "chunk_overlap": 40, "ingest_commit_passages": 80}),
                    embedder=HashEmbedder())
    words = "cell tumor growth protein gene dose trial risk heart blood immune virus".split()
    docs = [from_text(" ".join(f"{words[(i + j) % len(words)]}{j % 7}" for j in range(300)), f"doc{i}")
            for i in range(12)]
    added: list[str] = []

    def on_event(event: object) -> None:
        if isinstance(event, DocumentResult) and event.status == DocumentStatus.ADDED:
            added.append(event.name)
        if isinstance(event, Progress) and (event.part or "").startswith("indexing"):
            raise Stopped   # a signal came: the handler raises at the next event, here inside the indexing

    with pytest.raises(Stopped):
        engine.ingest("notes", docs, on_event=on_event)
    stored, _passages = catalogue_counts(kx_home, "notes")
    assert stored > 0 and len(added) == stored, (added, stored)
    engine.close()
