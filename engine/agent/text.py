"""Words, phrases and sentences for the offline brain: no model, plain rules.

- `content_words`: the words of a text that say what it is about (English
  stopwords and the instruction words of a goal — "summarise", "explain",
  "our" — left out).
- `goal_parts`: a goal broken into its sentences (when it has more than
  one), its clauses and its key phrases, each tagged with its kind;
  `sub_queries` the same as plain query texts.
- `feedback_terms`: pseudo-relevance feedback — the words that mark the best
  passages read so far, weighted against the others read.
- `sentences`: a passage cut into whole sentences (never at a wrapped
  line), markdown-aware (headings are not sentences; list markers and
  emphasis are stripped), each with its character offset in the passage.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Iterable, Sequence

STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below between
both but by can could did do does doing down during each few for from further had has have having he her here hers
him his how i if in into is it its itself just me more most my no nor not now of off on once only or other our ours
out over own same she should so some such than that the their theirs them then there these they this those through
to too under until up very was we were what when where which while who whom why will with would you your yours
yourself etc eg ie via per every each
""".split())

# Words that tell the agent what to do rather than what to look for.
INSTRUCTION_WORDS = frozenset("""
summarise summarize summary overview explain describe tell give list show find outline detail details discuss
compare please know want need like us everything anything something things thing kind kinds way ways regarding
concerning related relating relevant information info particular particularly especially whether exist exists
existing example examples mean means many much get gets got
""".split())

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-']*")
_CLAUSE_BREAK = re.compile(r"[,;:?!()]|\.(?:\s|$)|\b(?:and|or|then|also|as well as|but|including|plus)\b", re.I)
_LIST_MARK = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_EMPHASIS = re.compile(r"(\*\*|__|`)")
MIN_SENTENCE_WORDS = 4


def words(text: str) -> list[str]:
    return [w.strip("-'").lower() for w in _WORD.findall(text) if w.strip("-'")]


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if w not in STOPWORDS and w not in INSTRUCTION_WORDS and len(w) > 1]


GOAL, SENTENCE, CLAUSE, PHRASE = "goal", "sentence", "clause", "phrase"
_GOAL_SENTENCE = re.compile(r"(?<=[.?!])\s+")


def goal_parts(goal: str) -> list[tuple[str, str]]:
    """(query, kind) for the goal itself, then each of its parts, broadest first, without repeats.

    Kinds, in order: the goal; its sentences, verbatim, when it has more than
    one (each is a question of its own in a multi-part goal); each clause's
    content words; each key phrase, a run of content words in the goal
    ("refund policy" in "summarise our refund policy"). A part whose content
    words repeat an earlier part's is not asked again; the goal's content
    words alone are a part (they drop the instruction words).
    """
    goal = goal.strip()
    parts = [(goal, GOAL)]
    seen = {" ".join(words(goal))}
    pieces = [p.strip() for p in _GOAL_SENTENCE.split(goal)]
    pieces = [p for p in pieces if len(content_words(p)) >= 2]
    if len(pieces) > 1:
        for piece in pieces:
            key = " ".join(content_words(piece))
            if key not in seen:
                seen.add(key)
                parts.append((piece, SENTENCE))
    for clause in _CLAUSE_BREAK.split(goal):
        key = " ".join(content_words(clause or ""))
        if key and key not in seen:
            seen.add(key)
            parts.append((key, CLAUSE))
    for phrase in key_phrases(goal):
        if phrase not in seen:
            seen.add(phrase)
            parts.append((phrase, PHRASE))
    return parts


def sub_queries(goal: str) -> list[str]:
    """The goal itself, then its sentences, clauses and key phrases (`goal_parts`) as query texts."""
    return [query for query, _kind in goal_parts(goal)]


def key_phrases(goal: str) -> list[str]:
    """Runs of two or more content words, in the order they appear."""
    phrases, run = [], []
    for word in words(goal) + [""]:
        if word and word not in STOPWORDS and word not in INSTRUCTION_WORDS and len(word) > 1:
            run.append(word)
            continue
        if len(run) >= 2:
            phrases.append(" ".join(run))
        run = []
    return phrases


def feedback_terms(best: Sequence[str], others: Iterable[str], exclude: Iterable[str], n: int = 4) -> list[str]:
    """The `n` words that most mark the `best` passages against all passages read (tf × idf).

    Words of the goal (`exclude`) and numbers alone are left out; ties break
    alphabetically so the same reading gives the same queries.
    """
    pool = list(best) + list(others)
    if not best:
        return []
    df: Counter[str] = Counter()
    for text in pool:
        df.update(set(content_words(text)))
    tf: Counter[str] = Counter()
    for text in best:
        tf.update(content_words(text))
    skip = set(exclude)
    scored = []
    for word, count in tf.items():
        if word in skip or word.isdigit() or len(word) < 3:
            continue
        scored.append((-(1 + math.log(count)) * math.log(1 + len(pool) / df[word]), word))
    return [word for _score, word in sorted(scored)[:n]]


def sentences(text: str) -> list[tuple[int, str]]:
    """(offset in `text`, sentence) for each sentence worth quoting, in order.

    Cut by engine/text/answer_span.py's sentence_ranges, so a sentence wrapped over
    several lines (a PDF's layout) stays whole instead of becoming a line
    fragment; headings, table rows and code fences are not sentences; list
    markers and emphasis are stripped, whitespace folded.
    """
    from ..text.answer_span import sentence_ranges

    out: list[tuple[int, str]] = []
    for start, end in sentence_ranges(text):
        piece = text[start:end]
        if piece.startswith(("#", "|", "```")):
            continue
        mark = _LIST_MARK.match(piece)
        lead = mark.end() if mark else 0
        clean = " ".join(_EMPHASIS.sub("", piece[lead:]).split())
        if len(clean.split()) >= MIN_SENTENCE_WORDS:
            out.append((start + lead, clean))
    return out


def normalised(sentence: str) -> str:
    """The form two copies of one sentence share (overlapping passages repeat text)."""
    return " ".join(words(sentence))
