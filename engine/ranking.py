"""Ranking policy, top to bottom: which lists a query fuses, how, and how the head is diversified.

`rank` reads in the order a query runs:

1. candidates: dense and sparse pools from the searcher (inside the --where / --versions filter);
2. fuse: every passage numbered once, hybrid's lead vote (LEAD_RATIO) added, Reciprocal Rank Fusion
   (engine/fusion.py `fuse`, settings.rrf_k);
3. expand (optional): a second pass from the fused top (engine/expansion.py), fused again the same way;
4. the sentence list: hybrid's third list, the agreed head ranked by best sentence (SENTENCE_DEPTH);
5. diversify: MMR over the fused head (engine/fusion.py `mmr`), with the retrievers' strengths as its floor.

The arithmetic (RRF, MMR) is engine/fusion.py's; this module decides what it is applied to. query.py
checks the question, holds the readers and turns the answer's candidate numbers into hits. Ties break on
ascending passage ref at every step.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from .config import Settings
from .embedding.cards import ModelCard
from .expansion import FEEDBACK_PASSAGES, rocchio
from .filters import PassageFilter
from .fusion import Pool, fuse, mmr, round_like_python
from .retrieval import MAX_QUERY_TERMS, Candidates, Searcher
from .text.answer_span import SentenceMemo, best_sentence_scores, word_vectors

# Hybrid fuses a third list: of the best SENTENCE_DEPTH fused passages, those both retrievers found, ranked
# again by their best sentence (answer_span's scorer: word-piece cosine to the query plus the share of its
# stems). Dense and sparse score a passage as a whole, so inside the right document they prefer the passage
# that repeats the query's topic words (an introduction) over the one whose sentence answers. The list only
# reorders that head (each of its passages gains at least 1/(K + SENTENCE_DEPTH), a passage below it none),
# and only passages the two lists agree on: a paraphrase only dense found keeps its plain RRF place, since
# the word-level sentence score cannot see a paraphrase. The passages met there are the ones answer_span
# scores next, from its cache. Measured (BENCHMARKS.md): QA success@1 0.778 -> 0.833, SciFact nDCG@10
# 0.7217 -> 0.730, Cranfield and CISI within 0.001.
SENTENCE_DEPTH = 10
SENTENCE = "sentence"
# Hybrid's lead vote: when sparse's best passage scores at least LEAD_RATIO times its runner-up, RRF counts
# it once more, at rank 1 (a one-passage list, LEAD). RRF keeps ranks only, so a passage whose rare query
# words no other passage holds (BM25 26.6 against 15.2 next) weighs as little as a narrow first place, and
# a middling dense rank (32nd among passages of the same paper) pulled it to 8th. A BM25 margin that wide is
# rarely wrong where answers are one passage: such a first passage was right for 21 of 22 QA questions and
# 31 of 42 SciFact queries, against 0.83 and 0.61 for hybrid's first hit. Sparse only: BM25 scores grow
# with the query words' rarity and a ratio of them means something, while cosines crowd into a narrow band
# (a dense lead at 1.2 x cost SciFact 0.001 more and gained nothing). Needs a runner-up to compare with.
# Measured (BENCHMARKS.md, "The lead vote"): QA success@1 0.815 -> 0.833, success@5 0.944 -> 0.963,
# Cranfield +0.001, CISI +0.003, SciFact -0.001 (nDCG@10, MMR on); 1.4 was the best ratio of 1.3-1.75
# on all four sets together.
LEAD_RATIO = 1.4
LEAD = "lead"
# Dense's long-document correction: a passage's cosine less LONG_DOCUMENT_PENALTY x (sqrt(2 ln n) -
# sqrt(2 ln LONG_DOCUMENT_PASSAGES)), n its document's passage count (no less than LONG_DOCUMENT_PASSAGES).
# A book of a thousand passages holds, by chance, one close to almost any question: the expected best of n
# draws grows like sqrt(2 ln n) standard deviations, so in a pile that mixes books with short papers and
# pages the books' passages come first for questions about the others (round 3's outside measurement: 6 of
# dense's 7 wrong first hits were passages of long novels). The correction takes that chance back, at most
# 0.086 for a 1,200-passage book; documents of up to LONG_DOCUMENT_PASSAGES passages (every Cranfield and
# CISI record, most papers and pages) are untouched, so are the relative places of one document's passages
# (SciFact's few records of 9-15 passages lose up to 0.014: its nDCG@10 is the same to 4 places). The graph
# is asked LONG_DOCUMENT_DEPTH times as deep, in a dataset that holds a long document, so a short
# document's passage can move up into the pool.
# Measured (BENCHMARKS.md, "Long documents"): 0.05 gains the own set's questions in the qa pile (hybrid
# success@1 0.759 -> 0.778) and changes no qa-dev answer's rank at 1 or 5; 0.1 costs qa-dev a question at 5.
LONG_DOCUMENT_PENALTY = 0.05
LONG_DOCUMENT_PASSAGES = 8
LONG_DOCUMENT_DEPTH = 2
_SHORT_DOCUMENT_DRAWS = math.sqrt(2.0 * math.log(LONG_DOCUMENT_PASSAGES))

Columns = dict[str, tuple[np.ndarray, np.ndarray]]


@dataclass
class Request:
    """What `rank` needs of one query; `notes`, `timings` and `sentences` are the query's own, added to."""

    text: str | None
    vector: np.ndarray | None
    use_dense: bool
    use_sparse: bool
    pool: int
    k: int
    rerank: bool
    expand: bool
    only: PassageFilter | None
    card: ModelCard | None
    notes: list[str]
    timings: dict[str, float]
    sentences: SentenceMemo = field(default_factory=dict)


