"""Query: dense and sparse candidate pools, Reciprocal Rank Fusion, then MMR.

Every hit says why it is where it is: its rank and raw score in each
retriever's list, its fused score, and how far MMR moved it. Ties break on
ascending passage ref at every step.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, ContextManager, Mapping, Protocol, Sequence

import numpy as np

from .backend import MAX_QUERY_CHARS
from .config import Settings
from .embedding.cards import ModelCard
from .embedding.embedders import no_embedder_error
from .errors import KxError, Status, invalid
from .expansion import FEEDBACK_PASSAGES, rocchio
from .filters import PassageFilter, parse_where
from .fingerprint import Fingerprint, check_compatible, current_fingerprint
from .fusion import fuse, mmr, round_like_python
from .names import validate_name
from .records import Hit, QueryResult, RetrievalMode, VersionView, ocr_confidence
from .retrieval import MAX_QUERY_TERMS, Candidates, Searcher
from .setting_values import served_model
from .text.answer_span import SentenceMemo, best_sentence_scores, with_answer_spans, word_vectors
from .vectors import checked_vectors

if TYPE_CHECKING:
    from .embedding.embedders import Embedder

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


class QueryEngine(Protocol):
    """What a query needs of the engine: settings, model, and the dataset's cached, thread-held readers."""

    settings: Settings

    def model_card(self) -> ModelCard | None: ...

    def embedder(self) -> Embedder | None: ...

    def searcher(self, name: str) -> Searcher: ...

    def reading(self, name: str, opened: Searcher | None = None) -> ContextManager[Searcher]:
        """The dataset's readers, held for this thread; `opened`: the readers this query already checked
        (from `searcher`), used again while they are still the dataset's own."""
        ...

    def load_model_in_background(self, name: str | None = None) -> threading.Thread | None:
        """Start loading the model on a thread; None when it is loaded, none is configured, or dataset `name`
        is known to be missing (its error should come at once)."""
        ...


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
    if text is not None:
        _check_query_text(text)
    query_vector = None if vector is None else checked_vectors([vector], 1, "the query vector")[0]
    if text is None and query_vector is None:
        raise invalid("give query text (or a pre-computed query vector)")
    if text is None and chosen_mode != RetrievalMode.DENSE:
        if chosen_mode == RetrievalMode.SPARSE:
            raise invalid("sparse search needs query text; a vector alone can only search dense")
        notes.append("no query text: searched dense only")
        chosen_mode = RetrievalMode.DENSE

    loading = _load_model_meanwhile(engine, name, chosen_mode, text, query_vector)
    try:
        searcher = engine.searcher(name)
    except BaseException:
        if loading is not None:
            loading.join()  # never leave ONNX Runtime half-loaded behind an error
        raise
    fingerprint = searcher.fingerprint
    notes.extend(searcher.notes)
    use_dense, use_sparse = chosen_mode.uses_dense, chosen_mode.uses_sparse
    embedder = None
    card: ModelCard | None = None
    if query_vector is not None:
        if query_vector.shape[0] != fingerprint.dimension:
            raise invalid(
                f"the query vector has {query_vector.shape[0]} dimensions but dataset '{name}' holds "
                f"{fingerprint.dimension}-dimensional vectors ({fingerprint.embed_model})"
            )
        _check_query_fingerprint(engine, name, fingerprint, None)
        if text is not None:
            card = _sentence_scorer_card(engine, fingerprint)
    elif use_dense:
        try:
            card = engine.model_card()
            if card is None:
                raise no_embedder_error(f"{chosen_mode} search")
            _check_query_fingerprint(engine, name, fingerprint, card)
            embedder = engine.embedder()
        except KxError as exc:
            card, use_dense = None, _keep_dense_after(exc, use_sparse, notes)
            _check_query_fingerprint(engine, name, fingerprint, None)
    else:
        try:  # a served model is not asked (its probe): sparse search sends nothing off the machine
            card = None if served_model(engine.settings.embed_model) else engine.model_card()
        except KxError:
            card = None  # sparse search does not need the model
        _check_query_fingerprint(engine, name, fingerprint, card)

    pool = max(engine.settings.candidate_pool, k_used)
    if use_dense and query_vector is None:
        # outside the searcher's lock: embedding is the slow part, and
        # concurrent queries may embed side by side
        assert embedder is not None and text is not None  # dense without a vector: the model was loaded above
        t = time.perf_counter()
        try:
            query_vector = embedder.encode([text])[0]
        except KxError as exc:  # a served model that stopped answering since its card was made
            use_dense = _keep_dense_after(exc, use_sparse, notes)
        timings["embed"] = _ms(t)
    sentences: SentenceMemo = {}   # this query's sentence scores (the sentence list's, then the answer spans')
    with engine.reading(name, searcher) as searcher:
        if use_dense and not use_sparse and searcher.dense_problem:
            raise KxError(Status.FAILED_PRECONDITION, searcher.dense_problem)
        coverage = _dense_coverage(name, searcher, use_dense, notes)
        _sparse_coverage(name, searcher, use_sparse, notes)
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
                                       k_used, rerank, notes, timings, only, card, expand, sentences)
    t = time.perf_counter()
    hits = with_answer_spans(hits, text, card, sentences)
    timings["answer_span"] = _ms(t)
    timings["total"] = _ms(started)
    return QueryResult(name, text, chosen_mode, rerank, k_used, requested, hits, notes, timings, coverage,
                       expanded_terms)


