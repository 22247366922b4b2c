"""Split a document's text into overlapping, citable passages.

`chunk_text(text, size, overlap)` returns `Chunk`s; `size` and `overlap` are
counted in characters (Python `str` code points), and so are the offsets.

Guarantees (each one is covered by tests/test_chunking.py):

1. Pure and deterministic: the same input always gives the same chunks. Any
   change that could alter the output for some input must bump
   `CHUNKER_VERSION`, because stored indexes record which chunker built them.
2. `parent[c.start:c.end] == c.text`; a chunk never starts or ends with
   whitespace; `0 < len(c.text) <= size`.
3. Starts are strictly increasing, and so are ends.
4. Every non-whitespace character lies in at least one chunk.
5. A chunk ends, by preference, at a paragraph break (a whitespace run with
   two or more line breaks), else a line break, else a sentence end (a
   whitespace run right after `.`, `!` or `?`, optionally followed by
   closing `"')]`), else any whitespace. A word is cut only when the window
   holds no whitespace at all, which means the word is longer than `size`.
6. Any span of whole words (from a word start to a word end) no longer than
   `overlap` lies entirely inside at least one chunk, so a short sentence that
   straddles a boundary can still be retrieved in one piece.

Cost is O(n log n) in the text length: whitespace runs are found once and
every decision is a binary search over them.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Callable

from engine.errors import invalid

CHUNKER_VERSION = "kx-chunker-1"

# Break tiers, strongest first. A run's tier is the strongest it qualifies
# for, and a search for tier T accepts anything at least as strong.
_WORD, _SENTENCE, _LINE, _PARAGRAPH = 0, 1, 2, 3
_END_TIERS = (_PARAGRAPH, _LINE, _SENTENCE, _WORD)
_START_TIERS = (_PARAGRAPH, _LINE, _SENTENCE)

_WHITESPACE = re.compile(r"\s+")
_SENTENCE_PUNCT = frozenset(".!?")
_CLOSERS = frozenset("\"')]")


@dataclass(frozen=True)
class Chunk:
    index: int  # 0-based position
    count: int  # total chunks of the document
    start: int  # char offset in parent text (code points)
    end: int  # exclusive
    text: str  # == parent[start:end]

    @property
    def label(self) -> str:
        return f"[chunk {self.index + 1}/{self.count}]"


# With `on_progress`, how often it is called: seconds of work apart on a 15 MB text, never per chunk.
_PROGRESS_RUNS = 1 << 13   # whitespace runs classified
_PROGRESS_CHUNKS = 64      # chunks cut


def chunk_text(text: str, size: int, overlap: int,
               on_progress: Callable[[int, int], None] | None = None) -> list[Chunk]:
    """Chunks of at most `size` chars, neighbours sharing about `overlap`.

    Raises KxError(INVALID_ARGUMENT) unless 1 <= size and 0 <= overlap < size.
    Blank text gives [].

    `on_progress(done, total)`, if given, is called now and then while a long
    text is cut (total is twice the text's length: one pass finds the breaks,
    one cuts), so a caller can show a single huge document moving. It may
    raise to abandon the cut; the output does not depend on it.
    """
    _check_params(size, overlap)
    ix = _Index(text, on_progress)
    if ix.first < 0:
        return []

    n = len(text)
    spans: list[tuple[int, int]] = []
    pos, prev_end = ix.first, -1
    while True:
        if on_progress is not None and len(spans) % _PROGRESS_CHUNKS == _PROGRESS_CHUNKS - 1:
            on_progress(n + pos, 2 * n)
        if ix.text_end - pos <= size:
            spans.append((pos, ix.text_end))
            break
        end, hard = _pick_end(ix, pos, prev_end, size, overlap)
        spans.append((pos, end))
        pos, prev_end = _pick_next_start(ix, pos, end, hard, size, overlap), end

    count = len(spans)
    return [Chunk(i, count, s, e, text[s:e]) for i, (s, e) in enumerate(spans)]


def _check_params(size: int, overlap: int) -> None:
    # bool is an int subclass; True as a size is surely a caller bug.
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise invalid(
            f"chunk_size must be an integer >= 1 (got {size!r}); "
            "set chunk_size to a positive number of characters"
        )
    if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap < size:
        raise invalid(
            f"chunk_overlap must be an integer from 0 to chunk_size - 1 "
            f"(got chunk_overlap={overlap!r} with chunk_size={size}); "
            "lower chunk_overlap or raise chunk_size"
        )


class _Index:
    """Whitespace runs of one text, classified once, searchable by bisect."""

    def __init__(self, text: str, on_progress: Callable[[int, int], None] | None = None) -> None:
        n = len(text)
        starts: list[int] = []
        ends: list[int] = []
        tiers: list[int] = []
        for m in _WHITESPACE.finditer(text):
            s, e = m.span()
            if on_progress is not None and len(starts) % _PROGRESS_RUNS == _PROGRESS_RUNS - 1:
                on_progress(s, 2 * n)
            starts.append(s)
            ends.append(e)
            tiers.append(_classify(text, s, e))
        self.starts = starts
        self.ends = ends
        self.n = n

        # Leading whitespace is one run starting at 0; all-blank text is one
        # run covering everything.
        if starts and starts[0] == 0:
            self.first = ends[0] if ends[0] < n else -1
        else:
            self.first = 0 if n else -1
        self.text_end = starts[-1] if starts and ends[-1] == n else n

        # Word starts: the text's first non-whitespace char plus every run end
        # that is not the end of the text.
        word_starts = [e for e in ends if e < n]
        if self.first == 0:
            word_starts.insert(0, 0)
        self.word_starts = word_starts

        # Per-tier lists hold runs of that tier *or stronger*, so one search
        # per tier answers "the last break at least this strong".
        self.starts_by_tier: dict[int, list[int]] = {}
        self.ends_by_tier: dict[int, list[int]] = {}
        for tier in _END_TIERS:
            picked = [i for i, t in enumerate(tiers) if t >= tier]
            self.starts_by_tier[tier] = [starts[i] for i in picked]
            self.ends_by_tier[tier] = [ends[i] for i in picked]

    def word_start_at(self, t: int) -> int:
        """Start of the word containing t, or of the next word if t is whitespace.

        Returns -1 when no word starts at or before t.
        """
        j = bisect_right(self.starts, t) - 1
        if j >= 0 and t < self.ends[j]:
            return self.ends[j]
        k = bisect_right(self.word_starts, t) - 1
        return self.word_starts[k] if k >= 0 else -1

    def first_word_start_after(self, s: int) -> int:
        return self.word_starts[bisect_right(self.word_starts, s)]

    def first_word_start_from(self, x: int) -> int:
        return self.word_starts[bisect_left(self.word_starts, x)]


def _classify(text: str, s: int, e: int) -> int:
    run = text[s:e]
    if "\n" in run or "\r" in run:
        # "\r\n" is one line break; a lone "\r" (old Mac files) is one too.
        breaks = run.count("\n") + run.count("\r") - run.count("\r\n")
        return _PARAGRAPH if breaks >= 2 else _LINE
    i = s - 1
    while i >= 0 and text[i] in _CLOSERS:
        i -= 1
    if i >= 0 and text[i] in _SENTENCE_PUNCT:
        return _SENTENCE
    return _WORD


def _pick_end(ix: _Index, pos: int, prev_end: int, size: int, overlap: int) -> tuple[int, bool]:
    """End of the chunk starting at pos; the flag says it was a mid-word cut."""
    hi = pos + size
    # Ending no earlier than lo keeps chunks reasonably full, makes each chunk
    # reach past its own overlap (so the next start moves forward), and keeps
    # ends strictly increasing.
    lo = max(pos + max(size // 2, overlap + 1), prev_end + 1)
    for tier in _END_TIERS:
        starts = ix.starts_by_tier[tier]
        i = bisect_right(starts, hi) - 1
        if i >= 0 and starts[i] >= lo:
            return starts[i], False
    # Only short breaks exist: a short chunk beats cutting a word.
    i = bisect_right(ix.starts, hi) - 1
    if i >= 0 and ix.starts[i] > max(pos, prev_end):
        return ix.starts[i], False
    return hi, True


def _pick_next_start(ix: _Index, s: int, e: int, hard: bool, size: int, overlap: int) -> int:
    """Start of the chunk after [s, e); always > s and never past uncovered text."""
    if hard:
        # Inside a word longer than size: back off by exactly the overlap.
        return e - overlap

    t = e - overlap
    cand = -1
    floor = t - overlap // 2
    for tier in _START_TIERS:
        ends = ix.ends_by_tier[tier]
        i = bisect_right(ends, t) - 1
        if i >= 0 and ends[i] >= floor and ends[i] > s:
            cand = ends[i]
            break
    if cand < 0:
        # When t falls in whitespace this is the *following* word, not the
        # last word start <= t: the latter would repeat a whole extra word, so
        # overlap 0 would still overlap. Guarantee 6 holds either way.
        w = ix.word_start_at(t)
        if w > s:
            cand = w
    if cand < 0:
        # The chunk's words are long: no overlap, only whitespace in between.
        cand = ix.first_word_start_after(s)

    # Deviation from the first design: the next chunk must be able to reach
    # the end of the first word after e (call it W). Otherwise it would find
    # no break > e and hard-cut a short word, or end on the whitespace run at
    # e. Example (size 10, overlap 8): "a b c cccc dd" gave the chunk
    # "b c cccc d". Starting at the first word start >= W - size fixes it and
    # keeps guarantee 6: a span from an earlier word start that reaches past
    # e must end at W or later, so it is longer than size > overlap. If the
    # word after e alone is longer than size, start on it: its chunk is a
    # legitimate mid-word cut.
    r = bisect_left(ix.starts, e)  # the run that begins at e
    q = ix.ends[r]
    w_end = ix.starts[r + 1] if r + 1 < len(ix.starts) else ix.n
    if w_end - cand > size:
        cand = q if w_end - q > size else ix.first_word_start_from(w_end - size)
    return cand
