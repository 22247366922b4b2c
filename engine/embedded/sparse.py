"""The sparse index: whoosh BM25 over passage text.

Derived from the catalogue like the dense index: documents are keyed by passage
seq, and a sidecar records the highest seq committed. Whoosh's own commit is
atomic (it renames a new table of contents into place); we fsync the new
segment files before recording the watermark, so the sidecar never claims
more than the disk holds. The sidecar also records each file's size and
CRC-32: a damaged or missing segment makes the watermark 0, and the next
open rebuilds the index from the catalogue instead of scoring garbage.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np

from ..atomic import fsync, read_json, write_json_atomic
from ..errors import precondition
from ..text.analysis import TOKENIZER_VERSION, build_analyzer, name_field_text
from .checksums import file_crc32, matches
from .sparse_claim import INDEX_FOLDER, SIDECAR, claimed_watermark

if TYPE_CHECKING:
    from .store import Catalogue

# The index's fields, recorded in the sidecar: an index written with other fields is rebuilt from the
# catalogue (its watermark reads 0), never scored as if it had these. "name" holds each passage's document
# name and title (engine/text/analysis.py name_field_text).
FIELDS = "body+name-1"
# A name-field match counts this share of the same match in the text (BM25 of the name field, its own IDF and
# length normalisation, added to the text's): a question that names its document ("In the Think Python
# glossary, ...", "In Key Standard 4.0, ...") favours that document's passages, without the title repeated
# inside every passage's text, which round 3 measured to cost rank-1 answers. 0.25 and 0.5 measured the same
# on the project's own QA set (tuned there); held out on qa-dev, hybrid success@5 0.800 -> 0.822 (BENCHMARKS.md,
# "Retrieval quality, round 4").
NAME_WEIGHT = 0.5


def _schema(stopwords: bool):
    from whoosh.fields import NUMERIC, TEXT, Schema

    return Schema(
        # sortable: whoosh also keeps seq in a fixed-width column, which a scorer reads whole
        # (stored_seqs) instead of unpickling one document's stored fields per new passage number
        seq=NUMERIC(int, bits=64, signed=False, stored=True, unique=True, sortable=True),
        body=TEXT(analyzer=build_analyzer(stopwords), phrase=False, stored=False),
        name=TEXT(analyzer=build_analyzer(stopwords), phrase=False, stored=False),
    )


class SparseIndex:
    def __init__(self, folder: Path, stopwords: bool, dataset_id: str = "") -> None:
        self.folder = folder / INDEX_FOLDER
        self.sidecar = folder / SIDECAR
        self.stopwords = stopwords
        self.dataset_id = dataset_id  # "" (an old catalogue, a highlighter): not checked
        self._analyzer: Any = None  # whoosh's, built on first use (whoosh loads only when needed)

    @property
    def claimed_watermark(self) -> int:
        """The watermark the sidecar claims, its files unchecked (a listing's cheap look: no CRC read)."""
        return claimed_watermark(self.folder.parent, self.stopwords, self.dataset_id)

    @property
    def watermark(self) -> int:
        meta = read_json(self.sidecar)
        if not isinstance(meta, dict) or meta.get("stopwords") != self.stopwords:
            return 0
        if meta.get("tokenizer") != TOKENIZER_VERSION or not self.folder.exists():
            return 0
        if meta.get("fields", "body") != FIELDS:
            return 0  # written with other fields (before the name field): rebuilt, never read as this layout
        files = meta.get("files")
        if isinstance(files, dict) and not all(matches(self.folder / name, rec) for name, rec in files.items()):
            return 0  # a damaged or missing segment: rebuild, never trust
        if self.dataset_id and meta.get("dataset_id", self.dataset_id) != self.dataset_id:
            return 0  # another dataset's index, copied in
        return int(meta.get("watermark", 0))

    def consistent_with(self, catalogue: Catalogue) -> bool:
        """Whether the sidecar describes this catalogue's passages up to its watermark (its digest over their
        (seq, ref): PassageReads.content_digest); a fork's index, copied over with the same dataset id, is not.
        A sidecar without one (written before it was recorded) or an index trusted for nothing passes."""
        meta = read_json(self.sidecar)
        held = self.watermark
        if held == 0 or not isinstance(meta, dict) or "content" not in meta:
            return True
        return meta["content"] == catalogue.content_digest(held)

    def forget(self) -> None:
        """Drop the sidecar: the index is rebuilt from the catalogue by the next catch-up."""
        self.sidecar.unlink(missing_ok=True)

    def _open_for_write(self, start: int):
        """The index to extend from `start`, and the seq it really holds up to."""
        from whoosh import index

        if start > 0:
            try:
                return index.open_dir(str(self.folder)), start
            except Exception:  # missing or damaged derived index: rebuild from the catalogue
                pass
        if self.folder.exists() and not self.folder.is_dir():
            raise precondition(f"{self.folder} is a file where kx keeps the sparse index's folder; move that "
                               "file away and the index is rebuilt from the catalogue")
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        return index.create_in(str(self.folder), _schema(self.stopwords)), 0

    def catch_up(self, catalogue: Catalogue, upto: int,
                 on_progress: Callable[[int, int], None] | None = None) -> int:
        """Index the catalogue's passages above the watermark in one commit.

        `on_progress(done, total)`, if given, is called every few dozen
        passages added and as whoosh writes the commit's postings (total is
        twice the passages: adding, then committing), so indexing one huge
        document shows progress. It may raise to abandon the commit: the
        index and its sidecar stay as they were.
        """
        from whoosh.query import NumericRange

        ix, start = self._open_for_write(self.watermark)
        # Postings are sorted in runs of this size (spilled to a temporary file beyond it): small runs keep
        # each silent sort short and memory low; the merge of the runs at commit reports progress.
        writer = ix.writer(limitmb=_POOL_MB)
        added = 0
        total = catalogue.passages_upto(upto) - catalogue.passages_upto(start) if on_progress else 0
        if on_progress is not None:
            _count_postings(writer, lambda share: on_progress(total + int(share * total), 2 * total))
        try:
            # A crash after whoosh committed but before the sidecar was written
            # leaves these seqs indexed already; drop them so none is doubled.
            writer.delete_by_query(NumericRange("seq", start + 1, None))
            for rows in catalogue.iter_passages_after(start, upto):
                names = catalogue.names_by_seq([row[0] for row in rows])
                for seq, text, _vec in rows:
                    writer.add_document(seq=seq, body=text, name=name_field_text(*names.get(seq, (None, None))))
                    added += 1
                    if on_progress is not None and added % _PROGRESS_PASSAGES == 0:
                        on_progress(added, 2 * total)
        except BaseException:
            writer.cancel()
            raise
        try:
            writer.commit()
        except BaseException:
            # a commit that failed half-way (a full disk) still holds whoosh's write lock:
            # let go of it, or every later writer in this process waits on it forever
            with contextlib.suppress(Exception):
                writer.cancel()
            with contextlib.suppress(Exception):
                if writer.writelock is not None:
                    writer.writelock.release()
            shutil.rmtree(self.folder / "MAIN.tmp", ignore_errors=True)  # whoosh's sort pool, half-written
            raise
        finally:
            ix.close()
        files = {}
        for name in os.listdir(self.folder):
            fsync(self.folder / name)
            if not name.endswith("WRITELOCK"):  # the lock is the next writer's, not the index's
                files[name] = list(file_crc32(self.folder / name))
        fsync(self.folder)
        write_json_atomic(self.sidecar, {"watermark": upto, "stopwords": self.stopwords,
                                         "tokenizer": TOKENIZER_VERSION, "fields": FIELDS, "files": files,
                                         "dataset_id": self.dataset_id, "content": catalogue.content_digest(upto)})
        return added

    def terms(self, text: str) -> list[str]:
        """The query terms this index would look up for `text`, in order, without repeats."""
        return list(self.term_counts(text))

    def term_counts(self, text: str) -> dict[str, int]:
        """Each query term of `text` and how often it occurs, in order of first occurrence.

        A term the user wrote three times weighs three times (as in Lucene and
        bm25s): long natural-language queries repeat what they are about
        ("retrieval ... retrieval systems ... retrieving"). Counting each term
        once cost 6.9 points of nDCG@10 on CISI's paragraph-long queries
        (0.323 -> 0.392) and nothing on SciFact or Cranfield (BENCHMARKS.md).
        """
        if self._analyzer is None:
            self._analyzer = build_analyzer(self.stopwords)
        counts: dict[str, int] = {}
        for token in self._analyzer(text):
            counts[token.text] = counts.get(token.text, 0) + 1
        return counts

    def matching_spans(self, text: str, query: str) -> list[tuple[int, int]]:
        """Character ranges of the words in `text` that match a term of `query` (for highlighting)."""
        wanted = set(self.terms(query))
        if not wanted:
            return []
        return [(t.startchar, t.endchar) for t in self._analyzer(text, chars=True) if t.text in wanted]

    def open_scorer(self, k1: float, b: float, hidden: np.ndarray | None = None) -> Bm25Scorer:
        """A scorer over the index as it is now; `hidden` passages are left out of its statistics."""
        from whoosh import index

        if self.folder.exists() and not self.folder.is_dir():
            raise precondition(f"{self.folder} is a file where kx keeps the sparse index's folder; move that "
                               "file away and the index is rebuilt from the catalogue")

        # A writer's commit in another thread or process deletes the previous
        # generation's TOC and merged segments; an open that lands in between
        # finds a file gone. The next attempt sees the new generation.
        for attempt in range(5):
            try:
                return Bm25Scorer(index.open_dir(str(self.folder)).reader(), k1, b, hidden)
            except FileNotFoundError:
                if attempt == 4:
                    raise
                time.sleep(0.02 * (attempt + 1))
        raise AssertionError("unreachable")


_POOL_MB = 16                # whoosh's in-memory sort run, in its own (over-)estimate of MB
# Progress calls are cheap and the caller reports on a clock (engine/ingest.py, PART_SECONDS), so they come
# often: a fixed count of work between reports would be seconds apart on a loaded machine.
_PROGRESS_PASSAGES = 64      # passages added between two progress calls
_PROGRESS_POSTINGS = 2_000   # postings written between two progress calls during a commit


def _count_postings(writer: Any, on_share: Callable[[float], None]) -> None:
    """Call `on_share(fraction)` as whoosh's commit writes the postings it pooled (a SegmentWriter's pool).

    whoosh has no progress hook; its commit reads every posting through
    `pool.iter_postings()`, so that iterator is wrapped to count. The total is
    what the pool sorted to disk plus what it still holds. A writer without
    such a pool (another whoosh writer class) is left alone: no progress, same
    index.
    """
    pool = getattr(writer, "pool", None)
    if pool is None or not callable(getattr(pool, "iter_postings", None)) or not hasattr(pool, "save"):
        return
    saved = [0]
    save, iter_postings = pool.save, pool.iter_postings

    def counting_save() -> None:
        saved[0] += len(pool.current)
        save()

    def counted() -> Iterator[Any]:
        total = max(saved[0] + len(pool.current), 1)
        for number, posting in enumerate(iter_postings(), start=1):
            if number % _PROGRESS_POSTINGS == 0:
                on_share(min(number / total, 1.0))
            yield posting

    pool.save, pool.iter_postings = counting_save, counted


class Bm25Scorer:
    """BM25 over whoosh's postings, scored with numpy instead of whoosh's matcher tree.

    whoosh stores the index and its postings; walking its pure-Python
    matchers cost 25-85 ms a query on 12k passages, while reading the few
    postings lists a query needs and scoring them as arrays costs a few ms.
    Scores are BM25 with the Robertson/Lucene IDF, ln(1 + (N - n + 0.5) / (n + 0.5)),
    over whoosh's own (quantised) field lengths; tests check parity against
    whoosh's own search with the same statistics.

    The statistics come from the passages that count, never from whoosh's merge state: N is how many
    passages the index holds that are neither deleted (a re-index's leftovers) nor `hidden` (superseded
    or retired documents' passages); a term's document frequency counts its postings among those; the
    average length is the mean of their quantised lengths (whole numbers, so their sum is exact in any
    order). whoosh's own N counts deleted documents until a merge drops them, and its total length is
    the exact lengths' sum for documents added in a segment but the quantised ones' for documents a
    merge copied: the same passages committed in other groups scored differently (issue 38). Counted
    this way, the same current passages give the same scores whatever the commits, kills, resumes or
    file order that put them there.
    """

    _CACHE_TERMS = 4096

    def __init__(self, reader, k1: float, b: float, hidden: np.ndarray | None = None) -> None:
        """`hidden`: sorted passage seqs left out of the statistics (superseded and retired documents')."""
        self._reader = reader
        self.k1, self.b = k1, b
        self.total = reader.doc_count_all()   # document numbers, deleted ones included
        lengths = field_lengths(reader, "body", self.total)
        if lengths is None:  # a reader shape field_lengths does not know: whoosh's own per-document walk
            lengths = np.fromiter((reader.doc_field_length(i, "body", 0) or 0 for i in range(self.total)),
                                  dtype=np.float64, count=self.total)
        self._live = None
        if reader.has_deletions():
            self._live = np.fromiter((not reader.is_deleted(i) for i in range(self.total)), dtype=bool,
                                     count=self.total)
        self._seq: dict[int, int] = {}
        # every document number's seq when the index keeps the seq column (every index this version
        # writes); an older index's are read from stored fields as passages are first met
        self._all_seqs: np.ndarray | None = stored_seqs(reader, self.total)
        self._seq_array: np.ndarray | None = self._all_seqs
        # the passages the statistics count: live, and not hidden; None when that is every one
        counted = self._live
        if hidden is not None and hidden.size:
            shown = ~np.isin(self.docnum_seqs(), hidden, assume_unique=False)
            counted = shown if counted is None else counted & shown
        self._counted = counted
        self.counted = self.total if counted is None else int(counted.sum())
        held = float(lengths.sum() if counted is None else lengths[counted].sum())
        self.avgfl = (held / self.counted if self.counted else 0.0) or 1.0
        self._norm = k1 * ((1.0 - b) + b * lengths / self.avgfl)
        # term -> (doc numbers, term frequencies, document frequency); None when no document has it.
        # The reader is a snapshot, so entries stay true until the searcher reopens on a newer index.
        self._postings: dict[str, tuple[np.ndarray, np.ndarray, int] | None] = {}
        self._terms = SegmentTerms.of(reader, "body")
        self._names: _NameField | None = _NameField.of(reader, self.total, k1, b, counted) if NAME_WEIGHT else None

    def close(self) -> None:
        self._reader.close()

    def document_frequency(self, term: str) -> int:
        """How many counted passages (see the class) hold `term`."""
        postings = self._postings_of(term)
        return 0 if postings is None else postings[2]

    def indexed(self, term: str) -> bool:
        """Whether any passage in the index holds `term` (a superseded version's too), in its text or its name."""
        return self._postings_of(term) is not None or (self._names is not None and self._names.holds(term))

    def _postings_of(self, term: str) -> tuple[np.ndarray, np.ndarray, int] | None:
        if term not in self._postings:
            if len(self._postings) >= self._CACHE_TERMS:
                self._postings.pop(next(iter(self._postings)))
            if self._terms is not None:
                found = self._terms.postings(term)
            else:  # a reader shape SegmentTerms does not know: whoosh's own look-ups and iteration
                having = self._reader.doc_frequency("body", term)
                found = (*_iterated(self._reader.postings("body", term)), having) if having else None
            if found is not None:
                ids, tfs, _whooshs = found   # whoosh's frequency counts deleted documents: recounted
                found = (ids, tfs, len(ids) if self._counted is None else int(self._counted[ids].sum()))
            self._postings[term] = found
        return self._postings[term]

    def top_arrays(self, terms: list[str], k: int, counts: Sequence[float] | None = None,
                   mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The k best seqs (int64) and their scores (float64) for the OR of `terms`, best first; ties at
        the cut-off all kept.

        `counts[i]` is how often `terms[i]` occurs in the query (default 1):
        each term's BM25 contribution is multiplied by it. `mask` (over
        document numbers, see `docnum_seqs`) restricts the scored postings.
        """
        scores = np.zeros(self.total, dtype=np.float64)
        matched = np.zeros(self.total, dtype=bool)
        for i, term in enumerate(terms):
            postings = self._postings_of(term)
            if postings is None:
                continue
            ids, tfs, having = postings
            idf = math.log(1.0 + (self.counted - having + 0.5) / (having + 0.5))
            weight = idf * (counts[i] if counts is not None else 1)
            scores[ids] += weight * tfs * (self.k1 + 1.0) / (tfs + self._norm[ids])
            matched[ids] = True
        if self._names is not None:
            self._names.add_scores(terms, counts, scores, matched)
        if self._live is not None:
            matched &= self._live
        if mask is not None:
            matched &= mask
        candidates = np.flatnonzero(matched)
        if candidates.size == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        if candidates.size > k:
            cut = np.partition(scores[candidates], candidates.size - k)[candidates.size - k]
            candidates = candidates[scores[candidates] >= cut]  # keep every tie at the cut-off
        order = candidates[np.argsort(-scores[candidates], kind="stable")]
        return self._seqs_of(order), scores[order]

    def _seqs_of(self, docs: np.ndarray) -> np.ndarray:
        """The passage seqs of document numbers `docs`: stored fields read once per document per scorer,
        kept in an array (-1: not read yet)."""
        if self._seq_array is None:
            self._seq_array = np.full(self.total, -1, dtype=np.int64)
        seqs = self._seq_array[docs]
        unread = seqs < 0
        if unread.any():
            for i in np.flatnonzero(unread).tolist():
                seqs[i] = self._seq_of(int(docs[i]))
            self._seq_array[docs[unread]] = seqs[unread]
        return seqs

    def docnum_seqs(self) -> np.ndarray:
        """Each document number's passage seq (read once per scorer: a filter masks by it)."""
        if self._all_seqs is None:
            self._all_seqs = np.fromiter((self._seq_of(i) for i in range(self.total)), dtype=np.int64,
                                         count=self.total)
        return self._all_seqs

    def _seq_of(self, docnum: int) -> int:
        seq = self._seq.get(docnum)
        if seq is None:
            seq = self._seq[docnum] = int(self._reader.stored_fields(docnum)["seq"])
        return seq


class _NameField:
    """BM25 of the name field (document name and title) with its own IDF and lengths, counted over the same
    passages as the text's statistics (Bm25Scorer), weighted by NAME_WEIGHT and added to the text's score."""

    _CACHE_TERMS = 1024

    def __init__(self, terms: SegmentTerms, lengths: np.ndarray, counted: np.ndarray | None, k1: float,
                 b: float) -> None:
        self._terms, self._counted, self.k1 = terms, counted, k1
        self.counted = len(lengths) if counted is None else int(counted.sum())
        held = float(lengths.sum() if counted is None else lengths[counted].sum())
        self._norm = k1 * ((1.0 - b) + b * lengths / ((held / self.counted if self.counted else 0.0) or 1.0))
        self._postings: dict[str, tuple[np.ndarray, np.ndarray, int] | None] = {}

    @classmethod
    def of(cls, reader, total: int, k1: float, b: float, counted: np.ndarray | None) -> _NameField | None:
        """The reader's name field; None for an index without it or of a shape SegmentTerms cannot read."""
        if "name" not in reader.schema:
            return None
        terms = SegmentTerms.of(reader, "name")
        lengths = field_lengths(reader, "name", total)
        return None if terms is None or lengths is None else cls(terms, lengths, counted, k1, b)

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray, int] | None:
        """(document numbers, name-field frequencies, how many counted passages' names hold it)."""
        if term not in self._postings:
            if len(self._postings) >= self._CACHE_TERMS:
                self._postings.pop(next(iter(self._postings)))
            found = self._terms.postings(term)
            if found is not None:
                ids, tfs, _whooshs = found
                found = (ids, tfs, len(ids) if self._counted is None else int(self._counted[ids].sum()))
            self._postings[term] = found
        return self._postings[term]

    def holds(self, term: str) -> bool:
        return self.postings(term) is not None

    def add_scores(self, terms: list[str], counts: Sequence[float] | None, scores: np.ndarray,
                   matched: np.ndarray) -> None:
        for i, term in enumerate(terms):
            postings = self.postings(term)
            if postings is None:
                continue
            ids, tfs, having = postings
            idf = math.log(1.0 + (self.counted - having + 0.5) / (having + 0.5))
            weight = NAME_WEIGHT * idf * (counts[i] if counts is not None else 1)
            scores[ids] += weight * tfs * (self.k1 + 1.0) / (tfs + self._norm[ids])
            matched[ids] = True


