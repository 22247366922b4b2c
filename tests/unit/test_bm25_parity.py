"""Our numpy BM25 scorer against whoosh's own search with the same formula, and a hand-worked value."""

from __future__ import annotations

import math
import random

import pytest

from engine import Engine, load_settings
from engine.embedded.dataset import Dataset
from engine.text.inputs import from_text

from ..helpers import HashEmbedder


def sparse_hits(engine: Engine, name: str, text: str, k: int) -> dict[int, float]:
    """Seq -> BM25 score as a query's sparse list holds them (the searcher's own path: engine/embedded/readers.py
    `sparse_candidates`, scores rounded to 6 decimals there, so the checks below compare to 1e-6)."""
    with engine.reading(name) as searcher:
        found = searcher.sparse_candidates(text, k)
    return dict(zip(found.keys, found.scores.tolist()))


def _with_bm25(dataset: Dataset, k1: float, b: float) -> Engine:
    """The dataset's home read with other BM25 constants (they are settings, not part of the dataset)."""
    home = dataset.folder.parents[1]  # HOME/datasets/NAME
    return Engine(load_settings({"home": str(home), "bm25_k1": k1, "bm25_b": b}, env={}),
                  embedder=HashEmbedder())


def whoosh_bm25(k1: float, b: float):
    """The same BM25 (Lucene IDF) as a whoosh WeightingModel, so whoosh's matcher tree scores it."""
    from whoosh.scoring import WeightingModel, WeightLengthScorer, WeightScorer

    class _Scorer(WeightLengthScorer):
        def __init__(self, searcher, fieldname, text):
            parent = searcher.get_parent()
            total, having = parent.doc_count_all(), parent.doc_frequency(fieldname, text)
            self.idf = math.log(1.0 + (total - having + 0.5) / (having + 0.5))
            self.avgfl = parent.avg_field_length(fieldname) or 1.0
            self.setup(searcher, fieldname, text)

        def _score(self, weight, length):
            return self.idf * weight * (k1 + 1.0) / (weight + k1 * ((1.0 - b) + b * length / self.avgfl))

    class _Model(WeightingModel):
        def scorer(self, searcher, fieldname, text, qf=1):
            if not searcher.schema[fieldname].scorable:
                return WeightScorer.for_(searcher, fieldname, text)
            return _Scorer(searcher, fieldname, text)

    return _Model()


WORDS = ("refund return receipt token vpn badge leave holiday travel expense hotel mileage laptop password "
         "parental sick carry over core hours stipend abroad onboarding buddy equipment desk").split()


@pytest.fixture
def random_dataset(hash_engine: Engine) -> Dataset:
    rng = random.Random(7)
    docs = [from_text(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 60)))) for _ in range(300)]
    hash_engine.ingest("rand", docs)
    return Dataset(hash_engine.settings, "rand")


@pytest.mark.parametrize("k1, b", [(1.2, 0.75), (1.5, 0.3), (0.9, 1.0)])
def test_numpy_bm25_matches_whoosh_scoring_the_same_formula(random_dataset: Dataset, k1, b) -> None:
    from whoosh import index
    from whoosh.query import Or, Term

    sparse = random_dataset.sparse(True)
    engine = _with_bm25(random_dataset, k1, b)
    rng = random.Random(11)
    ix = index.open_dir(str(sparse.folder))
    with ix.searcher(weighting=whoosh_bm25(k1, b)) as searcher:
        for _ in range(25):
            # drawn with replacement: a repeated query word weighs as often as it occurs,
            # which whoosh expresses as the term's boost
            query = " ".join(rng.choices(WORDS, k=rng.randint(1, 8)))
            counts = sparse.term_counts(query)
            theirs = [(int(h["seq"]), h.score) for h in searcher.search(
                Or([Term("body", t, boost=float(n)) for t, n in counts.items()]), limit=None)]
            ours = sparse_hits(engine, "rand", query, max(len(theirs), 1) + 50)
            assert len(ours) == len(theirs)
            assert ours == pytest.approx(dict(theirs), abs=1e-6)
    engine.close()


def test_bm25_score_matches_a_hand_worked_value(hash_engine: Engine) -> None:
    # Three passages; the query term "token" occurs in one, twice.
    hash_engine.ingest("tiny", [from_text("token token badge"), from_text("badge desk"), from_text("desk")])
    [score] = sparse_hits(hash_engine, "tiny", "token", 10).values()
    # N = 3, n = 1: idf = ln(1 + 2.5 / 1.5); lengths 3, 2, 1 so avgdl = 2; tf = 2, dl = 3
    idf = math.log(1 + 2.5 / 1.5)
    expected = idf * 2 * 2.2 / (2 + 1.2 * (0.25 + 0.75 * 3 / 2))
    assert score == pytest.approx(expected, abs=1e-6)


