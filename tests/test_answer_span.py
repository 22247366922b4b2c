"""answer_span: the sentence or two of each hit that answer the query (engine/text/answer_span.py).

Sentence cutting and scoring are checked on hand-made passages, with the bundled model's real
word-piece table (memory-mapped, no model run); one slow test asks the real engine over the
shipped handbook and reads the spans through --json's record and the SDK's parser.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Engine, load_settings
from engine.embedding.cards import model_card_for
from engine.records import Hit
from engine.text.answer_span import (
    MAX_SENTENCE,
    WordVectors,
    answer_spans,
    best_span,
    sentence_ranges,
    with_answer_spans,
    word_vectors,
)


def pieces(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_ranges(text)]


def test_sentences_end_at_punctuation_blank_lines_and_list_items_never_at_a_wrapped_line() -> None:
    text = ("The model maps sentences to a 384\ndimensional space.  It was trained\non a TPU v3-8!\n\n"
            "## Usage\nInstall it:\n- pip install kx\n- kx --help\n1. one thing\n\"Is it quoted?\" she asked.")
    assert pieces(text) == [
        "The model maps sentences to a 384\ndimensional space.",   # a PDF's wrapped line stays inside
        "It was trained\non a TPU v3-8!",
        "## Usage",                     # a heading is a line of its own
        "Install it:",
        "- pip install kx",
        "- kx --help",
        "1. one thing\n\"Is it quoted?\"",  # "1." is a list number, not a sentence end
        "she asked.",
    ]
    # ranges are trimmed, ordered, within the text
    ranges = sentence_ranges(text)
    assert all(text[a:b] == text[a:b].strip() and a < b for a, b in ranges)
    assert all(ranges[i][1] <= ranges[i + 1][0] for i in range(len(ranges) - 1))
    assert sentence_ranges("") == [] and sentence_ranges(" \n\n ") == []


def test_a_piece_longer_than_max_sentence_is_cut_at_its_line_breaks() -> None:
    code = "\n".join(f"x{i} = compute({i}, {i + 1})  # step {i}" for i in range(20))
    assert len(code) > MAX_SENTENCE
    assert pieces(code) == code.split("\n")


def test_overlap_alone_picks_the_sentence_holding_the_query_words_and_joins_a_close_neighbour() -> None:
    text = ("Parcels are packed in recycled boxes. Parcels ship from the Leeds warehouse every weekday. "
            "Returns go to Bradford.")
    start, end = best_span(text, "where do parcels ship from", None)
    assert text[start:end] == "Parcels ship from the Leeds warehouse every weekday."
    # stems: "shipping" and "shipped" find "ship"; no query word at all gives the first sentence
    assert text[slice(*best_span(text, "shipping", None))].startswith("Parcels ship from")
    assert best_span(text, "zebra", None) == (0, len("Parcels are packed in recycled boxes."))
    assert best_span("   ", "parcels", None) is None


@pytest.fixture(scope="module")
def vectors() -> WordVectors:
    found = word_vectors(model_card_for("default"))
    assert found is not None, "the bundled model ships model.safetensors and vocab.txt"
    return found


def test_word_vectors_come_from_the_bundled_models_own_table(vectors: WordVectors) -> None:
    a, b, c = (vectors.vector(t) for t in ("the ship sailed", "a boat at sea", "tax returns are due"))
    assert abs(float(np.linalg.norm(a)) - 1.0) < 1e-5
    assert float(a @ b) > float(a @ c)  # related words sit closer in the model's own space
    assert not np.any(vectors.vector("∮∯∰"))  # nothing known: a zero vector, not NaN
    assert word_vectors(model_card_for("default")) is vectors  # loaded once per model folder


def test_word_vectors_refuse_a_folder_without_weights(tmp_path: Path) -> None:
    assert WordVectors.load(tmp_path) is None
    (tmp_path / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}")
    (tmp_path / "vocab.txt").write_text("[PAD]\n")
    assert WordVectors.load(tmp_path) is None


def test_the_word_piece_cosine_finds_a_paraphrase_that_shares_no_word(vectors: WordVectors) -> None:
    text = ("The office is open on weekdays. Staff may bring a dog to work on Fridays. "
            "The canteen serves lunch from noon.")
    # no word of the query is in the answering sentence: the overlap says nothing, the table does
    start, end = answer_spans([text], "pets allowed at the workplace", vectors)[0]
    assert "dog" in text[start:end]
    assert best_span(text, "pets allowed at the workplace", None) != (start, end)


def hit(text: str, char_start: int) -> Hit:
    return Hit(rank=1, score=1.0, text=text, passage_ref="p", document_ref="d", document_name="doc",
               chunk_index=0, chunk_count=1, char_start=char_start, char_end=char_start + len(text),
               dense_rank=1, dense_score=0.5, sparse_rank=None, sparse_score=None, fused_score=0.1,
               fused_rank=1, mmr_moved=0)


def test_with_answer_spans_gives_document_coordinates_and_leaves_queries_without_text_alone() -> None:
    text = "Alpha beta. Refunds take five days. Gamma delta."
    [out] = with_answer_spans([hit(text, 1000)], "how long do refunds take", None)
    assert out.answer_span is not None
    start, end = out.answer_span
    assert text[start - 1000:end - 1000] == "Refunds take five days."
    assert dataclasses.replace(out, answer_span=None) == hit(text, 1000)  # nothing else changed
    assert with_answer_spans([hit(text, 0)], None, None)[0].answer_span is None


# passage text from pieces that make sentences, list items, headings and the case-folding oddities
_TRICKY = st.lists(st.sampled_from(["weigh", "weighs", "Weighed", "test", "rest", "contest", "_test", "xweigh",
                                    "weightings", "e.g.", "x.ed", "E.G", "12", "121212",
                                    "ing", "ed", "a", "x", "ΣΟΣ", "σ",
                                    "İs", "ß", "é", " ", " ", " ", "\n", "\n\n", "\t", ". ", "! ", "? ", '."', ")",
                                    "’", "# ", "- ", "| ", "> ", "* ", "1. ", "2) ", "12"]), max_size=80).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=_TRICKY, query=st.lists(st.sampled_from(["weigh", "test", "rest", "σ", "ΣΟΣ", "is", "İs", "ß", "x", "ed",
                                                     "weight", "weighed", "contests", "e.g", "x.ed", "12",
                                                     "_test"]),
                                    min_size=1, max_size=4).map(" ".join))
def test_one_scan_of_the_passage_finds_each_sentences_query_words(text: str, query: str) -> None:
    # the sentence list and the answer spans score query-word overlap from one scan of the whole passage;
    # it must be the per-sentence scan exactly (word boundaries at sentence edges, case folding of 'İ', 'Σ')
    from engine.text.answer_span import _matcher, _overlap, _overlaps, _terms, sentence_ranges

    terms = _terms(query)
    matcher = _matcher(terms)
    ranges = sentence_ranges(text)
    assert _overlaps(matcher, terms, text, ranges) == [_overlap(matcher, terms, text[s:e]) for s, e in ranges]
    # and what the pattern with a leading \b found per sentence (before the word-start check moved out of it)
    if matcher is not None:
        bounded = re.compile(r"\b" + matcher.pattern.pattern)
        assert [_overlap(matcher, terms, text[s:e]) for s, e in ranges] == \
            [len({m.group(1) for m in bounded.finditer(text[s:e].lower())}) / len(terms) for s, e in ranges]


@settings(max_examples=400, deadline=None)
@given(text=_TRICKY)
def test_breaks_tried_only_where_one_can_start_are_the_patterns_own(text: str) -> None:
    # sentence_ranges tries its break pattern only at '.', '!', '?' and line breaks; what it finds must be
    # exactly what the pattern's own scan of every position finds
    from engine.text.answer_span import _BREAK, _breaks

    assert [(m.start(), m.end(), m.group(1)) for m in _breaks(text)] == \
        [(m.start(), m.end(), m.group(1)) for m in _BREAK.finditer(text)]


@settings(max_examples=300, deadline=None)
@given(text=_TRICKY, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6))
def test_sentence_vectors_found_range_by_range_are_the_ones_placed_by_position(text: str, cuts: list[int]) -> None:
    # sentence_vectors finds each range's words inside it; placing every token by where its word starts
    # (its older way, still the way for a lower case that changes length or a range cut inside a word)
    # must give the same vectors bit for bit, for sentence_ranges' ranges and for ranges cut anywhere
    import numpy as np

    from engine.text.answer_span import WordVectors, sentence_ranges

    words = ["[PAD]", "weigh", "##s", "##ed", "test", "rest", "con", "##test", "_", "x", "12", "is", "ß", "σ", "e",
             "g", "##ing", "a", "##ings", "ed"]
    table = np.random.default_rng(3).standard_normal((len(words), 8)).astype(np.float32)
    vectors = WordVectors({w: i for i, w in enumerate(words)}, table)
    edges = sorted({min(c, len(text)) for c in cuts})
    for ranges in (sentence_ranges(text), [(a, b) for a, b in zip(edges, edges[1:])]):
        found = vectors.sentence_vectors(text, ranges)
        placed = vectors._sentence_vectors_by_position(text.lower(), ranges)
        assert found.tobytes() == placed.tobytes()


@pytest.mark.slow
def test_every_hit_of_a_real_query_carries_its_answering_sentence(handbook_home: Path, real_embedder) -> None:
    from engine.records import QueryResult

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

    again = QueryResult.from_dict(json.loads(json.dumps(record)))
    assert again.hits[0].answer_span == (start, end)
    engine.close()
