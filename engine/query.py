"""Query: dense and sparse candidate pools, Reciprocal Rank Fusion, then MMR.

Every hit says why it is where it is: its rank and raw score in each
retriever's list, its fused score, and how far MMR moved it. Ties break on
ascending passage ref at every step.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, ContextManager, Protocol, Sequence

import numpy as np

from .answer_span import best_sentence_scores, with_answer_spans, word_vectors
from .config import Settings
from .dataset import validate_name
from .embedders import no_embedder_error
from .errors import KxError, Status, invalid
from .expansion import expanded_lists
from .filters import PassageFilter, parse_where
from .fingerprint import Fingerprint, check_compatible, current_fingerprint
from .fusion import Ranked, mmr, rank_list, rrf, strengths
from .models import ModelCard
from .records import Hit, QueryResult, RetrievalMode, VersionView
from .search import MAX_QUERY_TERMS, Candidates, Searcher
from .vectors import checked_vectors

if TYPE_CHECKING:
    from .embedders import Embedder

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


class QueryEngine(Protocol):
    """What a query needs of the engine: settings, model, and the dataset's cached, thread-held readers."""

    settings: Settings

    def model_card(self) -> ModelCard | None: ...

    def embedder(self) -> Embedder | None: ...

    def searcher(self, name: str) -> Searcher: ...

    def reading(self, name: str) -> ContextManager[Searcher]: ...


def run_query(
    engine: QueryEngine,
    name: str,
    text: str | None = None,
    *,
    vector: Sequence[float] | np.ndarray | None = None,
    k: int | None = None,
    mode: str | None = None,
    rerank: bool | None = None,
    where: Sequence[str] | None = None,
    versions: str | None = None,
    expand: bool | None = None,
) -> QueryResult:
    """The passages of dataset `name` that best answer `text` (or a pre-computed `vector`).

    Dense and sparse candidate pools are fused by Reciprocal Rank Fusion,
    then (with rerank) an MMR pass keeps near-duplicates from crowding the
    top. Ties break on ascending passage ref at every step. `where` clauses
    (engine/filters.py) and `versions` ("latest", the default: each
    lineage's current version only; "all") narrow the passages inside both
    retrievers, before fusion. `expand` (default the query_expansion setting)
    searches again from the first pass's top passages (engine/expansion.py);
    the result lists the terms that were added.
    """
    started = time.perf_counter()
    timings: dict[str, float] = {}
    notes: list[str] = []
    validate_name(name)
    narrowing = parse_where(where)
    try:
        view = VersionView.parse(versions or VersionView.LATEST)
    except ValueError as exc:
        raise invalid(str(exc)) from None
    chosen_mode = _check_mode(engine.settings, mode)
    rerank = engine.settings.rerank if rerank is None else bool(rerank)
    expand = engine.settings.query_expansion if expand is None else bool(expand)
    requested = engine.settings.default_k if k is None else k
    if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
        raise invalid(f"k must be a whole number of at least 1, got {requested!r}")
    k_used = min(requested, engine.settings.max_k)
    if k_used != requested:
        notes.append(f"k clamped from {requested} to {k_used} (the operator's maximum, KX_MAX_K)")
    if text is not None and not isinstance(text, str):
        raise invalid("query text must be a string")
    if text is not None and not text.strip():
        raise invalid("the query is empty; type some words to search for")
    query_vector = None if vector is None else checked_vectors([vector], 1, "the query vector")[0]
    if text is None and query_vector is None:
        raise invalid("give query text (or a pre-computed query vector)")
    if text is None and chosen_mode != "dense":
        if chosen_mode == "sparse":
            raise invalid("sparse search needs query text; a vector alone can only search dense")
        notes.append("no query text: searched dense only")
        chosen_mode = RetrievalMode.DENSE

    searcher = engine.searcher(name)
    fingerprint = searcher.fingerprint
    notes.extend(searcher.notes)
    use_dense, use_sparse = chosen_mode in ("dense", "hybrid"), chosen_mode in ("sparse", "hybrid")
    embedder = None
    card: ModelCard | None = None
    if query_vector is not None:
        if query_vector.shape[0] != fingerprint.dimension:
            raise invalid(
                f"the query vector has {query_vector.shape[0]} dimensions but dataset '{name}' holds "
                f"{fingerprint.dimension}-dimensional vectors ({fingerprint.embed_model})"
            )
        _check_query_fingerprint(engine.settings, name, fingerprint, None)
    elif use_dense:
        card = engine.model_card()
        if card is None:
            raise no_embedder_error(f"{chosen_mode} search")
        _check_query_fingerprint(engine.settings, name, fingerprint, card)
        embedder = engine.embedder()
    else:
        try:
            card = engine.model_card()
        except KxError:
            card = None  # sparse search does not need the model
        _check_query_fingerprint(engine.settings, name, fingerprint, card)

    pool = max(engine.settings.candidate_pool, k_used)
    if use_dense and query_vector is None:
        # outside the searcher's lock: embedding is the slow part, and
        # concurrent queries may embed side by side
        assert embedder is not None and text is not None  # dense without a vector: the model was loaded above
        t = time.perf_counter()
        query_vector = embedder.encode([text])[0]
        timings["embed"] = _ms(t)
    with engine.reading(name) as searcher:
        coverage = _dense_coverage(name, searcher, use_dense, notes)
        if use_dense and not use_sparse and searcher.total_passages and not searcher.dense_passages:
            raise KxError(Status.FAILED_PRECONDITION,
                          f"dense search covers none of dataset '{name}''s {searcher.total_passages:,} passages yet "
                          "(they are committed, but not embedded); ask with --mode sparse or hybrid meanwhile, "
                          f"and let the ingest finish embedding (or run: kx datasets embed {name})")
        t = time.perf_counter()
        only = searcher.passage_filter(narrowing, view)
        if narrowing:
            timings["filter"] = _ms(t)
        hits, expanded_terms = _search(engine.settings, searcher, text, query_vector, use_dense, use_sparse, pool,
                                       k_used, rerank, notes, timings, only, card, expand)
    t = time.perf_counter()
    hits = with_answer_spans(hits, text, card)
    timings["answer_span"] = _ms(t)
    timings["total"] = _ms(started)
    return QueryResult(name, text, chosen_mode, rerank, k_used, requested, hits, notes, timings, coverage,
                       expanded_terms)