def test_a_repeated_query_word_counts_as_often_as_it_occurs(hash_engine: Engine) -> None:
    # "token badge token": token twice, badge once. N = 3; token in 1 passage, badge in 2.
    hash_engine.ingest("tiny", [from_text("token token badge"), from_text("badge desk"), from_text("desk")])
    sparse = Dataset(hash_engine.settings, "tiny").sparse(True)
    assert sparse.term_counts("Token badge, token!") == {"token": 2, "badg": 1}
    scores = sparse_hits(hash_engine, "tiny", "token badge token", 10)
    idf_token, idf_badge = math.log(1 + 2.5 / 1.5), math.log(1 + 1.5 / 2.5)
    def norm(dl: float) -> float:
        return 1.2 * (0.25 + 0.75 * dl / 2)  # avgdl = (3 + 2 + 1) / 3 = 2

    first = 2 * idf_token * 2 * 2.2 / (2 + norm(3)) + idf_badge * 1 * 2.2 / (1 + norm(3))
    second = idf_badge * 1 * 2.2 / (1 + norm(2))
    assert sorted(scores.values(), reverse=True) == pytest.approx([first, second], abs=1e-6)


def test_postings_read_a_block_at_a_time_equal_whoosh_iterating_them(hash_engine: Engine) -> None:
    """Several segments (one per ingest) and words in more postings than one block holds (whoosh: 128)."""
    from whoosh import index

    from engine.embedded.sparse import read_blocks

    rng = random.Random(5)
    for batch in range(3):
        hash_engine.ingest("blocks", [from_text(f"common {' '.join(rng.choices(WORDS, k=6))} n{batch}x{i}")
                                      for i in range(150)])
    sparse = Dataset(hash_engine.settings, "blocks").sparse(True)
    reader = index.open_dir(str(sparse.folder)).reader()
    try:
        assert reader.doc_frequency("body", "common") == 450 and len(getattr(reader, "readers", [])) >= 2
        for term in reader.lexicon("body"):
            term = term.decode() if isinstance(term, bytes) else term
            blocks = read_blocks(reader.postings("body", term))
            pairs = list(reader.postings("body", term).items_as("weight"))
            assert blocks is not None
            assert blocks[0].tolist() == [i for i, _w in pairs] and blocks[1].tolist() == [w for _i, w in pairs]
            assert len(blocks[0]) == reader.doc_frequency("body", term)   # what Bm25Scorer takes as the frequency
    finally:
        reader.close()


def test_a_terms_postings_count_its_documents_deleted_ones_too(hash_engine: Engine) -> None:
    """Bm25Scorer takes a term's document frequency from its postings' length: whoosh's own frequency counts
    deleted documents as its postings keep them (the sparse index deletes what a crash left doubled)."""
    from whoosh import index
    from whoosh.query import NumericRange

    from engine.embedded.sparse import Bm25Scorer

    for batch in range(2):
        hash_engine.ingest("gone", [from_text(f"common word{i % 3} n{batch}x{i}") for i in range(20)])
    folder = Dataset(hash_engine.settings, "gone").sparse(True).folder
    ix = index.open_dir(str(folder))
    writer = ix.writer()
    writer.delete_by_query(NumericRange("seq", 30, None))
    writer.commit(merge=False)
    reader = ix.reader()
    scorer = Bm25Scorer(ix.reader(), 1.2, 0.75)
    try:
        assert reader.has_deletions()
        for term in reader.lexicon("body"):
            term = term.decode() if isinstance(term, bytes) else term
            assert scorer.document_frequency(term) == reader.doc_frequency("body", term), term
        assert scorer.document_frequency("absent") == 0
    finally:
        reader.close()
        scorer.close()


def test_a_matcher_with_an_unknown_part_is_left_unread_for_whoosh_to_iterate(hash_engine: Engine) -> None:
    """read_blocks gives up before reading anything, so the fallback sees every segment's postings."""
    from whoosh import index
    from whoosh.matching.wrappers import MultiMatcher, WrappingMatcher

    from engine.embedded.sparse import read_blocks

    for batch in range(2):  # two ingests, two segments
        hash_engine.ingest("mixed", [from_text(f"common word n{batch}x{i}") for i in range(5)])
    reader = index.open_dir(str(Dataset(hash_engine.settings, "mixed").sparse(True).folder)).reader()
    try:
        expected = list(reader.postings("body", "common").items_as("weight"))
        matcher = reader.postings("body", "common")
        assert isinstance(matcher, MultiMatcher) and len(matcher.matchers) == 2 and len(expected) == 10
        matcher.matchers[1] = WrappingMatcher(matcher.matchers[1])  # a shape read_blocks does not know
        assert read_blocks(matcher) is None
        assert list(matcher.items_as("weight")) == expected  # the first segment was not consumed
    finally:
        reader.close()


def test_field_lengths_read_from_the_columns_are_whooshs_own(hash_engine: Engine) -> None:
    """The scorer reads every length byte of a segment at once; the same lengths as whoosh's per-document walk,
    over several segments, deletions and a passage of stopwords only (whoosh gives None: no length byte)."""
    from whoosh import index

    from engine.embedded.sparse import field_lengths

    rng = random.Random(5)
    for batch in range(4):  # one commit each: several segments
        docs = [from_text(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 400))), f"b{batch}-{i}")
                for i in range(40)]
        hash_engine.ingest("lengths", docs + [from_text("the of and", f"b{batch}-stopwords")])
    sparse = Dataset(hash_engine.settings, "lengths").sparse(True)
    with index.open_dir(str(sparse.folder)).reader() as reader:
        total = reader.doc_count_all()
        walked = [reader.doc_field_length(i, "body", 0) or 0 for i in range(total)]
        assert len(getattr(reader, "readers", [reader])) > 1 and 0 in walked
        ours = field_lengths(reader, "body", total)
        assert ours is not None and ours.tolist() == [float(v) for v in walked]