def _keep_dense_after(error: KxError, use_sparse: bool, notes: list[str]) -> bool:
    """A hybrid query whose model is UNAVAILABLE (a served model's server is down) answers from keyword
    search alone, saying so in a note; any other failure, or a dense-only query, is raised (with what to do)."""
    if error.status is not Status.UNAVAILABLE:
        raise error
    if not use_sparse:
        hint = "" if "--mode sparse" in error.message else "; keyword search still answers: --mode sparse"
        raise KxError(Status.UNAVAILABLE, error.message + hint) from None
    notes.append(f"dense search skipped, this answer is keyword (sparse) search alone: {error.message}")
    return False


def _load_model_meanwhile(engine: QueryEngine, name: str, mode: RetrievalMode, text: str | None,
                          vector: np.ndarray | None) -> threading.Thread | None:
    """A cold query's two slow parts side by side: the model (ONNX Runtime, its session, the tokenizer)
    loads on a thread while this one opens the dataset's indexes; the query's own `engine.embedder()` then
    waits for it. None when the model is not needed or already loaded, or the dataset is missing (its
    error comes at once). The thread is not a daemon: an interpreter leaving first (an error, a bad
    fingerprint) waits for it, since ONNX Runtime torn down in the middle of a load aborts the process."""
    if vector is not None or text is None or mode == RetrievalMode.SPARSE:
        return None
    return engine.load_model_in_background(name)


def _dense_coverage(name: str, searcher: Searcher, use_dense: bool, notes: list[str]) -> float:
    """The share of passages dense search sees; a note when a dense-using query saw less than all."""
    total, held = searcher.total_passages, searcher.dense_passages
    if not total or held >= total:
        return 1.0
    if use_dense and not searcher.dense_problem:   # a damaged graph says so in the searcher's own note
        sparse = "all" if searcher.sparse_passages >= total else f"{searcher.sparse_passages:,}"
        notes.append(f"dense covers {held:,} of {total:,} passages; embedding continues (sparse covers {sparse}; "
                     f"`kx datasets embed {name}` finishes it if no ingest is running)")
    return round(held / total, 6)


def _sparse_coverage(name: str, searcher: Searcher, use_sparse: bool, notes: list[str]) -> None:
    """A note when the keyword index holds fewer passages than the catalogue: its commit failed after the
    catalogue's (a full disk) and no writer could catch it up since. The gap is a backlog: the next writer,
    or a query that can write, indexes it from the catalogue."""
    total, held = searcher.total_passages, searcher.sparse_passages
    if use_sparse and total and held < total:
        notes.append(f"sparse covers {held:,} of {total:,} passages: the rest are committed but not yet in the "
                     "keyword index (its last update failed); a later query or `kx datasets embed "
                     f"{name}` indexes them once the dataset's folder can be written")