@dataclass
class Fusion:
    """The fused candidates: each passage numbered once (its key and ref by number), each list's
    (numbers, scores), and RRF's answer over them (`fused`)."""

    lists: dict[str, Candidates]
    keys: list[Any]
    refs: list[str]
    columns: Columns
    ref_order: np.ndarray
    fused: Pool


@dataclass
class Ranking:
    """`rank`'s answer: the fusion, the relevance each hit reports, the chosen places in the fused order,
    the near-duplicates MMR found (place -> place of the pick it repeats), rows already read, added terms."""

    fusion: Fusion
    relevance: np.ndarray
    positions: list[int]
    duplicate_of: dict[int, int]
    known_rows: dict[Any, Any]
    added: list[str] | None


def rank(settings: Settings, searcher: Searcher, request: Request) -> Ranking:
    """Candidates -> fuse (lead vote, RRF) -> expand -> the sentence list -> MMR, under the searcher's lock.

    Passages travel as candidate numbers and arrays (engine/fusion.py `fuse`): refs are read once per
    passage per reader (the ties' tie-breaker).
    """
    lists = candidates(searcher, request)
    t = time.perf_counter()
    fusion = fused_lists(searcher, lists, settings.rrf_k)
    no_words = _sparse_notes(searcher, request, fusion)
    timings = request.timings
    timings["fusion"] = _ms(t)
    added: list[str] | None = None
    if request.expand and len(fusion.fused.order):
        t = time.perf_counter()
        fusion, added = _expanded(searcher, request, fusion, settings.rrf_k)
        timings["expand"] = _ms(t)
        if no_words and "sparse" in fusion.columns and len(fusion.columns["sparse"][0]):
            # the first pass's sparse list was empty, the expanded one is not: say where its passages came from
            terms = f" ({', '.join(added)})" if added else ""
            notes = request.notes
            notes[notes.index(no_words)] = (f"{no_words}; the sparse list holds the passages the expansion's "
                                           f"added terms{terms} found")
    retrievers = fusion.fused  # dense and sparse alone: what MMR's duplicate floor reads (raw scores)
    known_rows: dict[Any, Any] = {}
    if len(fusion.lists) > 1 and request.text is not None and len(fusion.fused.order):
        t = time.perf_counter()
        known_rows = _add_sentence_list(searcher, request, fusion, settings.rrf_k)
        timings["sentence"] = _ms(t)
    relevance, positions, duplicate_of = _diversify(settings, searcher, request, fusion, retrievers)
    return Ranking(fusion, relevance, positions, duplicate_of, known_rows, added)


