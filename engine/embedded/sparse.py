"""The sparse index: whoosh BM25 over passage text (the whoosh implementation of the sparse-index port,
engine/embedded/sparse_port.py; its segments are read by sparse_segments.py and scored by bm25.py).

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
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..atomic import fsync, read_json, write_json_atomic
from ..errors import precondition
from ..text.analysis import TOKENIZER_VERSION, build_analyzer, matching_spans, name_field_text

# the scorer and the segment readers, named here too: the index's whole whoosh side is importable from one place
from .bm25 import NAME_WEIGHT, Bm25Scorer  # noqa: F401
from .checksums import file_crc32, matches
from .sparse_claim import INDEX_FOLDER, SIDECAR, claimed_watermark
from .sparse_segments import (  # noqa: F401
    SegmentTerms,
    _Blocks,
    _read_blocks,
    field_lengths,
    stored_seqs,
)

if TYPE_CHECKING:
    import numpy as np

    from .store import Catalogue

# The index's fields, recorded in the sidecar: an index written with other fields is rebuilt from the
# catalogue (its watermark reads 0), never scored as if it had these. "name" holds each passage's document
# name and title (engine/text/analysis.py name_field_text).
FIELDS = "body+name-1"


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
        # Postings are sorted in memory up to _POOL_MB, in runs spilled to temporary files beyond it
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
        return matching_spans(self._analyzer, text, wanted) if wanted else []

    def exists(self) -> bool:
        return self.folder.exists()

    def signature_files(self) -> list[Path]:
        """The sidecar, then the segment files it records (their names, from its "files" record)."""
        meta = read_json(self.sidecar)
        files = [self.sidecar]
        if isinstance(meta, dict) and isinstance(meta.get("files"), dict):
            files += [self.folder / name for name in sorted(meta["files"])]
        return files

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


# whoosh's in-memory sort run, in its own estimate of MB (~150 bytes a posting). At 16 a stage-one group of a few
# hundred passages and every small-segment merge spilled runs: each posting pickled to a temporary file, read
# back and heap-merged, ~45 % of stage one's time at 100k passages (py-spy, SCALING.md round 4). 128 is
# whoosh's default: a group and most merges sort in memory (a few seconds' silent sort at most); the index
# written is the same (identical answers).
_POOL_MB = 128
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