def _search(settings: Settings, searcher: Searcher, text: str | None, query_vector: np.ndarray | None,
            use_dense: bool, use_sparse: bool, pool: int, k_used: int, rerank: bool, notes: list[str],
            timings: dict[str, float], only: PassageFilter | None = None, card: ModelCard | None = None,
            expand: bool = False, sentences: SentenceMemo | None = None) -> tuple[list[Hit], list[str] | None]:
    """Candidate pools, fusion, MMR and the hits, under the searcher's lock.

    Passages travel as candidate numbers and arrays (engine/fusion.py `fuse`):
    refs are read once per passage per reader (the ties' tie-breaker), and
    Hit records are made for the k passages returned only.
    """
    lists: dict[str, Candidates] = {}
    if use_dense:
        assert query_vector is not None  # given, or embedded by run_query
        t = time.perf_counter()
        lists["dense"] = searcher.dense_candidates(query_vector, pool, only)
        timings["dense"] = _ms(t)
    if use_sparse:
        assert text is not None  # sparse needs words: a vector-only query is dense (run_query)
        t = time.perf_counter()
        lists["sparse"] = searcher.sparse_candidates(text, pool, only)
        timings["sparse"] = _ms(t)

    t = time.perf_counter()
    keys, refs, columns = _candidate_set(searcher, lists)
    ref_order = _ref_order(refs)
    if len(lists) > 1:
        _add_lead(columns, ref_order)
    no_words = ""
    if use_sparse:
        sparse = lists["sparse"]
        if not len(columns["sparse"][0]):
            # with a filter the words may well be indexed, in passages the filter leaves out (older or retired
            # versions, other documents): saying they are unknown would send the user the wrong way
            no_words = ("no query word is in the sparse index (only stopwords, punctuation or unknown words)"
                        if only is None and searcher.sparse_passages >= searcher.total_passages else
                        "no query word is in the passages the keyword index holds so far" if only is None else
                        "no passage searched holds a query word (passages outside the --where filter and "
                        "superseded or retired versions are left out; --versions all searches every version)")
            notes.append(no_words)
        if sparse.dropped_terms:
            notes.append(f"sparse search used the {MAX_QUERY_TERMS} {sparse.kept_terms} of the query's "
                         "indexed terms "
                         f"({sparse.dropped_terms} more were left out)")
    fused = fuse(columns, ref_order, settings.rrf_k)
    timings["fusion"] = _ms(t)
    added: list[str] | None = None
    known_rows: dict[Any, Any] = {}
    if expand and len(fused.order):
        t = time.perf_counter()
        top = fused.order[:FEEDBACK_PASSAGES].tolist()
        lists, added = _expanded_lists(searcher, text, query_vector, lists, [keys[c] for c in top],
                                      [float(fused.score[c]) for c in top], pool, only, notes)
        keys, refs, columns = _candidate_set(searcher, lists)
        ref_order = _ref_order(refs)
        if len(lists) > 1:
            _add_lead(columns, ref_order)
        fused = fuse(columns, ref_order, settings.rrf_k)
        timings["expand"] = _ms(t)
        if no_words and "sparse" in columns and len(columns["sparse"][0]):
            # the first pass's sparse list was empty, the expanded one is not: say where its passages came from
            terms = f" ({', '.join(added)})" if added else ""
            notes[notes.index(no_words)] = (f"{no_words}; the sparse list holds the passages the expansion's "
                                           f"added terms{terms} found")
    retrievers = fused  # dense and sparse alone: what MMR's duplicate floor reads (raw scores)
    if len(lists) > 1 and text is not None and len(fused.order):
        # hybrid's third list: the fused head's passages that both retrievers found, ranked by their best
        # sentence (see SENTENCE_DEPTH)
        t = time.perf_counter()
        agreed = [c for c in fused.order[:SENTENCE_DEPTH].tolist() if all(fused.ranks[n][c] for n in lists)]
        rows = searcher.passages([keys[c] for c in agreed])
        scores = best_sentence_scores([rows[keys[c]].text for c in agreed], text, word_vectors(card), sentences)
        known_rows = rows  # the hits are mostly among them: not read again below
        columns[SENTENCE] = (np.asarray(agreed, dtype=np.int64), round_like_python(np.asarray(scores), 6))
        fused = fuse(columns, ref_order, settings.rrf_k, reuse=fused)  # dense, sparse and lead as ranked above
        timings["sentence"] = _ms(t)

    # The relevance MMR trades against diversity: the fused score in hybrid
    # mode, the retriever's own score in a single mode.
    single = next(iter(lists)) if len(lists) == 1 else None
    if single:
        raw = fused.raw[single]
        relevance = np.where(raw == 0.0, 0.0, raw)  # a raw -0.0 counts as 0.0
    else:
        relevance = fused.score
    order = fused.order  # candidate numbers, fused order
    positions = list(range(min(len(order), k_used)))  # the chosen hits' places in the fused order
    duplicate_of: dict[int, int] = {}   # place in the fused order -> place of the pick it nearly repeats
    if rerank and len(order) > 1:
        # MMR reorders the head of the fused list only, so the first picks
        # do not depend on k, and a weak tail candidate cannot jump ahead
        # just for being unlike everything else. Its picks are greedy: the
        # first k of a longer run are these k.
        t = time.perf_counter()
        depth = min(len(order), settings.mmr_depth)
        head = order[:depth]
        vectors = searcher.vectors([keys[c] for c in head.tolist()])
        picks = mmr([refs[c] for c in head.tolist()], relevance[head].tolist(), vectors, min(k_used, depth),
                    settings.mmr_lambda, settings.mmr_duplicate_threshold, retrievers.strengths(head).tolist())
        duplicate_of = {i: d for i, d in zip(picks.order, picks.duplicate_of) if d is not None}
        positions = (picks.order + list(range(depth, len(order))))[:k_used]
        timings["mmr"] = _ms(t)

    chosen = [int(order[p]) for p in positions]
    rows = {key: known_rows[key] for key in (keys[c] for c in chosen) if key in known_rows}
    rows.update(searcher.passages([key for key in (keys[c] for c in chosen) if key not in rows]))
    documents = searcher.documents([rows[keys[c]].doc_ref for c in chosen])
    lineage = searcher.versions(documents)
    ranks = dict(fused.ranks)  # dense, sparse and (hybrid) sentence and lead
    raws = dict(fused.raw)

    def rank_in(name: str, c: int) -> int | None:
        return int(ranks[name][c]) or None if name in ranks else None

    def raw_in(name: str, c: int) -> float | None:
        return float(raws[name][c]) if name in raws and ranks[name][c] else None

    hits = []
    for rank, (position, c) in enumerate(zip(positions, chosen), start=1):
        row = rows[keys[c]]
        document = documents.get(row.doc_ref)
        hits.append(Hit(
            rank=rank,
            score=float(relevance[c]),
            text=row.text,
            passage_ref=refs[c],
            document_ref=row.doc_ref,
            document_name=document.name if document else row.doc_ref[:12],
            chunk_index=row.chunk_index,
            chunk_count=row.chunk_count,
            char_start=row.char_start,
            char_end=row.char_end,
            dense_rank=rank_in("dense", c),
            dense_score=raw_in("dense", c),
            sparse_rank=rank_in("sparse", c),
            sparse_score=raw_in("sparse", c),
            sentence_rank=rank_in(SENTENCE, c),
            sentence_score=raw_in(SENTENCE, c),
            lead_ratio=raw_in(LEAD, c),
            fused_score=float(fused.score[c]),
            fused_rank=position + 1,
            mmr_moved=position + 1 - rank,
            duplicate_of=refs[int(order[duplicate_of[position]])] if position in duplicate_of else None,
            page_start=row.page_start,
            page_end=row.page_end,
            section=row.section,
            document_title=document.title if document else None,
            source_path=document.source_path if document else None,
            version=lineage[row.doc_ref][0] if row.doc_ref in lineage else None,
            superseded_by=lineage[row.doc_ref][1] if row.doc_ref in lineage else None,
            ocr=ocr_confidence(document.extractor if document else None) is not None,
            ocr_confidence=ocr_confidence(document.extractor if document else None),
        ))
    return hits, added