def candidates(searcher: Searcher, request: Request) -> dict[str, Candidates]:
    """Each retriever's candidate pool, inside the request's filter."""
    lists: dict[str, Candidates] = {}
    if request.use_dense:
        assert request.vector is not None  # given, or embedded by run_query
        t = time.perf_counter()
        lists["dense"] = dense_list(searcher, request.vector, request.pool, request.only)
        request.timings["dense"] = _ms(t)
    if request.use_sparse:
        assert request.text is not None  # sparse needs words: a vector-only query is dense (run_query)
        t = time.perf_counter()
        lists["sparse"] = searcher.sparse_candidates(request.text, request.pool, request.only)
        request.timings["sparse"] = _ms(t)
    return lists


def dense_list(searcher: Searcher, vector: np.ndarray, pool: int, only: PassageFilter | None) -> Candidates:
    """Dense's pool for `vector`, scored with the long-document correction (see LONG_DOCUMENT_PENALTY); the
    graph's own answer, untouched, in a dataset without a long document."""
    if searcher.longest_document() <= LONG_DOCUMENT_PASSAGES:
        return searcher.dense_candidates(vector, pool, only)
    found = searcher.dense_candidates(vector, LONG_DOCUMENT_DEPTH * pool, only)
    if not len(found):
        return found
    counts = np.maximum(np.asarray(searcher.chunk_counts(found.keys), dtype=np.float64), LONG_DOCUMENT_PASSAGES)
    scores = found.scores - LONG_DOCUMENT_PENALTY * (np.sqrt(2.0 * np.log(counts)) - _SHORT_DOCUMENT_DRAWS)
    best = np.argsort(-scores, kind="stable")[:pool]
    return Candidates.of([found.keys[i] for i in best.tolist()], scores[best])


def fused_lists(searcher: Searcher, lists: dict[str, Candidates], rrf_k: int) -> Fusion:
    """The lists numbered once, hybrid's lead vote added (see LEAD_RATIO), fused by RRF."""
    keys, refs, columns = _candidate_set(searcher, lists)
    ref_order = _ref_order(refs)
    if len(lists) > 1:
        _add_lead(columns, ref_order)
    return Fusion(lists, keys, refs, columns, ref_order, fuse(columns, ref_order, rrf_k))


def _sparse_notes(searcher: Searcher, request: Request, fusion: Fusion) -> str:
    """The notes on the sparse list: no query word found (returned, "" when some was), terms left out."""
    if not request.use_sparse:
        return ""
    no_words = ""
    sparse = fusion.lists["sparse"]
    if not len(fusion.columns["sparse"][0]):
        # with a filter the words may well be indexed, in passages the filter leaves out (older or retired
        # versions, other documents): saying they are unknown would send the user the wrong way
        only = request.only
        no_words = ("no query word is in the sparse index (only stopwords, punctuation or unknown words)"
                    if only is None and searcher.sparse_passages >= searcher.total_passages else
                    "no query word is in the passages the keyword index holds so far" if only is None else
                    "no passage searched holds a query word (passages outside the --where filter and "
                    "superseded or retired versions are left out; --versions all searches every version)")
        request.notes.append(no_words)
    if sparse.dropped_terms:
        request.notes.append(f"sparse search used the {MAX_QUERY_TERMS} {sparse.kept_terms} of the query's "
                             "indexed terms "
                             f"({sparse.dropped_terms} more were left out)")
    return no_words


