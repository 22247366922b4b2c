"""How text becomes BM25 terms: the word pattern, case folding, stopwords and stemming, and their version.

A leaf: it imports nothing of the engine, so the fingerprint (which records
TOKENIZER_VERSION) and the sparse index (which builds the analyzer) both
depend on it instead of on each other. whoosh is imported when an analyzer
is built, not here: `kx datasets list` reads fingerprints without it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable, Mapping

# Bump when the word splitting, case folding, stemming or stopword list changes:
# it is part of the dataset fingerprint, because BM25 terms cut another way
# would no longer match the terms already indexed.
TOKENIZER_VERSION = "kx-words-1"

WORD_PATTERN = re.compile(r"\w+(?:\.\w+)*")

# Common English function words. Rare content words are what BM25 ranks on;
# these only add postings and noise.
ENGLISH_STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
once only or other our ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves
""".split())


def build_analyzer(stopwords: bool):
    """Words -> lowercase -> (stopwords dropped) -> Porter2 stems."""
    from whoosh.analysis import LowercaseFilter, RegexTokenizer, StemFilter, StopFilter
    from whoosh.lang.porter2 import stem

    chain = RegexTokenizer(WORD_PATTERN) | LowercaseFilter()
    if stopwords:
        chain = chain | StopFilter(stoplist=ENGLISH_STOPWORDS, minsize=1)
    # whoosh's default stemmer turns "running" into "runn"; porter2 gives "run".
    return chain | StemFilter(stemfn=stem)


@lru_cache(maxsize=2)
def term_counter(stopwords: bool) -> Callable[[str], dict[str, int]]:
    """`build_analyzer`'s terms of a text and how often each occurs, without whoosh's token objects.

    One per setting and process, so its stem cache outlives each commit group's catch-up (a fresh cache a
    group spent a third of stage one re-stemming the same words, py-spy at 1 M).

    The sparse index's writer analyses every passage it indexes; whoosh's chain of generators and
    Token objects cost ~0.28 ms a passage of 800 characters, this ~0.08 ms (SCALING.md, round 4). The
    same steps in the same order (the word pattern, each word lowercased, stopwords dropped, Porter2
    with a cache), so the same terms: tests/test_sparse_writer.py holds it to the chain on real text.
    """
    from whoosh.lang.porter2 import stem

    stems = lru_cache(maxsize=200_000)(stem)
    words = WORD_PATTERN.findall
    dropped = ENGLISH_STOPWORDS if stopwords else frozenset()

    def counts(text: str) -> dict[str, int]:
        found: dict[str, int] = {}
        for word in words(text):
            word = word.lower()
            if word in dropped:
                continue
            term = stems(word)
            found[term] = found.get(term, 0) + 1
        return found

    return counts


# A passage's name field (engine/embedded/sparse.py): its document's name and title. A file name's words are
# joined by "_" or run together in camel case ("Docx4j_GettingStarted", "OpenSamm core"), which the word
# pattern keeps as one word no query holds; they are split here. A version number ("4.0", "v1.1") stays one
# term, as the word pattern keeps it in the text. Heading paths were measured in the field too and left out:
# a heading's common words ("Tools") pulled a passage of the wrong document first on the project's own set
# (BENCHMARKS.md, "Retrieval quality, round 4").
_NAME_JOINS = re.compile(r"_+|(?<=[a-z])(?=[A-Z])")


def name_field_text(name: str | None, title: str | None) -> str:
    """The words the sparse index's name field holds for a document's passages (analysed like their text)."""
    # a name without a letter is a record's id ("4983" in a BEIR corpus): a query's number is not about it
    words = _NAME_JOINS.sub(" ", name) if name and any(c.isalpha() for c in name) else None
    return "\n".join(part for part in (words, title) if part)


# The Milvus backend's BM25 analyzer (engine/milvus/schema.py): the one that behaves the same on milvus-lite
# and a cluster — standard tokenizer, lowercase, no stemming, no stopwords.
MILVUS_ANALYZER = {"tokenizer": "standard", "filter": ["lowercase"]}
# Recorded as the fingerprint's tokenizer_version of a Milvus dataset: what built its sparse index.
MILVUS_ANALYZER_VERSION = "milvus-standard-lowercase-1"
_MILVUS_WORD = re.compile(r"\w+")  # the standard tokenizer's words, as engine/milvus/search.py cuts a query

Spans = list[tuple[int, int]]


def matching_spans(analyzer: Callable[..., Any], text: str, terms: set[str]) -> Spans:
    """The character ranges of `text`'s words whose term (as `analyzer`, a build_analyzer chain, cuts
    them) is one of `terms`: the one place a token's characters are read, for the highlighter and the
    sparse index (engine/embedded/sparse_port.py) alike."""
    return [(t.startchar, t.endchar) for t in analyzer(text, chars=True) if t.text in terms]


@lru_cache(maxsize=4)
def _kx_analyzer(stopwords: bool):  # building a whoosh chain costs more than running it: one per setting
    return build_analyzer(stopwords)


def highlighter(fingerprint: Mapping[str, Any] | None, query: str) -> Callable[[str], Spans]:
    """Where a passage's words match `query`'s terms (character ranges), cut the way the dataset's own
    sparse index cut them: its fingerprint names the analyzer (kx's stemming one, with or without
    stopwords, or Milvus's standard-lowercase one), so a highlight shows what BM25 matched on either backend
    and through a gateway alike. A dataset without a fingerprint highlights with kx's default analyzer."""
    fingerprint = fingerprint or {}
    if fingerprint.get("tokenizer_version") == MILVUS_ANALYZER_VERSION:
        wanted = {word.lower() for word in _MILVUS_WORD.findall(query)}
        return lambda text: [(m.start(), m.end()) for m in _MILVUS_WORD.finditer(text) if m.group().lower() in wanted]
    analyzer = _kx_analyzer(bool(fingerprint.get("stopwords", True)))
    terms = {token.text for token in analyzer(query)}
    return lambda text: matching_spans(analyzer, text, terms) if terms else []
