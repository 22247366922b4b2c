"""Highlighting with each dataset's own analyzer (engine/text/analysis.py `highlighter`): the fingerprint
names it, so the CLI and the TUI show what BM25 matched, on the embedded backend, on Milvus, over a gateway."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import load_settings
from engine.embedded.dataset import Dataset
from engine.text.analysis import MILVUS_ANALYZER_VERSION, TOKENIZER_VERSION, highlighter

TEXT = "Running the Backups: the backup runs nightly, and THE restore runs weekly."


def _words(text: str, spans: list[tuple[int, int]]) -> list[str]:
    return [text[a:b] for a, b in spans]


@pytest.mark.parametrize("stopwords", [True, False])
def test_the_embedded_analyzer_highlights_exactly_what_the_sparse_index_matches(kx_home: Path,
                                                                                stopwords: bool) -> None:
    fingerprint = {"tokenizer_version": TOKENIZER_VERSION, "stopwords": stopwords}
    index = Dataset(load_settings(), "notes").sparse(stopwords)   # the index's own analyzer (never written)
    for query in ("run the backup", "restores", "THE", "nothing matches here"):
        assert highlighter(fingerprint, query)(TEXT) == index.matching_spans(TEXT, query)


def test_stemming_and_stopwords_follow_the_fingerprint() -> None:
    with_stopwords = highlighter({"tokenizer_version": TOKENIZER_VERSION, "stopwords": True}, "the run")
    assert _words(TEXT, with_stopwords(TEXT)) == ["Running", "runs", "runs"]   # stems match; 'the' is dropped
    without = highlighter({"tokenizer_version": TOKENIZER_VERSION, "stopwords": False}, "the run")
    assert _words(TEXT, without(TEXT)) == ["Running", "the", "the", "runs", "THE", "runs"]


def test_a_milvus_dataset_highlights_with_milvus_words_no_stems_no_stopwords() -> None:
    spans = highlighter({"tokenizer_version": MILVUS_ANALYZER_VERSION, "stopwords": False}, "the runs")
    assert _words(TEXT, spans(TEXT)) == ["the", "the", "runs", "THE", "runs"]   # 'Running' is another word to Milvus


def test_no_fingerprint_uses_the_default_analyzer_and_an_empty_query_marks_nothing() -> None:
    assert _words(TEXT, highlighter(None, "backup")(TEXT)) == ["Backups", "backup"]
    assert highlighter(None, "the")(TEXT) == []   # only a stopword: no term, nothing highlighted