def _check_query_text(text: str) -> None:
    """Refuse query text kx cannot search: too long, or not Unicode text (a lone surrogate: bytes that were
    not UTF-8, as Python decodes a command-line argument, or an unpaired "\\ud800" escape in JSON)."""
    if len(text) > MAX_QUERY_CHARS:
        raise invalid(f"the query is {len(text):,} characters long; kx takes at most {MAX_QUERY_CHARS:,} "
                      "(the model reads only its first ~200 words); ask with its key sentences")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        from .text.inputs import shown_surrogates

        raise invalid(f"the query holds characters that are not valid text "
                      f"({shown_surrogates(text[exc.start:exc.end])} at character "
                      f"{exc.start + 1}: bytes that are not UTF-8, or an unpaired surrogate); check the "
                      "terminal's or the file's encoding and send UTF-8") from None


def _ref_order(refs: list[str]) -> np.ndarray:
    """Each candidate's place in ascending ref order (the tie-breaker everywhere)."""
    order = np.empty(len(refs), dtype=np.int64)
    order[sorted(range(len(refs)), key=refs.__getitem__)] = np.arange(len(refs))
    return order


def _add_lead(columns: dict[str, tuple[np.ndarray, np.ndarray]], ref_order: np.ndarray) -> None:
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


def _candidate_set(searcher: Searcher, lists: dict[str, Candidates]
                   ) -> tuple[list[Any], list[str], dict[str, tuple[np.ndarray, np.ndarray]]]:
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


