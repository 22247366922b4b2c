"""The answering sentence: where, inside each returned passage, the query is answered.

`with_answer_spans(hits, query, card)` gives every hit an `answer_span`: the
character range, in its document's text, of the one or two adjacent sentences
of the passage that best answer the query. It runs on the returned hits only.

How a sentence is scored: the cosine between the query and the sentence in
the embedding model's own word-piece space (the sum of the model's input
token embeddings, memory-mapped from its safetensors file and looked up
through its WordPiece vocabulary), plus the share of the query's content
words (Porter2 stems, stopwords out) that the sentence holds. Why not the
full model on every sentence: encoding the ~100 sentences of ten hits in one
batch took 3.2 s on a 2-core AVX2 machine under load, against a ~20 ms query
(the budget is 15 % of the query's p50). On benchmarks/qa.py the word-piece
cosine plus overlap put the answering sentence in the span for 0.93 of the
answering passages, overlap alone 0.85 (figures in BENCHMARKS.md). A model
folder without readable weights falls back to the overlap alone. Each
passage's sentences and their vectors are remembered (the last 4,096
passages), so a session that meets a passage again pays only the scoring.

Sentences: a break after `.`, `!` or `?` (closing quotes and brackets
included) followed by whitespace (not after a list number such as "1."), a
blank line, a line break that starts a list item, a heading or a table row,
and the end of a heading's line. A single line break inside a sentence
(a PDF's wrapped line) never splits it. A piece longer than MAX_SENTENCE
characters (code, tables) is cut at its line breaks.

Pure functions apart from the cached word vectors; ties break on the earlier
sentence, so the same hits and query give the same spans.
"""

from __future__ import annotations

import bisect
import copy
import functools
import json
import re
import threading
from collections import OrderedDict
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

import numpy as np

from .analysis import ENGLISH_STOPWORDS, WORD_PATTERN

if TYPE_CHECKING:
    from ..embedding.cards import ModelCard
    from ..records import Hit

__all__ = ["sentence_ranges", "best_span", "answer_spans", "with_answer_spans", "best_sentence_scores",
           "WordVectors"]

MAX_SENTENCE = 400
# weight of the query-word overlap next to the cosine; a neighbour joins the
# best sentence when it scores at least NEIGHBOUR_SHARE of it
OVERLAP_WEIGHT = 1.0
NEIGHBOUR_SHARE = 0.75

_BREAK = re.compile(r"([.!?][\"'’”)\]]*)\s+|\n[ \t]*\n\s*|\n(?=[ \t]*(?:[-*•#|>]|\d+[.)]\s))")
_LINE = re.compile(r"\n")
_BREAK_START = re.compile(r"[.!?\n]")


def sentence_ranges(text: str) -> list[tuple[int, int]]:
    """The sentences of `text` as [start, end) ranges, trimmed of surrounding whitespace, in order."""
    pieces: list[tuple[int, int]] = []
    pos = 0
    for m in _breaks(text):
        mark = m.group(1)
        if mark:
            if mark[0] == "." and _after_list_number(text, m.start()):
                continue  # "1. one thing": a list number, not a sentence's end
            end = m.end(1)
        else:
            end = m.start()
        pieces.append((pos, end))
        pos = m.end()
    pieces.append((pos, len(text)))
    out: list[tuple[int, int]] = []
    for start, end in pieces:
        # a Markdown heading is a line of its own
        while text.startswith("#", _first_visible(text, start, end)):
            cut = text.find("\n", start, end)
            if cut < 0:
                break
            _add_sentence(out, text, start, cut)
            start = cut + 1
        _add_sentence(out, text, start, end)
    return out


def _breaks(text: str) -> Iterator[re.Match[str]]:
    """`_BREAK.finditer(text)`, tried only where a break can start (every alternative opens with one of
    `.!?` or a line break): finding those is ~4 x faster than the pattern's scan of every position."""
    after = 0
    for start in _BREAK_START.finditer(text):
        at = start.start()
        if at >= after:
            m = _BREAK.match(text, at)
            if m is not None:
                after = m.end()  # never empty: each alternative takes at least one character
                yield m


