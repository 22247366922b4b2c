"""Our numpy BM25 scorer against whoosh's own search with the same formula, and a hand-worked value."""

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


@pytest.mark.parametrize("blocks", ["parsed", "through whoosh's matcher"])
def test_postings_read_from_the_segments_equal_whoosh_iterating_them(hash_engine: Engine, blocks: str,
                                                                      monkeypatch) -> None:
    """Several segments (one per ingest), words in more postings than one block holds (whoosh: 128), words in
    one passage only (whoosh inlines those postings into the term's entry) and words some segments lack; the
    blocks parsed from the postings file, and (a layout not parsed here) read through whoosh's matcher."""
    from whoosh import index

    from engine.embedded import sparse_segments as sparse_module
    from engine.embedded.sparse import SegmentTerms

    if blocks != "parsed":
        monkeypatch.setattr(sparse_module, "_read_blocks", lambda *_args: False)

    rng = random.Random(5)
    for batch in range(3):
        hash_engine.ingest("blocks", [from_text(f"common {' '.join(rng.choices(WORDS, k=6))} n{batch}x{i}")
                                      for i in range(150)])
    sparse = Dataset(hash_engine.settings, "blocks").sparse(True)
    reader = index.open_dir(str(sparse.folder)).reader()
    try:
        assert reader.doc_frequency("body", "common") == 450 and len(getattr(reader, "readers", [])) >= 2
        segments = SegmentTerms.of(reader, "body")
        assert segments is not None
        kinds = set()
        for term in reader.lexicon("body"):
            term = term.decode() if isinstance(term, bytes) else term
            ids, weights, having = segments.postings(term)
            pairs = list(reader.postings("body", term).items_as("weight"))
            assert ids.tolist() == [i for i, _w in pairs] and weights.tolist() == [w for _i, w in pairs], term
            assert having == reader.doc_frequency("body", term)
            kinds.add("one" if having == 1 else "blocks" if having > 128 else "some")
        assert kinds == {"one", "some", "blocks"}
        assert segments.postings("absent") is None
    finally:
        reader.close()


def test_a_terms_document_frequency_counts_live_documents_only(hash_engine: Engine) -> None:
    """whoosh's own frequency counts deleted documents as its postings keep them (the sparse index deletes
    what a crash or a re-index left doubled) until a merge drops them; Bm25Scorer counts the live ones, so
    the same passages score the same whatever whoosh merged (issue 38)."""
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
        live = [i for i in range(reader.doc_count_all()) if not reader.is_deleted(i)]
        assert scorer.counted == len(live) == reader.doc_count() < reader.doc_count_all()
        for term in reader.lexicon("body"):
            term = term.decode() if isinstance(term, bytes) else term
            having = sum(1 for i in reader.postings("body", term).all_ids() if not reader.is_deleted(i))
            assert scorer.document_frequency(term) == having, term
        assert scorer.document_frequency("absent") == 0 and any(
            scorer.document_frequency(t) < reader.doc_frequency("body", t) for t in ("common", "word0"))
    finally:
        reader.close()
        scorer.close()


def test_a_reader_of_another_shape_is_scored_through_whooshs_own_postings(hash_engine: Engine) -> None:
    """SegmentTerms reads only the whoosh shapes it knows; for any other the scorer asks whoosh for each term
    and scores the same."""
    from whoosh import index

    from engine.embedded.sparse import Bm25Scorer, SegmentTerms

    rng = random.Random(3)
    for batch in range(2):  # two ingests, two segments
        hash_engine.ingest("mixed", [from_text(" ".join(rng.choices(WORDS, k=8)), f"b{batch}-{i}") for i in range(40)])
    folder = Dataset(hash_engine.settings, "mixed").sparse(True).folder
    known = Bm25Scorer(index.open_dir(str(folder)).reader(), 1.2, 0.75)
    other = Bm25Scorer(index.open_dir(str(folder)).reader(), 1.2, 0.75)
    other._reader.readers[1]._terms = _Wrapped(other._reader.readers[1]._terms)  # a shape SegmentTerms does not know
    other._terms = SegmentTerms.of(other._reader, "body")
    try:
        assert known._terms is not None and other._terms is None
        for query in (["refund", "receipt"], ["laptop", "password", "vpn"], ["absent", "hotel"]):
            for got, want in zip(other.top_arrays(query, 15), known.top_arrays(query, 15)):
                assert got.tolist() == want.tolist()
            assert [other.document_frequency(t) for t in query] == [known.document_frequency(t) for t in query]
    finally:
        known.close()
        other.close()


class _Wrapped:
    """A terms reader that is not whoosh's W3TermsReader but answers as it does."""

    def __init__(self, inner) -> None:
        self._inner = inner

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def __contains__(self, term) -> bool:
        return term in self._inner


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