def _expanded(searcher: Searcher, request: Request, fusion: Fusion, rrf_k: int) -> tuple[Fusion, list[str]]:
    """The second pass (engine/expansion.py) from the first pass's fused top, fused again the same way."""
    top = fusion.fused.order[:FEEDBACK_PASSAGES].tolist()
    lists, added = _expanded_lists(searcher, request.text, request.vector, fusion.lists,
                                   [fusion.keys[c] for c in top], [float(fusion.fused.score[c]) for c in top],
                                   request.pool, request.only, request.notes)
    return fused_lists(searcher, lists, rrf_k), added


def _expanded_lists(searcher: Searcher, text: str | None, query_vector: np.ndarray | None,
                    lists: Mapping[str, Candidates], top_keys: Sequence[Any], top_scores: Sequence[float],
                    pool: int, only: PassageFilter | None, notes: list[str]) -> tuple[dict[str, Candidates], list[str]]:
    """The second pass's lists (each retriever of the first pass, expanded) and the terms added.

    `top_keys` and `top_scores`: the first pass's best fused passages (the feedback) and their fused scores.
    """
    out, added = dict(lists), list[str]()
    keys = list(top_keys)
    if "sparse" in lists and text is not None:
        if not searcher.expands_sparse:
            notes.append("query expansion: this backend expands the dense list only")
        else:
            rows = searcher.passages(keys)
            out["sparse"], added = searcher.sparse_expanded(
                text, [(rows[k].text, w) for k, w in zip(keys, top_scores)], pool, only)
    if "dense" in lists and query_vector is not None and keys:
        out["dense"] = dense_list(searcher, rocchio(query_vector, searcher.vectors(keys)), pool, only)
    return out, added


def _add_sentence_list(searcher: Searcher, request: Request, fusion: Fusion, rrf_k: int) -> dict[Any, Any]:
    """Hybrid's third list (see SENTENCE_DEPTH): the fused head's passages that both retrievers found,
    ranked by their best sentence; fused again into `fusion`. Returns the rows it read (the hits are mostly
    among them: not read again)."""
    fused, keys = fusion.fused, fusion.keys
    assert request.text is not None  # the caller checks: sentences are scored against the query's words
    agreed = [c for c in fused.order[:SENTENCE_DEPTH].tolist() if all(fused.ranks[n][c] for n in fusion.lists)]
    rows = searcher.passages([keys[c] for c in agreed])
    scores = best_sentence_scores([rows[keys[c]].text for c in agreed], request.text, word_vectors(request.card),
                                  request.sentences)
    fusion.columns[SENTENCE] = (np.asarray(agreed, dtype=np.int64), round_like_python(np.asarray(scores), 6))
    # dense, sparse and lead as ranked above
    fusion.fused = fuse(fusion.columns, fusion.ref_order, rrf_k, reuse=fused)
    return rows


def _diversify(settings: Settings, searcher: Searcher, request: Request, fusion: Fusion,
               retrievers: Pool) -> tuple[np.ndarray, list[int], dict[int, int]]:
    """The relevance each hit reports, the chosen places in the fused order (MMR's picks with rerank), and
    the near-duplicates MMR found (place -> place of the pick it nearly repeats)."""
    fused, lists = fusion.fused, fusion.lists
    # The relevance MMR trades against diversity: the fused score in hybrid
    # mode, the retriever's own score in a single mode.
    single = next(iter(lists)) if len(lists) == 1 else None
    if single:
        raw = fused.raw[single]
        relevance = np.where(raw == 0.0, 0.0, raw)  # a raw -0.0 counts as 0.0
    else:
        relevance = fused.score
    order = fused.order  # candidate numbers, fused order
    k = request.k
    positions = list(range(min(len(order), k)))  # the chosen hits' places in the fused order
    duplicate_of: dict[int, int] = {}   # place in the fused order -> place of the pick it nearly repeats
    if request.rerank and len(order) > 1:
        # MMR reorders the head of the fused list only, so the first picks
        # do not depend on k, and a weak tail candidate cannot jump ahead
        # just for being unlike everything else. Its picks are greedy: the
        # first k of a longer run are these k.
        t = time.perf_counter()
        depth = min(len(order), settings.mmr_depth)
        head = order[:depth]
        vectors = searcher.vectors([fusion.keys[c] for c in head.tolist()])
        picks = mmr([fusion.refs[c] for c in head.tolist()], relevance[head].tolist(), vectors, min(k, depth),
                    settings.mmr_lambda, settings.mmr_duplicate_threshold, retrievers.strengths(head).tolist())
        duplicate_of = {i: d for i, d in zip(picks.order, picks.duplicate_of) if d is not None}
        positions = (picks.order + list(range(depth, len(order))))[:k]
        request.timings["mmr"] = _ms(t)
    return relevance, positions, duplicate_of