def _dense_coverage(name: str, searcher: Searcher, use_dense: bool, notes: list[str]) -> float:
    """The share of passages dense search sees; a note when a dense-using query saw less than all."""
    total, held = searcher.total_passages, searcher.dense_passages
    if not total or held >= total:
        return 1.0
    if use_dense:
        notes.append(f"dense covers {held:,} of {total:,} passages; embedding continues (sparse covers all; "
                     f"`kx datasets embed {name}` finishes it if no ingest is running)")
    return round(held / total, 6)


def _search(settings: Settings, searcher: Searcher, text: str | None, query_vector: np.ndarray | None,
            use_dense: bool, use_sparse: bool, pool: int, k_used: int, rerank: bool, notes: list[str],
            timings: dict[str, float], only: PassageFilter | None = None, card: ModelCard | None = None,
            expand: bool = False) -> tuple[list[Hit], list[str] | None]:
    """Candidate pools, fusion, MMR and the hits, under the searcher's lock."""
    lists = {}
    if use_dense:
        assert query_vector is not None  # given, or embedded by run_query
        t = time.perf_counter()
        dense = searcher.dense_candidates(query_vector, pool, only)
        timings["dense"] = _ms(t)
        lists["dense"] = dense
    if use_sparse:
        assert text is not None  # sparse needs words: a vector-only query is dense (run_query)
        t = time.perf_counter()
        sparse = searcher.sparse_candidates(text, pool, only)
        timings["sparse"] = _ms(t)
        lists["sparse"] = sparse
        if not sparse.hits:
            notes.append("no query word is in the sparse index (only stopwords, punctuation or unknown words)")
        if sparse.dropped_terms:
            notes.append(f"sparse search used the {MAX_QUERY_TERMS} {sparse.kept_terms} of the query's "
                         "indexed terms "
                         f"({sparse.dropped_terms} more were left out)")

    t = time.perf_counter()
    fused = rrf({n: c.hits for n, c in lists.items()}, settings.rrf_k)
    seq_of = {ref: seq for c in lists.values() for ref, seq in c.seq_of.items()}
    timings["fusion"] = _ms(t)
    added: list[str] | None = None
    if expand and fused:
        t = time.perf_counter()
        expanded, added = expanded_lists(searcher, text, query_vector, lists, fused, seq_of, pool, only, notes)
        lists = expanded
        fused = rrf({n: c.hits for n, c in lists.items()}, settings.rrf_k)
        seq_of = {ref: seq for c in lists.values() for ref, seq in c.seq_of.items()}
        timings["expand"] = _ms(t)
    if len(lists) > 1 and text is not None and fused:
        # hybrid's third list: the fused head's passages that both retrievers found, ranked by their best
        # sentence (see SENTENCE_DEPTH)
        t = time.perf_counter()
        head = [f for f in fused[:SENTENCE_DEPTH] if None not in f.ranks.values()]  # found by both retrievers
        rows = searcher.passages([seq_of[f.ref] for f in head])
        scores = best_sentence_scores([rows[seq_of[f.ref]].text for f in head], text, word_vectors(card))
        lists["sentence"] = Candidates(rank_list(Ranked(f.ref, round(v, 6)) for f, v in zip(head, scores)), {})
        fused = rrf({n: c.hits for n, c in lists.items()}, settings.rrf_k)
        timings["sentence"] = _ms(t)

    # The relevance MMR trades against diversity: the fused score in hybrid
    # mode, the retriever's own score in a single mode.
    single = next(iter(lists)) if len(lists) == 1 else None
    # a single retriever's raw score is never None: every fused candidate came from it
    relevance = [float(f.raw[single] or 0.0) if single else f.score for f in fused]
    order = list(range(len(fused)))
    duplicate_of: dict[int, int] = {}   # position in `fused` -> position of the pick it nearly repeats
    if rerank and len(fused) > 1:
        # MMR reorders the head of the fused list only, so the first picks
        # do not depend on k, and a weak tail candidate cannot jump ahead
        # just for being unlike everything else.
        t = time.perf_counter()
        depth = min(len(fused), settings.mmr_depth)
        head = fused[:depth]
        vectors = searcher.vectors([seq_of[f.ref] for f in head])
        retrievers = {n: c.hits for n, c in lists.items() if n != SENTENCE}  # the duplicate floor reads raw scores
        picks = mmr([f.ref for f in head], relevance[:depth], vectors, depth, settings.mmr_lambda,
                    settings.mmr_duplicate_threshold, strengths(head, retrievers))
        duplicate_of = {i: d for i, d in zip(picks.order, picks.duplicate_of) if d is not None}
        order = picks.order + order[depth:]
        timings["mmr"] = _ms(t)
    order = order[:k_used]

    chosen = [fused[i] for i in order]
    rows = searcher.passages([seq_of[f.ref] for f in chosen])
    documents = searcher.documents([rows[seq_of[f.ref]].doc_ref for f in chosen])
    lineage = searcher.versions(documents)
    hits = []
    for rank, (position, f) in enumerate(zip(order, chosen), start=1):
        row = rows[seq_of[f.ref]]
        document = documents.get(row.doc_ref)
        hits.append(Hit(
            rank=rank,
            score=relevance[position],
            text=row.text,
            passage_ref=f.ref,
            document_ref=row.doc_ref,
            document_name=document.name if document else row.doc_ref[:12],
            chunk_index=row.chunk_index,
            chunk_count=row.chunk_count,
            char_start=row.char_start,
            char_end=row.char_end,
            dense_rank=f.ranks.get("dense"),
            dense_score=f.raw.get("dense"),
            sparse_rank=f.ranks.get("sparse"),
            sparse_score=f.raw.get("sparse"),
            sentence_rank=f.ranks.get(SENTENCE),
            sentence_score=f.raw.get(SENTENCE),
            fused_score=f.score,
            fused_rank=position + 1,
            mmr_moved=position + 1 - rank,
            duplicate_of=fused[duplicate_of[position]].ref if position in duplicate_of else None,
            page_start=row.page_start,
            page_end=row.page_end,
            section=row.section,
            document_title=document.title if document else None,
            source_path=document.source_path if document else None,
            version=lineage[row.doc_ref][0] if row.doc_ref in lineage else None,
            superseded_by=lineage[row.doc_ref][1] if row.doc_ref in lineage else None,
        ))
    return hits, added


def _check_mode(settings: Settings, mode: str | None) -> RetrievalMode:
    chosen = settings.default_mode if mode is None else mode
    try:
        return RetrievalMode.parse(chosen)
    except ValueError:
        raise invalid(f"mode must be one of {', '.join(RetrievalMode)}, got {chosen!r}") from None

def _check_query_fingerprint(settings: Settings, name: str, stored: Fingerprint, card: ModelCard | None) -> None:
    current = current_fingerprint(settings, card, stored.dimension)
    check_compatible(name, stored, current, ignore_model=card is None)


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)