def _after_list_number(text: str, at: int) -> bool:
    """Whether the line up to `at` (a period) is a number alone: "12." opens a list item."""
    before = text[at - 1] if at else ""
    if before and not before.isspace() and not before.isdigit():
        return False  # the usual case, "word.": no need to cut out the line
    return text[text.rfind("\n", 0, at) + 1:at].strip().isdigit()


def _first_visible(text: str, start: int, end: int) -> int:
    """The first non-whitespace position in [start, end), else `end`."""
    if start < end and not text[start].isspace():
        return start
    return start + len(text[start:end]) - len(text[start:end].lstrip())


def _add_sentence(out: list[tuple[int, int]], text: str, start: int, end: int) -> None:
    """[start, end) trimmed of whitespace (when anything is left), a piece longer than MAX_SENTENCE (code,
    tables) first cut at its line breaks."""
    if end - start > MAX_SENTENCE:
        for m in _LINE.finditer(text, start, end):
            _add_trimmed(out, text, start, m.start())
            start = m.end()
    _add_trimmed(out, text, start, end)


def _add_trimmed(out: list[tuple[int, int]], text: str, start: int, end: int) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start:
        out.append((start, end))


def _terms(text: str) -> set[str]:
    """The query's content words as Porter2 stems (a sentence word matches a stem it starts with)."""
    return {_stem(w) for w in WORD_PATTERN.findall(text.lower()) if w not in ENGLISH_STOPWORDS}


@functools.lru_cache(maxsize=65_536)
def _stem(word: str) -> str:
    # Porter2 in pure Python costs ~0.1 ms a word; queries repeat their words
    from whoosh.lang.porter2 import stem

    return stem(word)


_RANGES: OrderedDict[str, list[tuple[int, int]]] = OrderedDict()
_RANGES_LOCK = threading.Lock()


def _sentences(text: str) -> list[tuple[int, int]]:
    """sentence_ranges(text), remembered for the last WordVectors._PASSAGES passages (without word vectors:
    a query given as a vector, or a model folder without readable weights)."""
    with _RANGES_LOCK:
        known = _RANGES.get(text)
        if known is not None:
            _RANGES.move_to_end(text)
            return known
    ranges = sentence_ranges(text)
    with _RANGES_LOCK:
        _RANGES[text] = ranges
        while len(_RANGES) > WordVectors._PASSAGES:
            _RANGES.popitem(last=False)
    return ranges


class QueryWords:
    """A query's content stems as a passage's words match them: a word matches the longest stem it starts
    with that leaves at most 4 more letters ("weigh" finds "weighs", "weighed"); only a match that starts a
    word counts.

    Stemming every word of every sentence cost ~40 ms for ten hits; matching the query's few stems as word
    prefixes costs well under 1 ms. Stems of word characters only (nearly all) are found by `str.find` in
    `_overlaps_found`; a stem such as "e.g" spans two words, and a query holding one is scanned with
    `pattern`, which is compiled only then (compiling it cost a first-seen query ~0.1 ms).
    """

    __slots__ = ("ordered", "word_only", "_pattern")

    def __init__(self, terms: set[str]) -> None:
        self.ordered = tuple(sorted(terms, key=lambda t: (-len(t), t)))  # the alternation's order: longest first
        self.word_only = all(_WORD_RUN.fullmatch(t) for t in self.ordered)
        self._pattern: re.Pattern[str] | None = None

    @property
    def pattern(self) -> re.Pattern[str]:
        # No `\b` ahead of word-character stems: with one, re cannot skip ahead by the stems' first letters and
        # tries the whole alternation at every position (the scan took ~1.7 x as long); a match must start a
        # word, which _starts_word checks after. That changes nothing found for them: a match ends at its
        # word's end, so one starting inside a word (dropped) never hides one starting at the next word. A
        # dotted stem ("e.g") can run on past the word it started inside and hide the next one: with one, the
        # pattern itself asks for the word start.
        if self._pattern is None:
            alternatives = "|".join(re.escape(t) for t in self.ordered)
            start = "" if self.word_only else r"\b"
            self._pattern = re.compile(rf"{start}({alternatives})\w{{0,4}}\b")
        return self._pattern