def _segments(reader) -> list[Any] | None:
    """The reader's segment readers (one, or a MultiReader's in document-number order), when every one is
    whoosh's own SegmentReader: the shape the readers below reach into; None for any other."""
    from whoosh.reading import MultiReader, SegmentReader

    parts = list(reader.readers) if isinstance(reader, MultiReader) else [reader]
    return None if any(type(part) is not SegmentReader for part in parts) else parts


def _per_document_segments(reader) -> list[Any] | None:
    """`_segments`, when each keeps its per-document columns in whoosh's W3 format."""
    from whoosh.codec.whoosh3 import W3PerDocReader

    parts = _segments(reader)
    return None if parts is None or any(type(part._perdoc) is not W3PerDocReader for part in parts) else parts


def stored_seqs(reader, total: int) -> np.ndarray | None:
    """Every document number's passage seq, read from each segment's seq column in one go; None when a
    segment has no such column (an index written before it existed) or the reader's shape is not known.

    whoosh writes the column as big-endian unsigned 64-bit values (unsigned integers are their own
    sortable form) and leaves documents past its end at the field's default; a document without a seq
    does not exist in kx's indexes, so a default value there means the column cannot be trusted.
    tests/unit/test_bm25_parity.py checks it against the stored fields.
    """
    from whoosh.columns import NumericColumn

    parts = _per_document_segments(reader)
    if parts is None:
        return None
    field = reader.schema["seq"] if "seq" in reader.schema else None
    column_type = getattr(field, "column_type", None)
    # isinstance for the type checker, `type() is` for a subclass that may store values otherwise
    if not isinstance(column_type, NumericColumn) or type(column_type) is not NumericColumn \
            or column_type._typecode != "Q":
        return None
    pieces = []
    for part in parts:
        count = part.doc_count_all()
        if count == 0:
            continue
        if not part._perdoc.has_column("seq"):
            return None
        column = part._perdoc.column_reader("seq", column_type)
        if column._count < count:
            return None
        raw = bytes(column._dbfile.get(column._basepos, count * 8))
        pieces.append(np.frombuffer(raw, dtype=">u8").astype(np.int64))
    seqs = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
    if len(seqs) != total or (seqs < 0).any():
        return None
    return seqs


