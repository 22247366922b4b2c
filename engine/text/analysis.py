"""How text becomes BM25 terms: the word pattern, case folding, stopwords and stemming, and their version.

A leaf: it imports nothing of the engine, so the fingerprint (which records
TOKENIZER_VERSION) and the sparse index (which builds the analyzer) both
depend on it instead of on each other. whoosh is imported when an analyzer
is built, not here: `kx datasets list` reads fingerprints without it.
"""

from __future__ import annotations

import re

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


# The Milvus backend's BM25 analyzer (engine/milvus/schema.py): the one that behaves the same on milvus-lite
# and a cluster — standard tokenizer, lowercase, no stemming, no stopwords.
MILVUS_ANALYZER = {"tokenizer": "standard", "filter": ["lowercase"]}
# Recorded as the fingerprint's tokenizer_version of a Milvus dataset: what built its sparse index.
MILVUS_ANALYZER_VERSION = "milvus-standard-lowercase-1"
