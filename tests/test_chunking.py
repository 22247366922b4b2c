"""Tests for engine.text.chunking: the guarantees in its module docstring."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import KxError, Status
from engine.text.chunking import CHUNKER_VERSION, Chunk, chunk_text

# --- helpers ---------------------------------------------------------------


def word_bounds(text: str) -> tuple[list[int], list[int]]:
    """Word starts and word ends, found independently of the chunker."""
    starts: list[int] = []
    ends: list[int] = []
    for i, ch in enumerate(text):
        if ch.isspace():
            continue
        if i == 0 or text[i - 1].isspace():
            starts.append(i)
        if i + 1 == len(text) or text[i + 1].isspace():
            ends.append(i + 1)
    return starts, ends


def word_length_at(text: str, i: int) -> int:
    """Length of the maximal non-whitespace run containing index i."""
    a = i
    while a > 0 and not text[a - 1].isspace():
        a -= 1
    b = i
    while b < len(text) and not text[b].isspace():
        b += 1
    return b - a


def contained(chunks: list[Chunk], a: int, b: int) -> bool:
    return any(c.start <= a and b <= c.end for c in chunks)


def check_invariants(text: str, size: int, overlap: int) -> list[Chunk]:
    chunks = chunk_text(text, size, overlap)

    # 1. deterministic
    assert chunk_text(text, size, overlap) == chunks

    if not text.strip():
        assert chunks == []
        return chunks
    assert chunks

    for i, c in enumerate(chunks):
        assert c.index == i and c.count == len(chunks)
        assert c.label == f"[chunk {i + 1}/{len(chunks)}]"
        # 2. exact slice, trimmed, bounded
        assert text[c.start : c.end] == c.text
        assert 0 < len(c.text) <= size
        assert not c.text[0].isspace() and not c.text[-1].isspace()
        # 5. a word is cut only when it is longer than the chunk size
        if c.end < len(text) and not text[c.end].isspace():
            assert word_length_at(text, c.end - 1) > size
        if c.start > 0 and not text[c.start - 1].isspace():
            assert word_length_at(text, c.start) > size

    # 3. ordered
    for p, c in zip(chunks, chunks[1:]):
        assert p.start < c.start and p.end < c.end

    # 4. coverage: every non-whitespace char is in some chunk. Chunks are
    # ordered, so a single sweep suffices.
    covered_to = 0
    k = 0
    for i, ch in enumerate(text):
        if ch.isspace():
            continue
        while k < len(chunks) and chunks[k].end <= i:
            k += 1
        assert k < len(chunks) and chunks[k].start <= i, f"char {i} {ch!r} uncovered"
        covered_to = i
    assert covered_to < chunks[-1].end

    # 6. every whole-word span of length <= overlap lies inside one chunk
    starts, ends = word_bounds(text)
    for a in starts:
        j = bisect_first_end_after(ends, a)
        while j < len(ends) and ends[j] - a <= overlap:
            assert contained(chunks, a, ends[j]), (a, ends[j], text[a : ends[j]])
            j += 1
    return chunks


def bisect_first_end_after(ends: list[int], a: int) -> int:
    lo, hi = 0, len(ends)
    while lo < hi:
        mid = (lo + hi) // 2
        if ends[mid] <= a:
            lo = mid + 1
        else:
            hi = mid
    return lo


# --- strategies ------------------------------------------------------------

LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZéüñ日本語😀"
SHORT_WORD = st.text(alphabet=LETTERS, min_size=1, max_size=10)
LONG_WORD = st.text(alphabet=LETTERS, min_size=11, max_size=120)
WORD = st.one_of(SHORT_WORD, SHORT_WORD, SHORT_WORD, SHORT_WORD, SHORT_WORD, LONG_WORD)
PUNCT = st.sampled_from(["", "", "", "", ",", ".", "!", "?", '."', ".)", "?'", ".\"]"])
SEP = st.sampled_from([" ", " ", " ", " ", "  ", "\t", "\n", "\n\n", " \n \n ", "\r\n", "\r\n\r\n", "\u3000"])
PAD = st.sampled_from(["", "", " ", "\n", "  \n\t"])


@st.composite
def documents(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.tuples(WORD, PUNCT, SEP), min_size=0, max_size=120))
    body = "".join(w + p + s for w, p, s in parts)
    return draw(PAD) + body.rstrip() + draw(PAD)


@st.composite
def sizes(draw: st.DrawFn) -> tuple[int, int]:
    # Half the draws use small sizes so most documents span several chunks.
    size = draw(st.one_of(st.integers(20, 80), st.integers(20, 400)))
    overlap = draw(st.integers(min_value=0, max_value=size - 1))
    return size, overlap


@st.composite
def small_sizes(draw: st.DrawFn) -> tuple[int, int]:
    # Tight windows stress the corner cases (long words, overlap near size).
    size = draw(st.integers(min_value=1, max_value=30))
    overlap = draw(st.integers(min_value=0, max_value=size - 1))
    return size, overlap


SENTENCE = st.tuples(
    st.lists(WORD, min_size=1, max_size=10),
    st.sampled_from([".", "!", "?", '."', ".)"]),
    st.sampled_from([" ", " ", " ", "\n", "\n\n"]),
)


@st.composite
def sentence_documents(draw: st.DrawFn) -> tuple[str, list[tuple[int, int]]]:
    """A document of sentences, with each sentence's [start, end) span."""
    text = draw(PAD)
    spans: list[tuple[int, int]] = []
    for words, punct, sep in draw(st.lists(SENTENCE, min_size=1, max_size=20)):
        sentence = " ".join(words) + punct
        spans.append((len(text), len(text) + len(sentence)))
        text += sentence + sep
    return text, spans