def field_lengths(reader, field: str, total: int) -> np.ndarray | None:
    """Every document's (quantised) length of `field`, as whoosh's `doc_field_length` gives it, read a
    segment's stored length column at a time; None for a reader shape not known here.

    whoosh keeps one length byte per document in each segment's column file; asking for them one document
    at a time is a Python call each (seconds at a million passages, on every reopen). This reads each
    segment's bytes in one go and maps them through whoosh's own byte-to-length table (a zero byte, a
    document without the field, counts 0). tests/unit/test_bm25_parity.py checks it against the walk.
    """
    from whoosh.codec.whoosh3 import LENGTHS_COLUMN, _lenfield
    from whoosh.columns import NumericColumn
    from whoosh.util.numeric import byte_to_length

    parts = _per_document_segments(reader)
    if parts is None:
        return None
    table = np.array([byte_to_length(b) for b in range(256)], dtype=np.float64)
    table[0] = 0.0
    pieces = []
    for part in parts:
        count = part.doc_count_all()
        column = part._perdoc._cached_reader(_lenfield(field), LENGTHS_COLUMN)
        if column is None:
            pieces.append(np.zeros(count, dtype=np.float64))
            continue
        if type(column) is not NumericColumn.Reader or column._typecode != "B":
            return None
        stored = min(column._count, count)  # documents past the column's end have the default, 0
        raw = np.zeros(count, dtype=np.uint8)
        if stored:
            raw[:stored] = np.frombuffer(bytes(column._dbfile.get(column._basepos, stored)), dtype=np.uint8)
        pieces.append(table[raw])
    lengths = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float64)
    return lengths if len(lengths) == total else None


