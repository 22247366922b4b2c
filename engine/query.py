"""Query: the question checked, the dataset's readers held, the ranking (engine/ranking.py) turned into hits.

Every hit says why it is where it is: its rank and raw score in each
retriever's list, its fused score, and how far MMR moved it. Ties break on
ascending passage ref at every step.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, ContextManager, Protocol, Sequence

import numpy as np

from .backend import MAX_QUERY_CHARS
from .config import ENV, Settings
from .embedding.cards import ModelCard
from .embedding.embedders import no_embedder_error
from .errors import KxError, Status, invalid
from .filters import parse_where
from .fingerprint import Fingerprint, check_compatible, current_fingerprint
from .names import validate_name
from .ranking import LEAD, SENTENCE, Ranking, Request, rank
from .records import Hit, QueryResult, RetrievalMode, VersionView, ocr_confidence
from .retrieval import Searcher
from .setting_values import served_model
from .text.answer_span import SentenceMemo, with_answer_spans
from .vectors import checked_vectors

if TYPE_CHECKING:
    from .embedding.embedders import Embedder

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
    requested, k_used = _checked_k(engine.settings, k, notes)
    query_vector, chosen_mode = _checked_question(text, vector, chosen_mode, notes)

    loading = _load_model_meanwhile(engine, name, chosen_mode, text, query_vector)
    try:
        searcher = engine.searcher(name)
    except BaseException:
        if loading is not None:
            loading.join()  # never leave ONNX Runtime half-loaded behind an error
        raise
    fingerprint = searcher.fingerprint
    notes.extend(searcher.notes)
    use_sparse = chosen_mode.uses_sparse
    card, embedder, use_dense = _query_model(engine, name, fingerprint, chosen_mode, text, query_vector, notes)
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
        coverage = _coverage(name, searcher, use_dense, use_sparse, notes)
        t = time.perf_counter()
        only = searcher.passage_filter(narrowing, view)
        if narrowing:
            timings["filter"] = _ms(t)
        request = Request(text, query_vector, use_dense, use_sparse, pool, k_used, rerank, expand, only, card,
                          notes, timings, sentences)
        hits, expanded_terms = _search(engine.settings, searcher, request)
    t = time.perf_counter()
    hits = with_answer_spans(hits, text, card, sentences)
    timings["answer_span"] = _ms(t)
    timings["total"] = _ms(started)
    return QueryResult(name, text, chosen_mode, rerank, k_used, requested, hits, notes, timings, coverage,
                       expanded_terms)


def _checked_k(settings: Settings, k: int | None, notes: list[str]) -> tuple[int, int]:
    """The k asked for (default the setting) and the k used (at most the operator's maximum, with a note)."""
    requested = settings.default_k if k is None else k
    if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
        raise invalid(f"k must be a whole number of at least 1, got {requested!r}")
    k_used = min(requested, settings.max_k)
    if k_used != requested:
        notes.append(f"k clamped from {requested} to {k_used} (the operator's maximum, {ENV.max_k})")
    return requested, k_used


def _checked_question(text: str | None, vector: Sequence[float] | np.ndarray | None, chosen_mode: RetrievalMode,
                      notes: list[str]) -> tuple[np.ndarray | None, RetrievalMode]:
    """The query text checked, the vector as a checked array, and the mode (dense when there is no text)."""
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
    return query_vector, chosen_mode


def _query_model(engine: QueryEngine, name: str, fingerprint: Fingerprint, chosen_mode: RetrievalMode,
                 text: str | None, query_vector: np.ndarray | None, notes: list[str]
                 ) -> tuple[ModelCard | None, Embedder | None, bool]:
    """The model card (the sentence scorer's word vectors), the embedder when the query text must be
    embedded, and whether dense search still runs; the dataset's fingerprint checked against the model."""
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

    return card, embedder, use_dense


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


def _coverage(name: str, searcher: Searcher, use_dense: bool, use_sparse: bool, notes: list[str]) -> float:
    """The share of passages dense search sees, with a note on each index that holds fewer than all; a
    dense-only query over a damaged or still empty dense index is refused (with what to do)."""
    if use_dense and not use_sparse and searcher.dense_problem:
        raise KxError(Status.FAILED_PRECONDITION, searcher.dense_problem)
    coverage = _dense_coverage(name, searcher, use_dense, notes)
    _sparse_coverage(name, searcher, use_sparse, notes)
    if use_dense and not use_sparse and searcher.total_passages and not searcher.dense_passages:
        raise KxError(Status.FAILED_PRECONDITION,
                      f"dense search covers none of dataset '{name}''s {searcher.total_passages:,} passages yet "
                      "(they are committed, but not embedded); ask with --mode sparse or hybrid meanwhile, "
                      f"and let the ingest finish embedding (or run: kx datasets embed {name})")
    return coverage


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


def _search(settings: Settings, searcher: Searcher, request: Request) -> tuple[list[Hit], list[str] | None]:
    """Candidates -> fuse -> diversify (engine/ranking.py `rank`) -> hits, under the searcher's lock.

    Hit records are made for the k passages returned only.
    """
    ranking = rank(settings, searcher, request)
    return _hits(searcher, ranking), ranking.added


def _hits(searcher: Searcher, ranking: Ranking) -> list[Hit]:
    """The chosen candidates as hits: each with its rank and raw score in every list, its fused score and
    place, how far MMR moved it, and its passage's and document's fields."""
    fusion, positions, relevance = ranking.fusion, ranking.positions, ranking.relevance
    fused, keys, refs, known_rows = fusion.fused, fusion.keys, fusion.refs, ranking.known_rows
    order = fused.order
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
    for place, (position, c) in enumerate(zip(positions, chosen), start=1):
        row = rows[keys[c]]
        document = documents.get(row.doc_ref)
        duplicate_of = ranking.duplicate_of.get(position)
        hits.append(Hit(
            rank=place,
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
            mmr_moved=position + 1 - place,
            duplicate_of=refs[int(order[duplicate_of])] if duplicate_of is not None else None,
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
    return hits


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