def test_passage_seqs_read_from_the_seq_column_are_the_stored_ones(hash_engine: Engine) -> None:
    """The scorer maps document numbers to passage seqs from whoosh's seq column, read whole; the same seqs as
    each document's stored fields, over several segments, a merge and deleted documents (which keep theirs)."""
    from whoosh import index
    from whoosh.query import NumericRange

    from engine.embedded.sparse import stored_seqs

    for batch in range(3):  # one commit each: several segments
        hash_engine.ingest("seqs", [from_text(f"common word{i % 4} n{batch}x{i}", f"b{batch}-{i}") for i in range(30)])
    folder = Dataset(hash_engine.settings, "seqs").sparse(True).folder
    ix = index.open_dir(str(folder))
    writer = ix.writer()
    writer.delete_by_query(NumericRange("seq", 40, 45))
    writer.commit(merge=False)
    for merged in (False, True):
        if merged:
            ix.optimize()
        with ix.reader() as reader:
            total = reader.doc_count_all()
            assert merged or len(getattr(reader, "readers", [reader])) == 3
            assert merged or reader.has_deletions()
            stored = [reader.stored_fields(i)["seq"] for i in range(total)]
            ours = stored_seqs(reader, total)
            assert ours is not None and ours.tolist() == stored


def test_an_index_without_the_seq_column_answers_the_same(hash_engine: Engine, monkeypatch) -> None:
    """A sparse index written before the seq column existed is read through the stored fields: same hits, same
    scores, same filter mask as an index with the column."""
    from whoosh.fields import NUMERIC

    import engine.embedded.sparse as sparse_module
    from engine.embedded.sparse import stored_seqs

    rng = random.Random(11)
    docs = [from_text(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 40))), f"d{i}") for i in range(120)]
    hash_engine.ingest("with", docs)
    new_schema = sparse_module._schema

    def old_schema(stopwords: bool):
        schema = new_schema(stopwords)
        schema.remove("seq")
        schema.add("seq", NUMERIC(int, bits=64, signed=False, stored=True, unique=True))
        return schema

    monkeypatch.setattr(sparse_module, "_schema", old_schema)
    hash_engine.ingest("without", docs)
    monkeypatch.undo()

    scorers = {}
    for name in ("with", "without"):
        scorers[name] = Dataset(hash_engine.settings, name).sparse(True).open_scorer(1.2, 0.75)
    try:
        assert stored_seqs(scorers["with"]._reader, scorers["with"].total) is not None
        assert stored_seqs(scorers["without"]._reader, scorers["without"].total) is None
        for query in ("refund receipt", "laptop password vpn", "holiday travel hotel mileage"):
            assert sparse_hits(hash_engine, "with", query, 20) == sparse_hits(hash_engine, "without", query, 20)
        assert scorers["with"].docnum_seqs().tolist() == scorers["without"].docnum_seqs().tolist()
    finally:
        for scorer in scorers.values():
            scorer.close()


def test_postings_blocks_that_do_not_parse_are_left_to_whoosh_and_leave_nothing_behind() -> None:
    # the W3 layout: a tag, then blocks of (signed byte count, negative for the last; pickled info; the
    # pickled, maybe compressed, data); anything else (a damaged file) is read by whoosh's matcher instead,
    # so nothing of a half-parsed term may stay in the gathered blocks
    import pickle
    import struct
    import zlib

    from engine.embedded.sparse import _Blocks, _read_blocks

    def block(gaps: list[int], weights, last: bool, compress: bool) -> bytes:
        data = pickle.dumps((tuple(gaps), weights, None), 2)
        data = zlib.compress(data, 3) if compress else data
        info = pickle.dumps((len(gaps), sum(gaps), 1.0, 3 if compress else 0, 1, 1), 2)
        size = len(info) + len(data)
        return struct.pack("!i", -size if last else size) + info + data

    class Postings:  # whoosh's StructFile.get
        def __init__(self, data: bytes) -> None:
            self.data = data

        def get(self, offset: int, length: int) -> bytes:
            return self.data[offset:offset + length]

    body = b"W3Bl" + block([3, 1, 2], None, False, True) + block([7, 5], 2.0, True, False)
    layout = b"xx" + body
    into = _Blocks()
    into.add_block([1], [1.0], 0)
    assert _read_blocks(Postings(layout), (2, (len(body),)), into, 100)
    numbers, weights = into.arrays()
    assert numbers.tolist() == [1, 103, 104, 106, 107, 112] and weights.tolist() == [1.0, 1.0, 1.0, 1.0, 2.0, 2.0]
    for damaged in (b"W3Bx" + body[4:], body[:-3], body[:12], body.replace(b"W3Bl", b"W3Bl\x00\x00\x00\x00", 1),
                    body[:-1] + b"\x00"):
        into = _Blocks()
        into.add_block([1], [1.0], 0)
        assert not _read_blocks(Postings(b"xx" + damaged), (2, len(damaged)), into, 100)
        assert into.arrays()[0].tolist() == [1] and into.arrays()[1].tolist() == [1.0]