def _check_mode(settings: Settings, mode: str | None) -> RetrievalMode:
    chosen = settings.default_mode if mode is None else mode
    try:
        return RetrievalMode.parse(chosen)
    except ValueError:
        raise invalid(f"mode must be one of {', '.join(RetrievalMode)}, got {chosen!r}") from None


def _sentence_scorer_card(engine: QueryEngine, stored: Fingerprint) -> ModelCard | None:
    """For a query given with its vector: the configured model's card when it is the model the dataset was
    embedded with, so its sentences (the sentence list, the answer spans) are scored with the model's word
    vectors as the same query given as text alone is; else None (word overlap alone). Loads no model."""
    try:
        card = engine.model_card()
    except KxError:
        return None
    if card is None or card.model_id != stored.embed_model or card.dimension != stored.dimension:
        return None
    return card


def _check_query_fingerprint(engine: QueryEngine, name: str, stored: Fingerprint, card: ModelCard | None) -> None:
    current = current_fingerprint(engine.settings, card, stored.dimension)
    recorded = getattr(engine, "recorded_model_setting", None)   # the embedded engine's (dataset_settings.py)
    check_compatible(name, stored, current, ignore_model=card is None, settings=engine.settings,
                     model_setting=recorded(name) if recorded is not None else None)


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)


def _expanded_lists(searcher: Searcher, text: str | None, query_vector: np.ndarray | None,
                   lists: Mapping[str, Candidates], top_keys: Sequence[Any], top_scores: Sequence[float], pool: int,
                   only: PassageFilter | None, notes: list[str]) -> tuple[dict[str, Candidates], list[str]]:
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
        out["dense"] = searcher.dense_candidates(rocchio(query_vector, searcher.vectors(keys)), pool, only)
    return out, added
