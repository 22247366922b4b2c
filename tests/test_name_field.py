"""The sparse index's name field: a document's name and title count for the question that names it (issue 37,
item 3), without the title repeated inside the passages' text."""

from __future__ import annotations

import json

from engine import Engine
from engine.embedded.dataset import Dataset
from engine.embedded.sparse import FIELDS
from engine.text.analysis import build_analyzer, name_field_text
from engine.text.inputs import from_text

# The same rule in two versions of a standard: the text alone cannot tell them apart
RULE = "Keys must be rotated every {days} days, and a rotated key is kept for audit for one year."


def _ingest(engine: Engine) -> None:
    engine.ingest("std", [from_text(RULE.format(days=90) + " Version four.", name="Key Standard 4.0"),
                          from_text(RULE.format(days=30) + " Version five.", name="Key Standard 5.0"),
                          from_text("Old keys are archived, never reused.", name="Archive Notes")])


def _first_sparse(engine: Engine, question: str) -> str:
    return engine.query("std", question, mode="sparse", rerank=False).hits[0].document_name


def test_a_question_naming_a_document_and_its_version_finds_that_version(hash_engine: Engine) -> None:
    _ingest(hash_engine)
    assert _first_sparse(hash_engine, "In Key Standard 4.0, how often must keys be rotated?") == "Key Standard 4.0"
    assert _first_sparse(hash_engine, "In Key Standard 5.0, how often must keys be rotated?") == "Key Standard 5.0"
    # the text is still what a passage is found by: a question naming neither finds both; a word only the
    # name holds finds its document too
    hits = hash_engine.query("std", "how often must keys be rotated?", mode="sparse", rerank=False).hits
    assert {h.document_name for h in hits[:2]} == {"Key Standard 4.0", "Key Standard 5.0"}
    assert _first_sparse(hash_engine, "the notes") == "Archive Notes"


def test_an_index_written_before_the_name_field_is_rebuilt_not_misread(hash_engine: Engine) -> None:
    _ingest(hash_engine)
    dataset = Dataset(hash_engine.settings, "std")
    meta = json.loads(dataset.sparse(True).sidecar.read_text())
    assert meta["fields"] == FIELDS
    del meta["fields"]   # as the index before the name field recorded it
    dataset.sparse(True).sidecar.write_text(json.dumps(meta))
    assert dataset.sparse(True).watermark == 0
    fresh = Engine(hash_engine.settings, hash_engine.embedder())
    assert _first_sparse(fresh, "In Key Standard 4.0, how often must keys be rotated?") == "Key Standard 4.0"
    assert json.loads(dataset.sparse(True).sidecar.read_text())["fields"] == FIELDS
    fresh.close()


def test_a_file_names_joined_words_are_split_and_version_numbers_kept() -> None:
    text = name_field_text("docx/Docx4j_GettingStarted", "SAMM v1.1 core, 3.1")
    terms = [t.text for t in build_analyzer(True)(text)]
    assert {"docx4j", "get", "start", "samm", "v1.1", "3.1"} <= set(terms)
    assert name_field_text("OpenSamm core", None) == "Open Samm core"
    assert name_field_text(None, None) == ""
    # a record's id is no name a question holds (a BEIR corpus's "4983")
    assert name_field_text("4983", "Flow past a cone") == "Flow past a cone"