class SegmentTerms:
    """A term's postings read straight from each whoosh segment's term table and postings file: one look-up
    per segment, blocks decoded as arrays.

    whoosh's own path looks a term up three times in every segment (its document frequency, `term in
    segment`, the matcher) and decodes each block's ids in a Python generator; a query's first sight of
    its words spent most of its sparse time there (BENCHMARKS.md, round 3 session 7). This reaches into
    whoosh's W3 codec, so it is used only for the reader shapes checked in `of`; anything else gets None
    and the scorer asks whoosh. Deleted documents stay in the postings, as whoosh keeps them there (and
    counts them in a term's document frequency): Bm25Scorer masks them. tests/unit/test_bm25_parity.py
    holds every term of several indexes to whoosh's own postings and frequencies.
    """

    def __init__(self, parts: list[tuple[Any, int]], field: str, format_: Any) -> None:
        self._parts = parts  # (the segment's W3TermsReader, its first document number)
        self._field = field
        self._format = format_

    @classmethod
    def of(cls, reader, field: str) -> SegmentTerms | None:
        from whoosh.codec.whoosh3 import W3TermsReader
        from whoosh.fields import TEXT

        parts = _segments(reader)
        if type(reader.schema[field]) is not TEXT:  # TEXT: a term's bytes are its UTF-8
            return None
        if parts is None or any(type(part._terms) is not W3TermsReader for part in parts):
            return None
        offsets = getattr(reader, "doc_offsets", [0])   # a MultiReader's; one segment starts at 0
        return cls([(part._terms, offset) for part, offset in zip(parts, offsets)], field,
                   reader.schema[field].format)

    def postings(self, text: str) -> tuple[np.ndarray, np.ndarray, int] | None:
        """(document numbers, term frequencies, document frequency) of `text`; None when no document has it."""
        from whoosh.codec.whoosh3 import W3LeafMatcher, W3TermInfo

        term = text.encode("utf-8")
        having = 0
        # Every segment's blocks of id gaps and their weights gathered into lists and made arrays once, for all
        # the segments together: a common word has thousands of blocks of 128, and an array and a running sum
        # per block, or even per segment (SciFact has six), cost more than the numbers.
        postings = _Blocks()
        for terms, offset in self._parts:
            raw = terms._tindex.get(terms._keycoder(self._field, term))
            if raw is None:
                continue
            info = W3TermInfo.from_bytes(raw)
            having += info.doc_frequency()
            if info.is_inlined():  # a rare term's postings live in its term info
                seg_ids, seg_weights, _values = info.inlined_postings()
                postings.add_ids(seg_ids, _block_weights(seg_weights, len(seg_ids)), offset)
            elif not _read_blocks(terms._postfile, info.extent(), postings, offset):
                # not the layout read here: whoosh's own matcher reads it
                leaf = terms._codec.postings_reader(terms._postfile, info, self._format)
                if type(leaf) is not W3LeafMatcher or leaf._byteids:
                    leaf_ids, leaf_weights = _iterated(leaf)
                    postings.add_ids(leaf_ids.tolist(), leaf_weights.tolist(), offset)
                    continue
                while leaf.is_active():
                    if leaf._data is None:
                        leaf._read_data()
                    postings.add_block(leaf._data[0], _block_weights(leaf._data[1], leaf._blocklength), offset)
                    leaf._next_block()
        if having == 0:
            return None
        numbers, weights = postings.arrays()
        return numbers, weights, having