_WORD_RUN = re.compile(r"\w+")


def _matcher(terms: set[str]) -> QueryWords | None:
    return QueryWords(terms) if terms else None


def _starts_word(text: str, at: int) -> bool:
    """`\b` before text[at] (a word character)."""
    return at == 0 or not _is_word_char(text[at - 1])


def _is_word_char(char: str) -> bool:
    """`re`'s word characters: str.isalnum()'s and '_'."""
    return char.isalnum() or char == "_"


def _overlap(matcher: QueryWords | None, terms: set[str], sentence: str) -> float:
    if matcher is None:
        return 0.0
    lowered = sentence.lower()
    return len({m.group(1) for m in matcher.pattern.finditer(lowered) if _starts_word(lowered, m.start())}) / len(terms)


def _overlaps(matcher: QueryWords | None, terms: set[str], text: str,
              ranges: Sequence[tuple[int, int]]) -> list[float]:
    """`_overlap` of each range of `text`, from one scan of the whole text (one lower() and one finditer
    instead of one per sentence: the per-call costs were most of the hybrid sentence list's time).

    The same matches: every range is trimmed and bounded by whitespace (sentence_ranges), and the pattern
    matches word characters only, so no match crosses a range's edge and `\b` sees the same boundary
    there. Where lowering the whole text is not the slices lowered one by one (a character whose lower
    case is longer, such as 'İ', or a capital sigma, whose lower case depends on its neighbours), each
    range is scanned alone.
    """
    if matcher is None:
        return [0.0] * len(ranges)
    lowered = text.lower()
    if len(lowered) != len(text) or "\u03a3" in text:
        return [_overlap(matcher, terms, text[s:e]) for s, e in ranges]
    if matcher.word_only:
        return _overlaps_found(matcher.ordered, len(terms), lowered, ranges)
    starts = [s for s, _e in ranges]
    found: list[set[str]] = [set() for _ in ranges]
    for m in matcher.pattern.finditer(lowered):
        i = bisect.bisect_right(starts, m.start()) - 1
        if i >= 0 and m.end() <= ranges[i][1] and _starts_word(lowered, m.start()):
            found[i].add(m.group(1))
    return [len(words) / len(terms) for words in found]


def _overlaps_found(ordered: tuple[str, ...], count: int, lowered: str,
                    ranges: Sequence[tuple[int, int]]) -> list[float]:
    """What the pattern's scan finds, for terms of word characters only, by finding each term's occurrences
    (str.find, ~3 x faster than the pattern's scan of every position of a 1,000-character passage).

    The same matches: with word-character terms a match lies inside one word (a maximal run of word
    characters), and only one starting the word is kept. There the pattern's alternation takes the first
    term, in `ordered`, that the word starts with and that leaves at most 4 more word characters; here the
    terms are tried in that order and a word start keeps the first that fits.
    """
    size = len(lowered)
    credited: dict[int, tuple[str, int]] = {}
    for term in ordered:
        at = lowered.find(term)
        while at >= 0:
            if at not in credited and _starts_word(lowered, at):
                end = at + len(term)
                limit = min(size, end + 4)
                while end < limit and _is_word_char(lowered[end]):
                    end += 1
                if end < size and _is_word_char(lowered[end]):
                    end = -1  # 5 or more word characters after the term: the pattern's \w{0,4}\b fails
                if end >= 0:
                    credited[at] = (term, end)
            at = lowered.find(term, at + 1)
    if not credited:
        return [0.0] * len(ranges)
    starts = [s for s, _e in ranges]
    found: list[set[str]] = [set() for _ in ranges]
    for at, (term, end) in credited.items():
        i = bisect.bisect_right(starts, at) - 1
        if i >= 0 and end <= ranges[i][1]:
            found[i].add(term)
    return [len(words) / count for words in found]


