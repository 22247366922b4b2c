"""Query-time reads of one Milvus dataset: the dense and BM25 candidate pools and the rows of the hits.

`MilvusSearcher` has the face engine/query.py uses of `DatasetSearcher`, so
fusion (RRF with per-retriever ranks), MMR, the ref tie-breaks and the hits
are the embedded engine's own code: Milvus only hands over the two pools.
Milvus's own RRFRanker is not used, since it cannot say where each
retriever put a hit.

Scores: dense is the COSINE similarity Milvus returns; BM25 comes back
negated on milvus-lite and positive on a cluster, so the pool keeps Milvus's
order and reports the magnitude (the same number either way). Like the
embedded searcher, scores are rounded to 6 decimals and ties go to the
ascending ref. A candidate whose document row is not there (a crash between
a passage write and its document's commit) is dropped: it is not in the
dataset yet.

Versions and filters: the latest-versions view and `--where` clauses are
decided here with the embedded backend's own `LineageState` and `Where`
over the documents' rows and the lineage events (reread only when the
events collection's count moved: one count query a query), and reach Milvus
as a filter expression inside both searches, so a filtered search still
fills its pool from the matching passages. Hits show a renamed lineage's
documents under its current name (engine/embedded/catalogue/lineage_log.py, renames).
"""

from __future__ import annotations

import re
import sys
import threading
from typing import Any

import numpy as np

from ..embedded.readers import dense_ef, shown_documents
from ..errors import precondition
from ..filters import PassageFilter, Where
from ..fingerprint import Fingerprint
from ..lineage import LineageState
from ..records import ocr_confidence
from ..retrieval import MAX_QUERY_TERMS, Candidates
from ..rows import DocumentRow, PassageRow
from .store import PASSAGE_FIELDS, MilvusCatalogue, passage_row, quoted

_DOC_CACHE_LIMIT = 100_000   # committed document rows kept (they never change: the store is append-only)
_ROW_CACHE_LIMIT = 20_000   # candidate rows kept between a query's pools and its hits
_WORD = re.compile(r"\w+")