def _ref_order(refs: list[str]) -> np.ndarray:
    """Each candidate's place in ascending ref order (the tie-breaker everywhere)."""
    order = np.empty(len(refs), dtype=np.int64)
    order[sorted(range(len(refs)), key=refs.__getitem__)] = np.arange(len(refs))
    return order


def _add_lead(columns: Columns, ref_order: np.ndarray) -> None:
    """Hybrid's lead vote (see LEAD_RATIO): sparse's best candidate as a one-passage list, scored by its BM25
    score over the runner-up's, when that is at least LEAD_RATIO. Ranked as `fuse` ranks (score, then ref)."""
    columns.pop(LEAD, None)
    if "sparse" not in columns:
        return
    numbers, scores = columns["sparse"]
    if len(numbers) < 2:
        return
    ranked = np.lexsort((ref_order[numbers], -scores))[:2]
    first, second = float(scores[ranked[0]]), float(scores[ranked[1]])
    if second > 0 and first >= LEAD_RATIO * second:
        columns[LEAD] = (numbers[ranked[:1]], np.asarray([round(first / second, 6)]))


def _candidate_set(searcher: Searcher, lists: dict[str, Candidates]) -> tuple[list[Any], list[str], Columns]:
    """Every list's passages numbered once: their keys, their refs, and per list (numbers, scores).

    A passage the catalogue no longer holds (no ref) is left out of every list, before ranks are counted.
    """
    numbered, keys = _numbered([found.keys for found in lists.values()])
    members = dict(zip(lists, numbered))
    refs = searcher.refs(keys)
    columns = {name: (np.asarray(members[name], dtype=np.int64), found.scores) for name, found in lists.items()}
    if None in refs:
        known = [c for c, ref in enumerate(refs) if ref is not None]
        renumber = np.full(len(keys), -1, dtype=np.int64)
        renumber[known] = np.arange(len(known))
        keys, refs = [keys[c] for c in known], [refs[c] for c in known]
        for name, (numbers, scores) in list(columns.items()):
            kept = renumber[numbers] >= 0
            columns[name] = (renumber[numbers][kept], scores[kept])
    return keys, refs, columns  # type: ignore[return-value]  # None left out above


def _numbered(lists: list[list[Any]]) -> tuple[list[Any], list[Any]]:
    """Each list's keys as numbers (0, 1, ... in order of first appearance across the lists), and the keys
    by number. Integer keys (seqs) are numbered with numpy: ~200 candidates a query."""
    flat = [key for keys in lists for key in keys]
    if flat and all(type(key) is int for key in flat):
        array = np.asarray(flat, dtype=np.int64)
        unique, first, inverse = np.unique(array, return_index=True, return_inverse=True)
        by_appearance = np.argsort(first, kind="stable")
        number = np.empty(len(unique), dtype=np.int64)
        number[by_appearance] = np.arange(len(unique))
        numbers = number[inverse.reshape(-1)]
        bounds = np.cumsum([0] + [len(keys) for keys in lists])
        return [numbers[a:b] for a, b in zip(bounds[:-1], bounds[1:])], unique[by_appearance].tolist()
    known: dict[Any, int] = {}
    out = [[known.setdefault(key, len(known)) for key in keys] for keys in lists]
    return out, list(known)


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)