# --- properties ------------------------------------------------------------


@settings(max_examples=200, deadline=None, database=None)
@given(documents(), sizes())
def test_properties_on_realistic_text(text: str, params: tuple[int, int]) -> None:
    check_invariants(text, *params)


@settings(max_examples=200, deadline=None, database=None)
@given(documents(), small_sizes())
def test_properties_with_small_windows(text: str, params: tuple[int, int]) -> None:
    check_invariants(text, *params)


@settings(max_examples=150, deadline=None, database=None)
@given(st.text(max_size=300), small_sizes())
def test_properties_on_arbitrary_unicode(text: str, params: tuple[int, int]) -> None:
    # Any code points, including odd whitespace like \x1c, \x85 and \u2028.
    check_invariants(text, *params)


@settings(max_examples=200, deadline=None, database=None)
@given(sentence_documents(), sizes())
def test_short_sentences_straddling_a_boundary_stay_whole(
    doc: tuple[str, list[tuple[int, int]]], params: tuple[int, int]
) -> None:
    text, spans = doc
    size, overlap = params
    chunks = chunk_text(text, size, overlap)
    for a, b in spans:
        if b - a <= overlap:
            assert contained(chunks, a, b), text[a:b]


# --- examples --------------------------------------------------------------


def test_short_document_is_one_chunk() -> None:
    text = "  A short note.\n"
    [chunk] = chunk_text(text, 100, 10)
    assert chunk == Chunk(0, 1, 2, 15, "A short note.")
    assert chunk.label == "[chunk 1/1]"


def test_blank_text_gives_no_chunks() -> None:
    assert chunk_text("", 100, 10) == []
    assert chunk_text(" \n\t\r\n \u3000", 100, 10) == []


def test_version_is_stable_string() -> None:
    assert CHUNKER_VERSION == "kx-chunker-1"


def test_the_cut_is_pinned_to_the_version() -> None:
    # Guarantee 1 made checkable: the spans kx-chunker-1 cuts from this text, as a digest. A change that
    # moves any of them must bump CHUNKER_VERSION (stored datasets record it) and this digest together.
    import hashlib

    rng = random.Random(37)
    vocab = ["lorem", "ipsum", "dolor", "sit", "amet", "日本", "café", "x" * 40, "Fig.", "(a)"]
    seps = [" "] * 12 + [". ", "\n", "\n\n", "? ", "\r\n", ".\" "]
    text = "".join(rng.choice(vocab) + rng.choice(seps) for _ in range(20_000))
    digest = hashlib.sha256()
    for size, overlap in ((1000, 200), (120, 30), (7, 3)):
        for c in chunk_text(text, size, overlap):
            digest.update(f"{c.start}:{c.end};".encode())
    assert (CHUNKER_VERSION, digest.hexdigest()) == (
        "kx-chunker-1", "147c879bcd48275d7d37da62b532e06e5ad8f1bd5bfc7bf407bc3bb2f4750c83")


# One window (size 40, overlap 0: ends are searched in [20, 40]) holding a
# paragraph break at 21, a line break at 27, a sentence end at 35 and a word
# boundary at 35. Each test removes the strongest break and sees the next.
TIERED = "Lorem ipsum dolor sit\n\namet\nconsec. tetur adipiscing elit sed do eiusmod tempor"


def first_chunk(text: str) -> str:
    return chunk_text(text, 40, 0)[0].text


def test_paragraph_break_is_preferred() -> None:
    assert first_chunk(TIERED) == "Lorem ipsum dolor sit"


def test_line_break_beats_sentence_end() -> None:
    text = TIERED.replace("\n\n", " ")
    assert first_chunk(text) == "Lorem ipsum dolor sit amet"


def test_sentence_end_beats_word_boundary() -> None:
    text = TIERED.replace("\n\n", " ").replace("\n", " ")
    assert first_chunk(text) == "Lorem ipsum dolor sit amet consec."