class MilvusSearcher:
    """Readers of one dataset on Milvus. Milvus's client is thread-safe: `lock` only marks the protocol."""

    expands_sparse = False  # Milvus scores BM25 on the server: query expansion reaches the dense list only

    def __init__(self, catalogue: MilvusCatalogue, fingerprint: Fingerprint) -> None:
        self.lock = threading.RLock()
        self.closed = False
        self.catalogue = catalogue
        self.fingerprint = fingerprint
        self.notes: list[str] = []
        # Milvus embeds before it commits: dense covers every passage (0 of 0 reads as full coverage)
        self.dense_passages = self.total_passages = self.sparse_passages = 0
        self.dense_problem: str | None = None   # Milvus indexes its rows itself
        self._conn = catalogue.store.conn
        self._rows: dict[str, dict[str, Any]] = {}     # this query's candidates, by ref
        self._docs: dict[str, DocumentRow] = {}
        self._rows_lock = threading.Lock()
        # the lineage picture (document keys, LineageState) and the filters made from it, while `_mark` holds
        self._mark = -1
        self._picture: tuple[list[tuple[float, str, str, str | None, str]], LineageState] | None = None
        self._filters: dict[tuple[Where, str], PassageFilter | None] = {}

    def current(self) -> bool:
        return not self.closed   # Milvus answers from what it holds now: never stale

    def close(self) -> None:
        self.closed = True

    # -- the pools ----------------------------------------------------------------------

    # -- filters: `--where` and the latest-versions view, as Milvus filter expressions -------------

    def passage_filter(self, where: Where, versions: str) -> PassageFilter | None:
        """The documents a query may see, as an expression Milvus applies inside both searches.

        The document-level clauses are decided here over the documents' rows
        (the same `Where.admits_document` as the embedded backend: globs,
        types, days and ref prefixes mean exactly the same), then named to
        Milvus by ref: `doc_ref in [...]` or `doc_ref not in [...]`,
        whichever list is shorter; `pages:` is a clause on the passages' own
        page fields. Recomputed whenever a lineage event was appended.
        """
        self._refresh()
        key = (where, str(versions))
        with self._rows_lock:
            if key in self._filters:
                return self._filters[key]
        keys, state = self._lineage()
        hidden = state.hidden() if versions == "latest" else set()
        found: PassageFilter | None = None
        if where or hidden:
            every = [ref for _t, ref, _n, _p, _m in keys]
            read_by_ocr = self._read_by_ocr(every) if where.ocr is not None else set()
            shown = [ref for at, ref, name, path, media in keys if ref not in hidden
                     and (not where or where.admits_document(*state.shown(ref, name, path), media, at, ref,
                                                             ref in read_by_ocr))]
            clauses = []
            if len(shown) < len(every):
                if len(shown) <= len(every) - len(shown):
                    clauses.append(f"doc_ref in {quoted(shown)}")
                else:
                    kept = set(shown)
                    clauses.append(f"doc_ref not in {quoted([ref for ref in every if ref not in kept])}")
            if where.pages is not None:
                first, last = where.pages
                clauses.append(f"(page_start <= {int(last)} and (page_end >= {int(first)} "
                               f"or (page_end is null and page_start >= {int(first)})))")
            if not shown:
                found = PassageFilter(nothing=True)
            elif clauses:
                found = PassageFilter(expression=" and ".join(clauses))
        with self._rows_lock:
            if len(self._filters) >= 16:
                self._filters.clear()
            self._filters[key] = found
        return found

    def versions(self, documents: dict[str, DocumentRow]) -> dict[str, tuple[int, str | None]]:
        _keys, state = self._lineage()
        return {ref: state.describe(ref, row.name)[:2] for ref, row in documents.items()}

    def _refresh(self) -> None:
        """Forget the lineage picture when an event was appended since it was read (one count query)."""
        mark = self.catalogue.lineage_mark()
        with self._rows_lock:
            if mark != self._mark:
                self._mark, self._picture, self._filters = mark, None, {}

    def _read_by_ocr(self, refs: list[str]) -> set[str]:
        """Which of the documents `refs` were read by OCR (their extractor says so): for `--where ocr:`."""
        return {ref for ref, row in self.catalogue.documents_by_ref(refs).items()
                if ocr_confidence(row.extractor) is not None}

    def _lineage(self) -> tuple[list[tuple[float, str, str, str | None, str]], LineageState]:
        with self._rows_lock:
            picture = self._picture
        if picture is None:
            keys = self.catalogue.document_keys()
            picture = (keys, self.catalogue.lineage_state(keys))
            with self._rows_lock:
                self._picture = picture
        return picture

    @staticmethod
    def _search_filter(only: PassageFilter | None) -> dict[str, Any]:
        return {"filter": only.expression} if only is not None and only.expression else {}

    def dense_candidates(self, vector: np.ndarray, pool: int, only: PassageFilter | None = None) -> Candidates:
        if only is not None and only.nothing:
            return Candidates.empty()
        found = self._conn.call(
            "search", self.catalogue.passages_col, data=[np.asarray(vector, dtype=np.float32).tolist()],
            anns_field="vector", limit=pool, output_fields=PASSAGE_FIELDS,
            search_params={"metric_type": "COSINE", "params": {"ef": dense_ef(pool)}}, **self._search_filter(only))
        return self._candidates(found[0], lambda distance: float(distance))

    def sparse_expanded(self, text: str, feedback: list[tuple[str, float]], pool: int,
                        only: PassageFilter | None = None) -> tuple[Candidates, list[str]]:
        """Not offered (`expands_sparse` is False): Milvus's BM25 function scores the query's own words."""
        raise precondition("query expansion of the BM25 list needs the embedded backend; on Milvus it expands "
                           "the dense list only")

    def sparse_candidates(self, text: str, pool: int, only: PassageFilter | None = None) -> Candidates:
        words = _WORD.findall(text.lower())
        distinct = list(dict.fromkeys(words))
        dropped = 0
        if len(distinct) > MAX_QUERY_TERMS:
            # Milvus analyses the query itself and says nothing about document
            # frequencies up front, so the first terms are kept, not the rarest
            keep = set(distinct[:MAX_QUERY_TERMS])
            dropped = len(distinct) - MAX_QUERY_TERMS
            words = [w for w in words if w in keep]
        if not words or (only is not None and only.nothing):
            return Candidates.empty()
        found = self._conn.call(
            "search", self.catalogue.passages_col, data=[" ".join(words)], anns_field="sparse", limit=pool,
            output_fields=PASSAGE_FIELDS, search_params={"metric_type": "BM25"}, **self._search_filter(only))
        candidates = self._candidates(found[0], lambda distance: abs(float(distance)))
        candidates.dropped_terms = dropped
        candidates.kept_terms = "first"
        return candidates

    def _candidates(self, hits: Any, score_of) -> Candidates:
        rows = [(hit["entity"], score_of(hit["distance"])) for hit in hits]
        committed = self._committed([entity["doc_ref"] for entity, _ in rows])
        kept = [(entity, score) for entity, score in rows if entity["doc_ref"] in committed]
        with self._rows_lock:
            if len(self._rows) > _ROW_CACHE_LIMIT:
                self._rows.clear()
            for entity, _ in kept:
                self._rows[entity["ref"]] = entity
        return Candidates.of([entity["ref"] for entity, _ in kept], [score for _, score in kept])

    def _committed(self, doc_refs: list[str]) -> set[str]:
        missing = [ref for ref in dict.fromkeys(doc_refs) if ref not in self._docs]
        if missing:
            found = self.catalogue.documents_by_ref(missing)
            with self._rows_lock:
                if len(self._docs) > _DOC_CACHE_LIMIT:
                    self._docs.clear()
                self._docs.update(found)
        return {ref for ref in doc_refs if ref in self._docs}

    # -- the hits -------------------------------------------------------------------------

    def refs(self, keys: list[str]) -> list[str | None]:
        return list(keys)  # passages are keyed by their refs here

    def longest_document(self) -> int:
        return sys.maxsize  # not counted here: a long document is assumed (the correction reads each hit's count)

    def chunk_counts(self, keys: list[str]) -> list[int]:
        rows = self.passages(keys)
        return [rows[key].chunk_count if key in rows else 1 for key in keys]

    def passages(self, seqs: list[str]) -> dict[str, PassageRow]:
        with self._rows_lock:
            rows = {ref: self._rows.get(ref) for ref in seqs}
        missing = [ref for ref, row in rows.items() if row is None]
        if missing:
            for row in self.catalogue.store.rows_in(self.catalogue.passages_col, "ref", missing, PASSAGE_FIELDS):
                rows[row["ref"]] = row
        return {ref: passage_row(row, self.catalogue.document_text) for ref, row in rows.items() if row is not None}

    def vectors(self, seqs: list[str]) -> np.ndarray:
        found = {row["ref"]: row["vector"] for row in
                 self.catalogue.store.rows_in(self.catalogue.passages_col, "ref", seqs, ["ref", "vector"])}
        out = np.zeros((len(seqs), self.fingerprint.dimension), dtype=np.float32)
        for i, ref in enumerate(seqs):
            out[i] = np.asarray(found[ref], dtype=np.float32)
        return out

    def documents(self, refs: list[str]) -> dict[str, DocumentRow]:
        self._committed(refs)
        return shown_documents({ref: self._docs[ref] for ref in refs if ref in self._docs}, self._lineage()[1])
