"""The sparse index: BM25 over passage text, kept in kx's own postings segments (engine/embedded/postings.py),
analysed with whoosh's analysis chain (engine/text/analysis.py) and scored by bm25.py. It implements the
sparse-index port (engine/embedded/sparse_port.py).

Derived from the catalogue like the dense index: each catch-up analyses the passages above the watermark
into a new segment file (fsynced), merges trailing segments when enough have gathered
(postings.merge_run), and then records the segments, each file's size and CRC-32 and the new watermark
in the sidecar, replaced atomically: the sidecar is the commit. A crash before it leaves segment files no
sidecar names, removed by the next writer; a damaged or missing file makes the watermark 0, and the next
open rebuilds the index from the catalogue instead of scoring garbage. Segments never change once
written: a reader maps the files its sidecar named, and a merge writes a new file and removes the old ones
only after the sidecar stopped naming them (a reader that still maps one keeps reading it).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..atomic import fsync, read_json, write_json_atomic
from ..errors import precondition
from ..text.analysis import TOKENIZER_VERSION, build_analyzer, matching_spans, name_field_text, term_counter
from .bm25 import NAME_WEIGHT, Bm25Scorer  # noqa: F401  (the index's scorer, importable from here)
from .checksums import file_crc32, matches
from .sparse_claim import FIELDS, INDEX_FOLDER, SIDECAR, claimed_watermark

if TYPE_CHECKING:
    import numpy as np

    from .postings import SegmentArrays
    from .store import Catalogue

# A catch-up over more passages than this (a rebuild, a huge first ingest) writes a segment each time it
# has gathered them, so its memory stays bounded (~40 MB of arrays and the terms' dict a segment).
FLUSH_PASSAGES = 50_000
SUFFIX = ".seg"


class SparseIndex:
    def __init__(self, folder: Path, stopwords: bool, dataset_id: str = "") -> None:
        self.folder = folder / INDEX_FOLDER
        self.sidecar = folder / SIDECAR
        self.stopwords = stopwords
        self.dataset_id = dataset_id  # "" (an old catalogue, a highlighter): not checked
        self._analyzer: Any = None  # whoosh's, built on first use (whoosh loads only when needed)
        self._counter: Callable[[str], dict[str, int]] | None = None

    @property
    def claimed_watermark(self) -> int:
        """The watermark the sidecar claims, its files unchecked (a listing's cheap look: no CRC read)."""
        return claimed_watermark(self.folder.parent, self.stopwords, self.dataset_id)

    def _record(self) -> dict[str, Any] | None:
        """The sidecar when it describes an index of this layout and analysis, its files intact; else None."""
        meta = read_json(self.sidecar)
        if not isinstance(meta, dict) or meta.get("stopwords") != self.stopwords:
            return None
        if meta.get("tokenizer") != TOKENIZER_VERSION or not self.folder.is_dir():
            return None
        if meta.get("fields") != FIELDS:
            return None  # written in another layout (whoosh's, before round 4): rebuilt, never read as this one
        files, segments = meta.get("files"), meta.get("segments")
        if not isinstance(files, dict) or not isinstance(segments, list) or set(segments) != set(files):
            return None
        if not all(isinstance(name, str) and matches(self.folder / name, rec) for name, rec in files.items()):
            return None  # a damaged or missing segment: rebuild, never trust
        if self.dataset_id and meta.get("dataset_id", self.dataset_id) != self.dataset_id:
            return None  # another dataset's index, copied in
        return meta

    @property
    def watermark(self) -> int:
        meta = self._record()
        return int(meta.get("watermark", 0)) if meta is not None else 0

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

    def _open_for_write(self) -> tuple[dict[str, int], int, int]:
        """The segments to extend (in seq order, each with its passage count), the seq they hold up to, and
        the next segment number.
        Files no sidecar names (a crashed or abandoned catch-up's) are removed; without a sidecar this
        index vouches for, the folder is emptied and the index rebuilt from the catalogue."""
        if self.folder.exists() and not self.folder.is_dir():
            raise precondition(f"{self.folder} is a file where kx keeps the sparse index's folder; move that "
                               "file away and the index is rebuilt from the catalogue")
        meta = self._record()
        if meta is None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder.mkdir(parents=True)
            return {}, 0, 1
        named = set(meta["segments"])
        for entry in os.listdir(self.folder):
            if entry not in named:
                (self.folder / entry).unlink(missing_ok=True)
        sizes = meta["passages"] if isinstance(meta.get("passages"), dict) else {}
        return ({name: int(sizes.get(name, 0)) for name in meta["segments"]}, int(meta.get("watermark", 0)),
                int(meta.get("next", 1)))

    def catch_up(self, catalogue: Catalogue, upto: int,
                 on_progress: Callable[[int, int], None] | None = None) -> int:
        """Index the catalogue's passages above the watermark up to `upto`; how many were added.

        `on_progress(done, total)`, if given, is called every few dozen
        passages analysed and as segments are written and merged (total is
        twice the passages: analysing, then writing), so indexing one huge
        document shows progress. It may raise to abandon the catch-up: the
        index and its sidecar stay as they were.
        """
        from .postings import SegmentBuilder

        segments, start, number = self._open_for_write()
        total = catalogue.passages_upto(upto) - catalogue.passages_upto(start) if on_progress else 0
        counts = self._term_counter()
        builder, added = SegmentBuilder(), 0
        for rows in catalogue.iter_passages_after(start, upto):
            names = catalogue.names_by_seq([row[0] for row in rows])
            for seq, text, _vec in rows:
                name = name_field_text(*names.get(seq, (None, None)))
                builder.add(seq, {"body": counts(text), "name": counts(name) if name else {}})
                added += 1
                if on_progress is not None and added % _PROGRESS_PASSAGES == 0:
                    on_progress(added, 2 * total)
            if builder.size >= FLUSH_PASSAGES:
                segments[self._write(builder.build(), number)] = builder.size
                builder, number = SegmentBuilder(), number + 1
        if builder.size:
            segments[self._write(builder.build(), number)] = builder.size
            number += 1
        if on_progress is not None:
            on_progress(total + total // 2, 2 * total)
        segments, number, merged_away = self._merged(segments, number)
        files = {name: list(file_crc32(self.folder / name)) for name in segments}
        fsync(self.folder)
        write_json_atomic(self.sidecar, {"watermark": upto, "stopwords": self.stopwords,
                                         "tokenizer": TOKENIZER_VERSION, "fields": FIELDS,
                                         "segments": list(segments), "passages": segments, "files": files,
                                         "next": number, "dataset_id": self.dataset_id,
                                         "content": catalogue.content_digest(upto)})
        for name in merged_away:  # only now: a reader opening the previous sidecar may still want them
            (self.folder / name).unlink(missing_ok=True)
        if on_progress is not None:
            on_progress(2 * total, 2 * total)
        return added

    def _write(self, segment: SegmentArrays, number: int) -> str:
        from .postings import write_segment

        name = f"{number:08d}{SUFFIX}"
        write_segment(self.folder / name, segment)
        return name

    def _merged(self, segments: dict[str, int], number: int) -> tuple[dict[str, int], int, list[str]]:
        """Merge trailing segments while the policy asks (postings.merge_run): the segments after, the next
        segment number, and the files merged away (removed once the sidecar no longer names them)."""
        from .postings import merge, merge_run, read_segment

        away: list[str] = []
        while (start := merge_run(list(segments.values()))) is not None:
            names = list(segments)
            run = names[start:]
            merged = self._write(merge([read_segment(self.folder / name) for name in run]), number)
            away += run
            segments = {**{name: segments[name] for name in names[:start]},
                        merged: sum(segments[name] for name in run)}
            number += 1
        return segments, number, away

    def _term_counter(self) -> Callable[[str], dict[str, int]]:
        if self._counter is None:
            self._counter = term_counter(self.stopwords)
        return self._counter

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
        return self._term_counter()(text)

    def matching_spans(self, text: str, query: str) -> list[tuple[int, int]]:
        """Character ranges of the words in `text` that match a term of `query` (for highlighting)."""
        wanted = set(self.terms(query))
        if not wanted:
            return []
        if self._analyzer is None:
            self._analyzer = build_analyzer(self.stopwords)
        return matching_spans(self._analyzer, text, wanted)

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
        from .postings import Snapshot, read_segment

        if self.folder.exists() and not self.folder.is_dir():
            raise precondition(f"{self.folder} is a file where kx keeps the sparse index's folder; move that "
                               "file away and the index is rebuilt from the catalogue")
        # A writer's merge removes the segments it merged once its sidecar no longer names them; an open
        # that read the previous sidecar finds a file gone. The next attempt reads the new sidecar.
        for attempt in range(5):
            meta = read_json(self.sidecar)
            names = meta.get("segments") if isinstance(meta, dict) and meta.get("fields") == FIELDS else None
            try:
                segments = [read_segment(self.folder / name) for name in names] if isinstance(names, list) else []
                return Bm25Scorer(Snapshot(segments), k1, b, hidden)
            except FileNotFoundError:
                if attempt == 4:
                    raise
                time.sleep(0.02 * (attempt + 1))
        raise AssertionError("unreachable")


# Progress calls are cheap and the caller reports on a clock (engine/ingest.py, PART_SECONDS), so they come
# often: a fixed count of work between reports would be seconds apart on a loaded machine.
_PROGRESS_PASSAGES = 64      # passages analysed between two progress calls