def test_sentence_end_allows_closing_quotes_and_brackets() -> None:
    text = TIERED.replace("\n\n", " ").replace("\n", " ").replace("consec.", 'co(n."]')
    assert first_chunk(text) == 'Lorem ipsum dolor sit amet co(n."]'


def test_word_boundary_when_nothing_better() -> None:
    text = TIERED.replace("\n\n", " ").replace("\n", " ").replace(".", "")
    assert first_chunk(text) == "Lorem ipsum dolor sit amet consec tetur"


def test_early_break_does_not_make_a_tiny_chunk() -> None:
    # A paragraph break before the window's lower bound is not taken.
    text = "Title\n\n" + " ".join(["word"] * 30)
    first = chunk_text(text, 40, 0)[0]
    assert len(first.text) >= 20
    assert first.text.startswith("Title\n\nword")


def test_overlap_repeats_the_tail_of_the_previous_chunk() -> None:
    text = " ".join(f"w{i:02d}" for i in range(40))  # 4-char words
    chunks = chunk_text(text, 40, 10)
    for p, c in zip(chunks, chunks[1:]):
        assert c.start < p.end  # they overlap
        assert p.end - c.start >= 10 - 3  # by about the overlap, at word starts
        assert text[c.start - 1] == " "


def test_zero_overlap_chunks_do_not_overlap() -> None:
    text = " ".join(f"w{i:02d}" for i in range(40))
    chunks = chunk_text(text, 40, 0)
    for p, c in zip(chunks, chunks[1:]):
        assert c.start > p.end


def test_long_word_is_cut_mid_word_only_inside_it() -> None:
    long_word = "x" * 50
    text = f"short {long_word} tail end"
    chunks = check_invariants(text, 20, 5)
    w0, w1 = text.index(long_word), text.index(long_word) + len(long_word)
    assert chunks[0].text == "short"
    mid_word = [c for c in chunks if c.text.strip("x") == ""]
    assert len(mid_word) >= 3
    for c in mid_word:
        assert w0 <= c.start and c.end <= w1
        assert len(c.text) == 20 or c.end == w1
    # Consecutive pieces of the long word overlap by exactly the overlap.
    assert mid_word[1].start == mid_word[0].end - 5
    assert chunks[-1].text == "tail end"


def test_words_shorter_than_size_are_never_cut() -> None:
    text = "a b c cccc dd"  # once a trap: the second chunk cut "dd"
    chunks = check_invariants(text, 10, 8)
    assert [c.text for c in chunks] == ["a b c cccc", "c cccc dd"]


def test_no_chunk_ends_on_a_long_whitespace_gap() -> None:
    text = "aaaa bbbb" + " " * 20 + "cccc"  # once a trap: "bbbb     " was a chunk
    chunks = check_invariants(text, 10, 5)
    assert [c.text for c in chunks] == ["aaaa bbbb", "cccc"]


def test_offsets_are_code_points() -> None:
    text = "日本語 😀😀 é " * 20
    for c in check_invariants(text, 25, 6):
        assert text[c.start : c.end] == c.text


@pytest.mark.parametrize(
    ("size", "overlap", "mentions"),
    [
        (0, 0, "chunk_size"),
        (-5, 0, "chunk_size"),
        (10, -1, "chunk_overlap"),
        (10, 10, "chunk_overlap"),
        (10, 11, "chunk_overlap"),
        (1, 1, "chunk_overlap"),
    ],
)
def test_invalid_parameters(size: int, overlap: int, mentions: str) -> None:
    with pytest.raises(KxError) as info:
        chunk_text("some text", size, overlap)
    assert info.value.status is Status.INVALID_ARGUMENT
    assert mentions in info.value.message


def test_invalid_parameters_rejected_even_for_blank_text() -> None:
    with pytest.raises(KxError) as info:
        chunk_text("", 10, 10)
    assert "chunk_overlap" in info.value.message
    assert "chunk_size" in info.value.message


def test_size_one_overlap_zero_splits_into_characters() -> None:
    chunks = check_invariants("ab c", 1, 0)
    assert [c.text for c in chunks] == ["a", "b", "c"]


def test_two_megabyte_text_completes() -> None:
    # Linear-ish cost matters: documents of several MB are indexed routinely.
    rng = random.Random(0)
    vocab = ["lorem", "ipsum", "dolor", "sit", "amet", "日本", "café", "x" * 300]
    seps = [" "] * 12 + [". ", "\n", "\n\n", "? "]
    parts: list[str] = []
    total = 0
    while total < 2_000_000:
        piece = rng.choice(vocab) + rng.choice(seps)
        parts.append(piece)
        total += len(piece)
    text = "".join(parts)
    for size, overlap in ((1000, 200), (60, 20)):
        chunks = chunk_text(text, size, overlap)
        assert chunks[0].start == 0
        assert chunks[-1].end == len(text.rstrip())
        assert all(c.end - c.start <= size for c in chunks)