class _Blocks:
    """A term's postings as blocks of document-number gaps (each block's first gap counted from its base, the
    segment's first document number) and their weights, made arrays once."""

    __slots__ = ("gaps", "weights", "starts", "bases")

    def __init__(self) -> None:
        self.gaps: list[int] = []
        self.weights: list[float] = []
        self.starts: list[int] = []   # where each block's gaps start
        self.bases: list[int] = []    # each block's base

    def add_block(self, gaps: Sequence[int], weights: Sequence[float], base: int) -> None:
        self.starts.append(len(self.gaps))
        self.bases.append(base)
        self.gaps.extend(gaps)
        self.weights.extend(weights)

    def add_ids(self, ids: Sequence[int], weights: Sequence[float], base: int) -> None:
        """Document numbers (ascending, within the segment) as one block."""
        self.add_block([b - a for a, b in zip([0, *ids], ids)], weights, base)

    def mark(self) -> tuple[int, int]:
        return len(self.gaps), len(self.starts)

    def undo(self, mark: tuple[int, int]) -> None:
        """Drop what was added since `mark`."""
        del self.gaps[mark[0]:], self.weights[mark[0]:], self.starts[mark[1]:], self.bases[mark[1]:]

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(document numbers, weights): one running sum over every block's gaps, each block then moved by its
        base less the sum it started on."""
        numbers = np.cumsum(np.array(self.gaps, dtype=np.int64))
        if len(self.starts) > 1 or any(self.bases):
            shift = np.asarray(self.bases, dtype=np.int64)
            shift[1:] -= numbers[np.asarray(self.starts[1:], dtype=np.int64) - 1]
            numbers += np.repeat(shift, np.diff(np.append(self.starts, len(self.gaps))))
        return numbers, np.array(self.weights, dtype=np.float64)


def _read_blocks(postfile: Any, extent: tuple[Any, Any], into: _Blocks, base: int) -> bool:
    """A term's postings in whoosh's W3 block layout, read in one piece and parsed here, added to `into`;
    False (nothing added) for anything else: then whoosh's matcher reads them.

    The layout (whoosh.codec.whoosh3 W3PostingsWriter): a 4-byte tag, then blocks of a big-endian int32 byte
    count (negative for the last block), a pickled info tuple (postings, last id, top weight, compression,
    two length bytes) and the data tuple (id gaps, weights, values), pickled and zlib-compressed when the
    info says so. Whoosh's matcher seeks and reads three times a block and keeps a Python object per term
    and segment.
    """
    import io
    import pickle
    import zlib

    offset, length = extent
    if isinstance(length, tuple) and len(length) == 1:
        length = length[0]  # whoosh's term info keeps the length as struct.unpack's 1-tuple
    if type(offset) is not int or type(length) is not int or length < 8:
        return False
    mark = into.mark()
    try:
        raw = postfile.get(offset, length)
        if len(raw) != length or raw[:4] != b"W3Bl":
            return False
        stream = io.BytesIO(raw)
        at = 4
        while True:
            size = int.from_bytes(raw[at:at + 4], "big", signed=True)
            end = at + 4 + abs(size)
            if size == 0 or end > length:
                break
            stream.seek(at + 4)
            count, _last, _top, compression, _shortest, _longest = pickle.load(stream)
            data = raw[stream.tell():end]
            block = pickle.loads(zlib.decompress(data) if compression else data)
            into.add_block(block[0], _block_weights(block[1], count), base)
            if size < 0:
                if end == length:
                    return True
                break
            at = end
    except Exception:  # a damaged or unexpected file: whoosh's own reading says what is wrong
        pass
    into.undo(mark)
    return False


def _iterated(matcher: Any) -> tuple[np.ndarray, np.ndarray]:
    """A matcher's (document numbers, weights) through whoosh's own iteration: the path for shapes not read
    directly."""
    pairs = list(matcher.items_as("weight"))
    return (np.fromiter((i for i, _w in pairs), dtype=np.int64, count=len(pairs)),
            np.fromiter((w for _i, w in pairs), dtype=np.float64, count=len(pairs)))


def _block_weights(stored: Any, count: int) -> Sequence[float]:
    """A block's weights as whoosh gives them: None (every weight 1.0), one float for all (which whoosh
    widens through a float32 array), or one float each."""
    if stored is None:
        return [1.0] * count
    if isinstance(stored, float):
        return [float(np.float32(stored))] * count
    return stored

