"""Our numpy BM25 over kx's own postings segments against whoosh's own search of the same passages with the
same formula, and hand-worked values."""

from __future__ import annotations

import math
import random

import pytest

from engine import Engine, load_settings
from engine.embedded.dataset import Dataset
from engine.text.inputs import from_text

from .helpers import HashEmbedder


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
    """The same BM25 (Lucene IDF) as a whoosh WeightingModel, so whoosh's matcher tree scores it; with kx's
    statistics (engine/embedded/sparse.py Bm25Scorer): N the live documents, the average length the mean
    of their quantised lengths (whoosh's own is the exact lengths' total, which merges change)."""
    from whoosh.scoring import WeightingModel, WeightLengthScorer, WeightScorer

    class _Scorer(WeightLengthScorer):
        def __init__(self, searcher, fieldname, text):
            parent = searcher.get_parent()
            total, having = parent.doc_count(), parent.doc_frequency(fieldname, text)
            self.idf = math.log(1.0 + (total - having + 0.5) / (having + 0.5))
            lengths = [parent.doc_field_length(i, fieldname, 0) for i in parent.reader().all_doc_ids()]
            self.avgfl = (sum(lengths) / len(lengths) if lengths else 0) or 1.0
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
    """300 passages of drawn words, committed in 30 ingests: 30 segments, merged as the policy asks (the
    scores must not depend on it); each document's name holds words of the same vocabulary (the name field)."""
    rng = random.Random(7)
    for batch in range(30):
        hash_engine.ingest("rand", [from_text(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 60))),
                                              f"{rng.choice(WORDS)}-{batch}-{i}.txt") for i in range(10)])
    return Dataset(hash_engine.settings, "rand")


def whoosh_index_of(dataset: Dataset, folder):
    """A whoosh index of the dataset's passages (text and name field, analysed as kx analyses them): what kx
    wrote itself before round 4, here only as the reference whoosh's own search scores."""
    from whoosh import index
    from whoosh.fields import NUMERIC, TEXT, Schema

    from engine.text.analysis import build_analyzer, name_field_text

    schema = Schema(seq=NUMERIC(int, bits=64, signed=False, stored=True, unique=True),
                    body=TEXT(analyzer=build_analyzer(True), phrase=False),
                    name=TEXT(analyzer=build_analyzer(True), phrase=False))
    ix = index.create_in(str(folder), schema)
    writer = ix.writer()
    catalogue = dataset.reading()
    try:
        for rows in catalogue.iter_passages_after(0, catalogue.max_passage_seq()):
            names = catalogue.names_by_seq([row[0] for row in rows])
            for seq, text, _vec in rows:
                writer.add_document(seq=seq, body=text, name=name_field_text(*names[seq]))
    finally:
        catalogue.close()
    writer.commit()
    return ix


@pytest.mark.parametrize("k1, b", [(1.2, 0.75), (1.5, 0.3), (0.9, 1.0)])
def test_numpy_bm25_matches_whoosh_scoring_the_same_formula(random_dataset: Dataset, k1, b, tmp_path) -> None:
    from whoosh.query import Or, Term

    from engine.embedded.bm25 import NAME_WEIGHT

    sparse = random_dataset.sparse(True)
    assert 1 < len(list(sparse.folder.glob("*.seg"))) < 30  # several segments, some merged
    engine = _with_bm25(random_dataset, k1, b)
    rng = random.Random(11)
    with whoosh_index_of(random_dataset, tmp_path).searcher(weighting=whoosh_bm25(k1, b)) as searcher:
        for _ in range(25):
            # drawn with replacement: a repeated query word weighs as often as it occurs,
            # which whoosh expresses as the term's boost
            query = " ".join(rng.choices(WORDS, k=rng.randint(1, 8)))
            counts = sparse.term_counts(query)
            terms = [Term("body", t, boost=float(n)) for t, n in counts.items()]
            terms += [Term("name", t, boost=NAME_WEIGHT * n) for t, n in counts.items()]
            theirs = [(int(h["seq"]), h.score) for h in searcher.search(Or(terms), limit=None)]
            ours = sparse_hits(engine, "rand", query, max(len(theirs), 1) + 50)
            assert len(ours) == len(theirs)
            assert ours == pytest.approx(dict(theirs), abs=1e-6)
    engine.close()


def test_the_quantised_lengths_are_whooshs_own(random_dataset: Dataset, tmp_path) -> None:
    """One length byte a passage, read back through whoosh's table: the same lengths whoosh gives (exact up to
    10 tokens, rounded above), for every passage of every segment."""
    from engine.embedded.postings import Snapshot, read_segment

    sparse = random_dataset.sparse(True)
    snapshot = Snapshot([read_segment(path) for path in sorted(sparse.folder.glob("*.seg"))])
    ix = whoosh_index_of(random_dataset, tmp_path)
    with ix.searcher() as searcher:
        by_seq = {int(fields["seq"]): number for number, fields in enumerate(searcher.all_stored_fields())}
        for field in ("body", "name"):
            theirs = [searcher.reader().doc_field_length(by_seq[int(seq)], field, 0) for seq in snapshot.seqs()]
            assert snapshot.lengths(field).tolist() == theirs
    assert any(length > 10 for length in snapshot.lengths("body"))  # the quantised range is reached


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