class WordVectors:
    """The model's input token embeddings: a static vector for any text, from its WordPiece vocabulary.

    Words are looked up in the model's own vocabulary (whole word, else greedy WordPiece pieces, as
    BERT's tokenizer splits them) in Python with a cache: the fast tokenizer took ~3 ms per 1,000-character
    passage on a loaded 2-core machine, the cached look-ups a few hundredths of that.
    """

    _WORDS = re.compile(r"\w+")
    _CACHE_LIMIT = 200_000
    _PASSAGES = 4096  # passages whose sentences and vectors are kept (a session re-reads the same hits)

    def __init__(self, vocab: dict[str, int], table: np.ndarray) -> None:
        self._vocab = vocab
        self._table = table
        self._ids: dict[str, tuple[int, ...]] = {}
        self._passages: OrderedDict[str, tuple[list[tuple[int, int]], np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def sentences(self, text: str) -> tuple[list[tuple[int, int]], np.ndarray]:
        """sentence_ranges(text) and their vectors, remembered for the last _PASSAGES passages."""
        with self._lock:
            known = self._passages.get(text)
            if known is not None:
                self._passages.move_to_end(text)
                return known
        ranges = sentence_ranges(text)
        found = (ranges, self.sentence_vectors(text, ranges))
        with self._lock:
            self._passages[text] = found
            while len(self._passages) > self._PASSAGES:
                self._passages.popitem(last=False)
        return found

    @classmethod
    def load(cls, folder: Path) -> WordVectors | None:
        """From a sentence-transformers folder (vocab.txt + model.safetensors); None when either is unreadable.

        The table is memory-mapped straight from the safetensors file (an 8-byte header length, a JSON
        header, then raw little-endian tensors): loading costs a header read, and only the rows a query
        touches are ever paged in, so a cold CLI query does not pay for 47 MB it barely reads.
        """
        weights, vocab_file = folder / "model.safetensors", folder / "vocab.txt"
        try:
            with open(weights, "rb") as fh:
                size = int.from_bytes(fh.read(8), "little")
                header = json.loads(fh.read(size))
            name = next((k for k in header if k.endswith("word_embeddings.weight")), None)
            if name is None or header[name].get("dtype") != "F32" or len(header[name].get("shape", ())) != 2:
                return None
            begin, _ = header[name]["data_offsets"]
            rows, dim = header[name]["shape"]
            # a plain ndarray over the map: np.memmap's subclass hooks cost more than the sums on every slice
            table = np.asarray(np.memmap(weights, dtype="<f4", mode="r", offset=8 + size + begin, shape=(rows, dim)))
            words = vocab_file.read_text(encoding="utf-8").splitlines()
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None
        if len(words) != rows:
            return None  # not this table's vocabulary
        return cls({w: i for i, w in enumerate(words)}, table)

    def _word_ids(self, word: str) -> tuple[int, ...]:
        ids = self._ids.get(word)
        if ids is None:
            whole = self._vocab.get(word)
            ids = (whole,) if whole is not None else self._pieces(word)
            if len(self._ids) > self._CACHE_LIMIT:
                self._ids.clear()
            self._ids[word] = ids
        return ids

    def _pieces(self, word: str) -> tuple[int, ...]:
        out: list[int] = []
        start = 0
        while start < len(word):
            end = min(len(word), start + 40)
            found = None
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self._vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return ()  # BERT's [UNK]: says nothing about meaning
            out.append(found)
            start = end
        return tuple(out)

    def sentence_vectors(self, text: str, ranges: Sequence[tuple[int, int]]) -> np.ndarray:
        """One unit vector per range of `text` (zeros for a range holding no known word)."""
        lowered = text.lower()
        if len(lowered) != len(text) or any(_inside_word(lowered, at) for edges in ranges for at in edges):
            # a character whose lower case is longer ('İ'), or a range cut inside a word: place each word's
            # tokens by where the word starts
            return self._sentence_vectors_by_position(lowered, ranges)
        # Each range's words are found inside it (sentence_ranges' edges are whitespace or the text's ends, so no
        # word crosses one) and looked up per word: a Python step per token, keeping its start to place it in a
        # range afterwards, cost ~1.5 ms for a query's ten first-seen passages. The sums are the same rows
        # added in the same order.
        known, word_ids, words = self._ids.get, self._word_ids, self._WORDS.findall
        ids: list[int] = []
        bounds = [0]
        for start, end in ranges:
            found = words(lowered, start, end)
            pieces: list[tuple[int, ...] | None] = list(map(known, found))
            if None in pieces:  # words met for the first time
                pieces = [word_ids(word) if ids_ is None else ids_ for word, ids_ in zip(found, pieces)]
            ids.extend(chain.from_iterable(pieces))  # type: ignore[arg-type]  # None filled in above
            bounds.append(len(ids))
        out = np.zeros((len(ranges), self._table.shape[1]), dtype=np.float32)
        if ids:
            rows = self._table[np.asarray(ids, dtype=np.int64)]
            for i in range(len(ranges)):
                if bounds[i + 1] > bounds[i]:
                    out[i] = rows[bounds[i]:bounds[i + 1]].sum(axis=0)
        return _unit_rows(out)

    def _sentence_vectors_by_position(self, lowered: str, ranges: Sequence[tuple[int, int]]) -> np.ndarray:
        """sentence_vectors where lowering moved positions: each token placed by where its word starts."""
        word_ids = self._word_ids
        starts: list[int] = []
        ids: list[int] = []
        for m in self._WORDS.finditer(lowered):
            for token in word_ids(m.group()):
                starts.append(m.start())
                ids.append(token)
        out = np.zeros((len(ranges), self._table.shape[1]), dtype=np.float32)
        if ids:
            rows = self._table[np.asarray(ids, dtype=np.int64)]
            at = np.asarray(starts)
            first = np.searchsorted(at, [a for a, _ in ranges])
            last = np.searchsorted(at, [b for _, b in ranges])
            for i in np.flatnonzero(last > first):
                out[i] = rows[first[i]:last[i]].sum(axis=0)
        return _unit_rows(out)

    def vector(self, text: str) -> np.ndarray:
        return self.sentence_vectors(text, [(0, len(text))])[0]



def _inside_word(text: str, at: int) -> bool:
    """Whether position `at` falls between two word characters."""
    return 0 < at < len(text) and not _starts_word(text, at) and _is_word_char(text[at])


def _unit_rows(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)

_CACHE: dict[str, WordVectors | None] = {}
_CACHE_LOCK = threading.Lock()


def word_vectors(card: ModelCard | None) -> WordVectors | None:
    """The card's word vectors, loaded once per model folder (None without a card or readable weights)."""
    if card is None or card.endpoint:  # a served model's weights are on its server: word overlap alone
        return None
    key = str(card.path)
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = WordVectors.load(Path(card.path))
        return _CACHE[key]


def best_span(text: str, query: str, vectors: WordVectors | None = None,
              query_terms: set[str] | None = None, query_vector: np.ndarray | None = None,
              matcher: QueryWords | None = None, memo: SentenceMemo | None = None) -> tuple[int, int] | None:
    """The range (within `text`) of the best sentence, joined by its better neighbour when that scores
    at least NEIGHBOUR_SHARE of it; None for text without a sentence."""
    ranges, scores = _sentence_scores(text, query, vectors, query_terms, query_vector, matcher, memo)
    if not ranges:
        return None
    best = int(np.argmax(scores))  # the first maximum: the earlier sentence wins a tie
    start, end = ranges[best]
    neighbours = [j for j in (best - 1, best + 1) if 0 <= j < len(ranges)]
    if neighbours:
        other = max(neighbours, key=lambda j: (scores[j], -j))
        if scores[best] > 0 and scores[other] >= NEIGHBOUR_SHARE * scores[best]:
            start, end = min(start, ranges[other][0]), max(end, ranges[other][1])
    return start, end


# One query's sentence scores by passage text: the hybrid sentence list scores the fused head's passages,
# and the answer spans score the hits among them again (engine/query.py keeps one per query).
SentenceMemo = dict[str, tuple[list[tuple[int, int]], np.ndarray]]


def _sentence_scores(text: str, query: str, vectors: WordVectors | None, query_terms: set[str] | None,
                     query_vector: np.ndarray | None, matcher: QueryWords | None = None,
                     memo: SentenceMemo | None = None) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Each sentence's range (within `text`) and its score against the query (rounded to 9 decimals).
    `memo`: this query's scores so far (the same query, vectors and terms for every call given it)."""
    if memo is not None:
        known = memo.get(text)
        if known is None:
            known = memo[text] = _sentence_scores(text, query, vectors, query_terms, query_vector, matcher)
        return known
    if vectors is None:
        ranges, sentence_vectors = _sentences(text), None
    else:
        ranges, sentence_vectors = vectors.sentences(text)
    if not ranges:
        return [], np.zeros(0)
    terms = _terms(query) if query_terms is None else query_terms
    if matcher is None:
        matcher = _matcher(terms)
    scores = OVERLAP_WEIGHT * np.array(_overlaps(matcher, terms, text, ranges))
    if vectors is not None and sentence_vectors is not None:
        qv = vectors.vector(query) if query_vector is None else query_vector
        scores += sentence_vectors @ qv
    return ranges, np.round(scores, 9)


def best_sentence_scores(texts: Sequence[str], query: str, vectors: WordVectors | None,
                         memo: SentenceMemo | None = None) -> list[float]:
    """Each text's best sentence score against the query (0.0 for a text without a sentence)."""
    terms = _terms(query)
    qv = vectors.vector(query) if vectors is not None else None
    matcher = _matcher(terms)  # one for all the passages
    out = []
    for text in texts:
        _ranges, scores = _sentence_scores(text, query, vectors, terms, qv, matcher, memo)
        out.append(float(scores.max()) if scores.size else 0.0)
    return out


def answer_spans(texts: Sequence[str], query: str, vectors: WordVectors | None,
                 memo: SentenceMemo | None = None) -> list[tuple[int, int] | None]:
    """best_span for each text, the query's terms and vector computed once."""
    terms = _terms(query)
    qv = vectors.vector(query) if vectors is not None else None
    matcher = _matcher(terms)  # one for all the hits
    return [best_span(t, query, vectors, terms, qv, matcher, memo) for t in texts]


def with_answer_spans(hits: Sequence[Hit], query: str | None, card: ModelCard | None,
                      memo: SentenceMemo | None = None) -> list[Hit]:
    """The hits, each with `answer_span` set in its document's coordinates (unchanged without query text)."""
    if not query or not hits:
        return list(hits)
    spans = answer_spans([h.text for h in hits], query, word_vectors(card), memo)
    return [h if span is None else _with_span(h, (h.char_start + span[0], h.char_start + span[1]))
            for h, span in zip(hits, spans)]


def _with_span(hit: Hit, span: tuple[int, int]) -> Hit:
    """`hit` with `answer_span` set: a shallow copy (dataclasses.replace re-runs __init__ over every field,
    a tenth of a query's Python time for ten hits)."""
    out = copy.copy(hit)
    object.__setattr__(out, "answer_span", span)  # a fresh copy of a frozen record, not yet shared
    return out
