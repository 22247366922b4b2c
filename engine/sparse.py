"""The sparse index: whoosh BM25 over passage text.

Derived from the catalogue like the dense index: documents are keyed by passage
seq, and a sidecar records the highest seq committed. Whoosh's own commit is
atomic (it renames a new table of contents into place); we fsync the new
segment files before recording the watermark, so the sidecar never claims
more than the disk holds.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from .atomic import fsync_dir, fsync_file, read_json, write_json_atomic

if TYPE_CHECKING:
    from .store import Catalogue

# Bump when the word splitting, case folding, stemming or stopword list changes:
# it is part of the dataset fingerprint, because BM25 terms cut another way
# would no longer match the terms already indexed.
TOKENIZER_VERSION = "kx-words-1"

_WORD = re.compile(r"\w+(?:\.\w+)*")

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

    chain = RegexTokenizer(_WORD) | LowercaseFilter()
    if stopwords:
        chain = chain | StopFilter(stoplist=ENGLISH_STOPWORDS, minsize=1)
    # whoosh's default stemmer turns "running" into "runn"; porter2 gives "run".
    return chain | StemFilter(stemfn=stem)


def bm25_weighting(k1: float, b: float):
    """BM25 with the Robertson/Lucene IDF, ln(1 + (N - n + 0.5) / (n + 0.5)).

    whoosh's BM25F uses ln(N / (n + 1)) + 1, which keeps rewarding terms that
    occur in most passages; this IDF fades them towards zero instead.
    """
    import math

    from whoosh.scoring import WeightingModel, WeightLengthScorer, WeightScorer

    class _Scorer(WeightLengthScorer):
        def __init__(self, searcher, fieldname, text):
            parent = searcher.get_parent()  # collection-wide statistics
            total, having = parent.doc_count_all(), parent.doc_frequency(fieldname, text)
            self.idf = math.log(1.0 + (total - having + 0.5) / (having + 0.5))
            self.avgfl = parent.avg_field_length(fieldname) or 1.0
            self.setup(searcher, fieldname, text)

        def _score(self, weight, length):
            norm = k1 * ((1.0 - b) + b * length / self.avgfl)
            return self.idf * weight * (k1 + 1.0) / (weight + norm)

    class _Bm25(WeightingModel):
        def supports_block_quality(self):
            return True

        def scorer(self, searcher, fieldname, text, qf=1):
            if not searcher.schema[fieldname].scorable:
                return WeightScorer.for_(searcher, fieldname, text)
            return _Scorer(searcher, fieldname, text)

    return _Bm25()


def _schema(stopwords: bool):
    from whoosh.fields import NUMERIC, TEXT, Schema

    return Schema(
        seq=NUMERIC(int, bits=64, signed=False, stored=True, unique=True),
        body=TEXT(analyzer=build_analyzer(stopwords), phrase=False, stored=False),
    )


class SparseIndex:
    def __init__(self, folder: Path, stopwords: bool) -> None:
        self.folder = folder / "sparse"
        self.sidecar = folder / "sparse.json"
        self.stopwords = stopwords
        self._analyzer = None

    @property
    def watermark(self) -> int:
        meta = read_json(self.sidecar)
        if not isinstance(meta, dict) or meta.get("stopwords") != self.stopwords:
            return 0
        if meta.get("tokenizer") != TOKENIZER_VERSION or not self.folder.exists():
            return 0
        return int(meta.get("watermark", 0))

    def _open_for_write(self, start: int):
        """The index to extend from `start`, and the seq it really holds up to."""
        from whoosh import index

        if start > 0:
            try:
                return index.open_dir(str(self.folder)), start
            except Exception:  # missing or damaged derived index: rebuild from the catalogue
                pass
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        return index.create_in(str(self.folder), _schema(self.stopwords)), 0

    def catch_up(self, catalogue: "Catalogue", upto: int) -> int:
        """Index the catalogue's passages above the watermark in one commit."""
        from whoosh.query import NumericRange

        ix, start = self._open_for_write(self.watermark)
        writer = ix.writer(limitmb=256)
        added = 0
        try:
            # A crash after whoosh committed but before the sidecar was written
            # leaves these seqs indexed already; drop them so none is doubled.
            writer.delete_by_query(NumericRange("seq", start + 1, None))
            for rows in catalogue.iter_passages_after(start, upto):
                for seq, text, _vec in rows:
                    writer.add_document(seq=seq, body=text)
                added += len(rows)
        except BaseException:
            writer.cancel()
            raise
        writer.commit()
        ix.close()
        for name in os.listdir(self.folder):
            fsync_file(self.folder / name)
        fsync_dir(self.folder)
        write_json_atomic(self.sidecar, {"watermark": upto, "stopwords": self.stopwords,
                                         "tokenizer": TOKENIZER_VERSION})
        return added

    def terms(self, text: str) -> list[str]:
        """The query terms this index would look up for `text`, in order, without repeats."""
        if self._analyzer is None:
            self._analyzer = build_analyzer(self.stopwords)
        seen: dict[str, None] = {}
        for token in self._analyzer(text):
            seen.setdefault(token.text, None)
        return list(seen)

    def matching_spans(self, text: str, query: str) -> list[tuple[int, int]]:
        """Character ranges of the words in `text` that match a term of `query` (for highlighting)."""
        wanted = set(self.terms(query))
        if not wanted:
            return []
        return [(t.startchar, t.endchar) for t in self._analyzer(text, chars=True) if t.text in wanted]

    def search(self, text: str, k: int, k1: float, b: float) -> list[tuple[int, float]]:
        """Up to k (seq, BM25 score) pairs for the OR of the query's terms, best first."""
        from whoosh import index, scoring
        from whoosh.query import Or, Term

        terms = self.terms(text)
        if not terms or not self.folder.exists():
            return []
        ix = index.open_dir(str(self.folder))
        with ix.searcher(weighting=scoring.BM25F(B=b, K1=k1)) as searcher:
            results = searcher.search(Or([Term("body", t) for t in terms]), limit=k)
            return [(int(hit["seq"]), float(hit.score)) for hit in results]
