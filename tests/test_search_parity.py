"""The lean query path (arrays through fusion and MMR) gives the same answers, bit for bit, as the spec.

tests/fusion_spec.py keeps `rank_list`, `rrf` and `strengths` (and engine/fusion.py `mmr`) as the
readable definition of the ranking (Ranked and Fused objects, exact
fractions). engine/ranking.py runs the same ranking on arrays (`fuse`,
`Pool.strengths`, MMR stopped after k picks). These tests hold the two
together: on random lists full of ties, and on real queries over a small
corpus built to tie (the same words in several documents, one passage found
by both retrievers at ranks whose reciprocal sums tie exactly), in every mode, hybrid with its third
list (the agreed head ranked by best sentence, engine/ranking.py SENTENCE_DEPTH) and its lead vote (LEAD_RATIO).
benchmarks/search_parity.py does the same against an older commit on SciFact.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from engine import Engine, load_settings
from engine.embedded.readers import dense_ef
from engine.fusion import fuse, mmr, round_like_python
from engine.ranking import LEAD, LEAD_RATIO, SENTENCE, SENTENCE_DEPTH
from engine.text.answer_span import best_sentence_scores, word_vectors
from engine.text.inputs import from_text
from engine.vectors import checked_vectors

from .fusion_spec import Ranked, rank_list, rrf, strengths
from .helpers import HashEmbedder


def _bits(value: float | None) -> str | None:
    return None if value is None else float.hex(float(value))


# ------------------------------------------------------------------------ rounding


def test_round_like_python_is_round_bit_for_bit() -> None:
    rng = np.random.default_rng(7)
    values = np.concatenate([
        rng.standard_normal(20_000),                       # cosines' range
        rng.uniform(0, 40, 20_000),                        # BM25's
        (1.0 - rng.standard_normal(5_000).astype(np.float32)).astype(np.float64),  # float32 similarities
        np.arange(-2000, 2000) / 128.0,                    # exact halves at the 7th decimal (j / 128)
        (np.arange(0, 4000) + 0.5) / 1e6,                  # the nearest doubles to halves
        [0.0, -0.0, 1e-9, -1e-9, 0.5, 123456.1234565],
    ])
    ours = round_like_python(values, 6)
    theirs = [round(float(v), 6) for v in values]
    assert [float.hex(float(v)) for v in ours] == [float.hex(v) for v in theirs]


# ------------------------------------------------------------------------ fusion


def _random_lists(rng: random.Random, names: tuple[str, ...]) -> tuple[list[str], dict[str, list[tuple[int, float]]]]:
    n = rng.randint(1, 60)
    refs = sorted({f"{rng.getrandbits(32):08x}" for _ in range(n)})
    rng.shuffle(refs)
    lists = {}
    for name in names:
        size = rng.randint(0, len(refs))
        levels = [rng.choice([0.0, -0.0, 0.5, 1.25, 3.0]) for _ in range(3)] + [rng.uniform(-1, 5)]
        members = rng.sample(range(len(refs)), size)
        if members and rng.random() < 0.3:  # a repeated passage within one list: its best score counts
            members.append(members[0])
        lists[name] = [(c, rng.choice(levels)) for c in members]
    return refs, lists


@pytest.mark.parametrize("names", [("dense", "sparse"), ("dense",), ("sparse",), ("a", "b", "c"),
                                   ("dense", "lead", "sentence", "sparse")])
@pytest.mark.parametrize("k", [1, 2, 60, 10**5])   # 10**5: past the integer shortcut, the exact rationals
def test_fuse_is_rank_list_then_rrf(names: tuple[str, ...], k: int) -> None:
    rng = random.Random(hash((names, k)) & 0xFFFF)
    for _ in range(150):
        refs, lists = _random_lists(rng, names)
        order = np.empty(len(refs), dtype=np.int64)
        order[sorted(range(len(refs)), key=refs.__getitem__)] = np.arange(len(refs))
        pool = fuse({name: (np.array([c for c, _ in hits], dtype=np.int64), np.array([s for _, s in hits]))
                     for name, hits in lists.items()}, order, k)
        ranked = {name: rank_list(Ranked(refs[c], s) for c, s in hits) for name, hits in lists.items()}
        spec = rrf(ranked, k)
        assert [refs[c] for c in pool.order.tolist()] == [f.ref for f in spec]
        assert [_bits(pool.score[c]) for c in pool.order.tolist()] == [_bits(f.score) for f in spec]
        for name in names:
            assert [int(pool.ranks[name][c]) or None for c in pool.order.tolist()] == [f.ranks[name] for f in spec]
            assert [None if not pool.ranks[name][c] else _bits(pool.raw[name][c]) for c in pool.order.tolist()] \
                == [_bits(f.raw[name]) for f in spec]
        assert [_bits(v) for v in pool.strengths(pool.order)] == [_bits(v) for v in strengths(spec, ranked)]


def test_fusing_again_with_a_list_added_gives_what_one_fuse_of_every_list_gives() -> None:
    # hybrid fuses dense, sparse and lead, then again with its sentence list (reusing the first three as
    # ranked): the second answer must be a fresh fuse's, bit for bit; a list given as new arrays, or a new
    # ref order, is ranked afresh
    rng = random.Random(24)
    for _ in range(200):
        refs, lists = _random_lists(rng, ("dense", "lead", "sentence", "sparse"))
        order = np.empty(len(refs), dtype=np.int64)
        order[sorted(range(len(refs)), key=refs.__getitem__)] = np.arange(len(refs))
        columns = {name: (np.array([c for c, _ in hits], dtype=np.int64), np.array([s for _, s in hits]))
                   for name, hits in lists.items()}
        first = fuse({n: c for n, c in columns.items() if n != "sentence"}, order, 60)
        if rng.random() < 0.3:  # the caller changed a list it had fused: new arrays, ranked again
            members, scores = columns["sparse"]
            columns["sparse"] = (members[::-1].copy(), scores[::-1] * 2.0)
        if rng.random() < 0.2:  # another ref order (as a new array): nothing reused
            order = order[::-1].copy()
        again, fresh = fuse(columns, order, 60, reuse=first), fuse(columns, order, 60)
        assert again.order.tolist() == fresh.order.tolist()
        assert [_bits(v) for v in again.score] == [_bits(v) for v in fresh.score]
        for name in columns:
            assert again.ranks[name].tolist() == fresh.ranks[name].tolist()
            assert [_bits(v) for v in again.raw[name]] == [_bits(v) for v in fresh.raw[name]]
            assert _bits(again.tops[name]) == _bits(fresh.tops[name])


def test_fuse_breaks_an_exact_rational_tie_by_ref() -> None:
    # 1/63 + 1/140 == 1/84 + 1/90 (k 60: ranks 3 and 80 against 24 and 30); their float sums differ in the
    # last bit, so only the exact sums put "a" (the smaller ref) first
    dense = {3: "z", 24: "a", 30: "p", 80: "q"}
    sparse = {80: "z", 30: "a", 24: "p", 3: "q"}
    refs = ["a", "p", "q", "z"] + [f"filler{i:03d}" for i in range(200)]
    number = {ref: i for i, ref in enumerate(refs)}
    fillers = iter(range(4, len(refs)))

    def column(at: dict[int, str]) -> tuple[np.ndarray, np.ndarray]:
        members = [number[at[r]] if r in at else next(fillers) for r in range(1, 81)]
        return np.array(members), np.arange(80, 0, -1, dtype=np.float64)

    pool = fuse({"dense": column(dense), "sparse": column(sparse)}, np.arange(len(refs)), 60)
    top = [refs[c] for c in pool.order[:4].tolist()]
    assert top == ["a", "p", "q", "z"]
    assert len({pool.score[number[r]] for r in top}) == 1  # one float for one exact sum


# ------------------------------------------------------------------------ real queries

WORDS = ("leave vacation portal manager travel desk refund window token laptop badge parking "
         "calendar approval expense flight").split()


@pytest.fixture
def tie_engine(kx_home) -> Engine:
    """A corpus that ties: repeated sentences (equal BM25 scores and, case aside, equal vectors)."""
    rng = random.Random(3)
    docs = []
    for i in range(70):
        words = rng.sample(WORDS, rng.randint(2, 6))
        text = " ".join(words)
        if i % 3 == 0:
            text = text.capitalize()  # different bytes, the same words: a tie in both retrievers
        docs.append(from_text(f"{text}. Note {i % 7}.", f"doc-{i:02d}"))
    # one word no other passage holds: sparse's best by a wide margin for a query that names it (a lead vote)
    docs.append(from_text("Zeppelin hangar parking. Note 5.", "doc-70"))
    settings = load_settings({"chunk_size": 200, "chunk_overlap": 40, "mmr_depth": 8, "rrf_k": 2})
    engine = Engine(settings, embedder=HashEmbedder())
    engine.ingest("ties", docs)
    return engine


def _spec_answer(engine: Engine, text: str, vector: np.ndarray, mode: str, rerank: bool, k: int) -> list[tuple]:
    """The answer as the spec functions compose it (the query path before arrays), from the same lists."""
    s = engine.settings
    with engine.reading("ties") as searcher:
        pool = max(s.candidate_pool, k)
        found = {}
        if mode in ("dense", "hybrid"):
            found["dense"] = searcher.dense_candidates(vector, pool)
        if mode in ("sparse", "hybrid"):
            found["sparse"] = searcher.sparse_candidates(text, pool)
        lists, seq_of = {}, {}
        for name, c in found.items():
            refs = searcher.refs(c.keys)
            lists[name] = rank_list(Ranked(ref, score) for ref, score in zip(refs, c.scores.tolist()) if ref)
            seq_of.update({ref: key for ref, key in zip(refs, c.keys) if ref})
        retrievers = dict(lists)
        sparse = lists.get("sparse", [])
        first, second = (sparse[0].score, sparse[1].score) if len(sparse) > 1 else (0.0, 0.0)
        if len(lists) > 1 and second > 0 and first >= LEAD_RATIO * second:
            # hybrid's lead vote (ranking.py LEAD_RATIO): sparse's best, once more at rank 1
            lists[LEAD] = [Ranked(sparse[0].ref, round(first / second, 6))]
        fused = rrf(lists, s.rrf_k)
        if len(retrievers) > 1:  # hybrid's third list: the agreed head by best sentence (ranking.py SENTENCE_DEPTH)
            agreed = [f for f in fused[:SENTENCE_DEPTH] if all(f.ranks[n] is not None for n in retrievers)]
            rows = searcher.passages([seq_of[f.ref] for f in agreed])
            scores = best_sentence_scores([rows[seq_of[f.ref]].text for f in agreed], text,
                                          word_vectors(engine.model_card()))
            lists[SENTENCE] = rank_list(Ranked(f.ref, round(v, 6)) for f, v in zip(agreed, scores))
            fused = rrf(lists, s.rrf_k)
        single = next(iter(lists)) if len(lists) == 1 else None
        relevance = [float(f.raw[single] or 0.0) if single else f.score for f in fused]
        order = list(range(len(fused)))
        duplicate_of: dict[int, int] = {}
        if rerank and len(fused) > 1:
            depth = min(len(fused), s.mmr_depth)
            head = fused[:depth]
            picks = mmr([f.ref for f in head], relevance[:depth], searcher.vectors([seq_of[f.ref] for f in head]),
                        depth, s.mmr_lambda, s.mmr_duplicate_threshold, strengths(head, retrievers))
            duplicate_of = {i: d for i, d in zip(picks.order, picks.duplicate_of) if d is not None}
            order = picks.order + order[depth:]
    return [(fused[p].ref, _bits(relevance[p]), fused[p].ranks.get("dense"), _bits(fused[p].raw.get("dense")),
             fused[p].ranks.get("sparse"), _bits(fused[p].raw.get("sparse")), fused[p].ranks.get(SENTENCE),
             _bits(fused[p].raw.get(SENTENCE)), _bits(fused[p].raw.get(LEAD)), _bits(fused[p].score), p + 1,
             p + 1 - rank, fused[duplicate_of[p]].ref if p in duplicate_of else None)
            for rank, p in enumerate(order[:k], start=1)]


def test_queries_give_the_specs_answers_in_every_mode(tie_engine: Engine) -> None:
    rng = random.Random(11)
    queries = [" ".join(rng.sample(WORDS, rng.randint(1, 4))) for _ in range(12)]
    queries += ["note", "zzz unknown", "zeppelin parking", "parking zeppelin refund"]
    embedder = tie_engine.embedder()
    assert embedder is not None
    checked = leads = 0
    for text in queries:
        vector = checked_vectors(embedder.encode([text]), 1, "the query")[0]  # as run_query takes it
        for mode in ("hybrid", "dense", "sparse"):
            for rerank in (True, False):
                for k in (3, 10, 40):
                    result = tie_engine.query("ties", text, vector=vector, mode=mode, rerank=rerank, k=k)
                    ours = [(h.passage_ref, _bits(h.score), h.dense_rank, _bits(h.dense_score), h.sparse_rank,
                             _bits(h.sparse_score), h.sentence_rank, _bits(h.sentence_score), _bits(h.lead_ratio),
                             _bits(h.fused_score),
                             h.fused_rank, h.mmr_moved, h.duplicate_of) for h in result.hits]
                    assert ours == _spec_answer(tie_engine, text, vector, mode, rerank, k), (text, mode, rerank, k)
                    checked += len(ours)
                    leads += sum(h.lead_ratio is not None for h in result.hits)
    assert checked > 1000
    assert leads, "no query had a lead vote; the lead path went unchecked"


def test_dense_arrays_are_the_graphs_pairs(tie_engine: Engine) -> None:
    """search_arrays' floats are what the pair-per-hit conversion gave: 1 - d in float32, then widened."""
    embedder = tie_engine.embedder()
    assert embedder is not None
    with tie_engine.reading("ties") as searcher:
        index = searcher.dense.load()
        for text in ("leave portal", "token badge laptop", "Note 3"):
            vector = embedder.encode([text])[0]
            ids, distances = index.query(vector, k=len(index), query_ef=dense_ef(len(index)))
            pairs = [(int(i), round(float(1.0 - d), 6)) for i, d in zip(ids, distances)]
            found = searcher.dense_candidates(vector, len(index))
            assert [(key, _bits(score)) for key, score in zip(found.keys, found.scores.tolist())] == \
                [(seq, _bits(score)) for seq, score in pairs]


# ------------------------------------------------------------------------ staleness


def test_a_reader_stays_current_on_stats_and_notices_what_moved(tie_engine: Engine, monkeypatch) -> None:
    searcher = tie_engine.searcher("ties")
    assert searcher.current()
    with monkeypatch.context() as patch:  # nothing moved: no sidecar, checksum or catalogue count is read
        patch.setattr(searcher, "_read_state", lambda: pytest.fail("read the state though nothing moved"))
        assert searcher.current()

    Engine(tie_engine.settings, embedder=HashEmbedder()).ingest("ties", [from_text("brand new words", "new")])
    assert not searcher.current()  # another connection committed (and the indexes caught up)
    fresh = tie_engine.searcher("ties")
    assert fresh is not searcher and fresh.current()
    assert tie_engine.query("ties", "brand new words", mode="sparse").hits[0].document_name == "new"

    fresh.catalogue.lineage_mark()  # a read on the reader's own connection moves nothing
    assert fresh.current()
    with open(fresh.dense.path, "ab") as graph:  # a damaged graph file: its checksum no longer matches
        graph.write(b"\0")
    assert not fresh.current()
