"""The keyword index's segments: each passage's terms and counts kept as numpy arrays, one file a segment.

kx wrote whoosh's segments until round 4. Its writer spent ~2.4 ms a passage in Python (analysing through
token objects, pooling and sorting posting tuples, encoding blocks, then re-encoding them at every merge):
bulk ingest ran at 0.17 x a floor of voyager plus bm25s (SCALING.md). A segment here is built with a dict
and a few numpy sorts, merged by concatenating arrays, and read back through one memory map.

A segment holds a run of passages (document numbers 0..n-1 within it, in seq order) and, for each field
(FIELD_NAMES), its sorted terms (UTF-8, one per line: the word pattern never matches a newline), where each
term's postings start (`offsets`), the postings' document numbers (ascending within a term) and term counts,
and each passage's length as whoosh quantised it into one byte. Keeping whoosh's length byte keeps every
BM25 score what it was (engine/embedded/bm25.py; tests/test_bm25_parity.py holds the scores to whoosh's own).

File layout: MAGIC, the header's length (8 bytes, little-endian), a JSON header naming each array's dtype,
length and offset, then the arrays, each 64-byte aligned.
"""

from __future__ import annotations

import json
import mmap
import os
from array import array
from bisect import bisect_left
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

FIELD_NAMES = ("body", "name")
MAGIC = b"KXPOSTINGS1\n"
_ALIGN = 64


@lru_cache(maxsize=1)
def length_table() -> np.ndarray:
    """whoosh's 256 quantised lengths: byte b reads back as table[b] (whoosh.util.numeric)."""
    from whoosh.util.numeric import byte_to_length

    return np.array([byte_to_length(b) for b in range(256)], dtype=np.int64)


def length_bytes(lengths: np.ndarray) -> np.ndarray:
    """Each length as whoosh's one-byte form: the first table entry not below it (255 from 106,374 up)."""
    table = length_table()
    return np.minimum(np.searchsorted(table, lengths, side="left"), 255).astype(np.uint8)


class FieldArrays:
    """One field's postings in one segment: sorted terms, offsets, document numbers and counts."""

    def __init__(self, terms: list[str], offsets: np.ndarray, docs: np.ndarray, tfs: np.ndarray) -> None:
        self.terms, self.offsets, self.docs, self.tfs = terms, offsets, docs, tfs

    def find(self, term: str) -> tuple[int, int] | None:
        """The slice of `docs`/`tfs` holding `term`'s postings; None when no passage here holds it."""
        i = bisect_left(self.terms, term)
        if i == len(self.terms) or self.terms[i] != term:
            return None
        return int(self.offsets[i]), int(self.offsets[i + 1])


class SegmentArrays:
    """A segment's arrays: the passages' seqs, and per field its postings and one length byte a passage."""

    def __init__(self, seqs: np.ndarray, fields: dict[str, FieldArrays], lengths: dict[str, np.ndarray]) -> None:
        self.seqs, self.fields, self.lengths = seqs, fields, lengths

    @property
    def size(self) -> int:
        return len(self.seqs)


class SegmentBuilder:
    """Passages added one at a time (ascending seq), turned into a segment's arrays by `build`."""

    def __init__(self) -> None:
        self.seqs = array("q")
        self._fields = {field: _FieldBuilder() for field in FIELD_NAMES}

    @property
    def size(self) -> int:
        return len(self.seqs)

    def add(self, seq: int, counts: dict[str, dict[str, int]]) -> None:
        """One passage: its seq and, per field, each term and how often it occurs."""
        doc = len(self.seqs)
        self.seqs.append(seq)
        for field, builder in self._fields.items():
            builder.add(doc, counts.get(field) or {})

    def build(self) -> SegmentArrays:
        fields, lengths = {}, {}
        for field, builder in self._fields.items():
            fields[field], lengths[field] = builder.build(len(self.seqs))
        return SegmentArrays(np.frombuffer(self.seqs, dtype=np.int64).copy(), fields, lengths)


class _FieldBuilder:
    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._terms: list[str] = []
        self._tids, self._docs, self._tfs = array("i"), array("I"), array("I")
        self._lengths = array("q")

    def add(self, doc: int, counts: dict[str, int]) -> None:
        ids, terms = self._ids, self._terms
        tids = self._tids
        for term in counts:
            tid = ids.get(term)
            if tid is None:
                tid = ids[term] = len(terms)
                terms.append(term)
            tids.append(tid)
        self._docs.extend([doc] * len(counts))
        self._tfs.extend(counts.values())
        self._lengths.append(sum(counts.values()))

    def build(self, passages: int) -> tuple[FieldArrays, np.ndarray]:
        order = sorted(range(len(self._terms)), key=self._terms.__getitem__)
        rank = np.empty(len(order), dtype=np.int64)
        rank[np.array(order, dtype=np.int64)] = np.arange(len(order))
        tids = rank[np.frombuffer(self._tids, dtype=np.int32)] if order else np.zeros(0, dtype=np.int64)
        # each passage's postings were appended in document order: a stable sort by term keeps them ascending
        by_term = np.argsort(tids, kind="stable")
        docs = np.frombuffer(self._docs, dtype=np.uint32)[by_term]
        tfs = _narrow(np.frombuffer(self._tfs, dtype=np.uint32)[by_term])
        offsets = np.zeros(len(order) + 1, dtype=np.int64)
        np.cumsum(np.bincount(tids, minlength=len(order)), out=offsets[1:])
        lengths = length_bytes(np.frombuffer(self._lengths, dtype=np.int64)) if passages \
            else np.zeros(0, dtype=np.uint8)
        return FieldArrays([self._terms[i] for i in order], offsets, docs, tfs), lengths


def _narrow(tfs: np.ndarray) -> np.ndarray:
    """Counts as uint16 when they fit (every passage of ordinary size), else as they are."""
    return tfs.astype(np.uint16) if not tfs.size or int(tfs.max()) < 1 << 16 else tfs


def merge(segments: Sequence[SegmentArrays]) -> SegmentArrays:
    """One segment holding `segments`' passages in the order given (their seqs ascending across them)."""
    bases = np.cumsum([0] + [s.size for s in segments])
    fields, lengths = {}, {}
    for field in FIELD_NAMES:
        parts = [s.fields[field] for s in segments]
        terms = sorted(set().union(*(p.terms for p in parts)))
        index = {term: i for i, term in enumerate(terms)}
        tids, docs, tfs = [], [], []
        for part, base in zip(parts, bases):
            mapped = np.fromiter((index[t] for t in part.terms), dtype=np.int64, count=len(part.terms))
            tids.append(np.repeat(mapped, np.diff(part.offsets)))
            docs.append(part.docs.astype(np.uint32) + np.uint32(base))
            tfs.append(np.asarray(part.tfs, dtype=np.uint32))
        every = np.concatenate(tids) if tids else np.zeros(0, dtype=np.int64)
        by_term = np.argsort(every, kind="stable")  # segments are in seq order: documents stay ascending
        offsets = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(np.bincount(every, minlength=len(terms)), out=offsets[1:])
        fields[field] = FieldArrays(terms, offsets, np.concatenate(docs)[by_term],
                                    _narrow(np.concatenate(tfs)[by_term]))
        lengths[field] = np.concatenate([s.lengths[field] for s in segments])
    return SegmentArrays(np.concatenate([s.seqs for s in segments]), fields, lengths)


def write_segment(path: Path, segment: SegmentArrays) -> None:
    """Write `segment` to `path` through a temporary file, fsynced, renamed into place."""
    arrays: dict[str, np.ndarray] = {"seqs": segment.seqs}
    for field in FIELD_NAMES:
        part = segment.fields[field]
        arrays[f"{field}.terms"] = np.frombuffer("\n".join(part.terms).encode("utf-8"), dtype=np.uint8)
        arrays[f"{field}.offsets"] = part.offsets
        arrays[f"{field}.docs"] = part.docs
        arrays[f"{field}.tfs"] = part.tfs
        arrays[f"{field}.lengths"] = segment.lengths[field]
    header: dict[str, tuple[str, int, int]] = {}
    position = 0
    for name, values in arrays.items():
        header[name] = (values.dtype.str, int(values.size), position)
        position += -(-values.nbytes // _ALIGN) * _ALIGN
    head = json.dumps({"arrays": header, "terms": {f: len(segment.fields[f].terms) for f in FIELD_NAMES}},
                      sort_keys=True).encode()
    start = -(-(len(MAGIC) + 8 + len(head)) // _ALIGN) * _ALIGN
    temporary = path.with_suffix(".tmp")
    with open(temporary, "wb") as out:
        out.write(MAGIC + len(head).to_bytes(8, "little") + head)
        for name, values in arrays.items():
            out.seek(start + header[name][2])
            out.write(np.ascontiguousarray(values).tobytes())
        out.truncate(start + position)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)


class SegmentFileError(ValueError):
    """A segment file that is not one this version wrote (damaged, truncated, another format)."""


def read_segment(path: Path) -> SegmentArrays:
    """The segment at `path`, its arrays mapped read-only (pages are read as a query touches them)."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < len(MAGIC) + 8:
            raise SegmentFileError(f"{path} is {size} bytes: too short to be a segment")
        view = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    if view[:len(MAGIC)] != MAGIC:
        raise SegmentFileError(f"{path} does not start as a kx postings segment")
    length = int.from_bytes(view[len(MAGIC):len(MAGIC) + 8], "little")
    try:
        header = json.loads(view[len(MAGIC) + 8:len(MAGIC) + 8 + length])["arrays"]
        start = -(-(len(MAGIC) + 8 + length) // _ALIGN) * _ALIGN
        arrays = {name: np.frombuffer(view, dtype=np.dtype(dtype), count=count, offset=start + offset)
                  for name, (dtype, count, offset) in header.items()}
        fields = {}
        for field in FIELD_NAMES:
            blob = arrays[f"{field}.terms"].tobytes().decode("utf-8")
            fields[field] = FieldArrays(blob.split("\n") if blob else [], arrays[f"{field}.offsets"],
                                        arrays[f"{field}.docs"], arrays[f"{field}.tfs"])
        return SegmentArrays(arrays["seqs"], fields, {f: arrays[f"{f}.lengths"] for f in FIELD_NAMES})
    except (ValueError, KeyError, TypeError) as exc:
        raise SegmentFileError(f"{path} is not a readable kx postings segment ({exc})") from exc


def merge_run(sizes: Sequence[int], fanout: int = 8, base: int = 256) -> int | None:
    """Where the trailing run of segments to merge starts, or None: merge when `fanout` or more trailing
    segments are on the newest one's size level (log base `fanout` of size/`base`) or below.

    A passage is rewritten about once a level (log_8 of the index's size over 256: 4 times at a million
    passages), where whoosh's policy merged small segments at nearly every commit; segments stay few
    (at most ~`fanout` a level), so a query's look-ups stay few too.
    """
    def level(size: int) -> int:
        count = 0
        size = max(size, 1) // base
        while size >= fanout:
            size //= fanout
            count += 1
        return count

    if len(sizes) < fanout:
        return None
    newest = level(sizes[-1])
    start = len(sizes)
    while start > 0 and level(sizes[start - 1]) <= newest:
        start -= 1
    return start if len(sizes) - start >= fanout else None


class Snapshot:
    """Segments read as one index: document numbers run through them in order (seq order)."""

    def __init__(self, segments: Sequence[SegmentArrays]) -> None:
        self.segments = list(segments)
        sizes: list[int] = [s.size for s in self.segments]
        self.bases = [int(b) for b in np.cumsum([0] + sizes)[:-1]]
        self.total = sum(sizes)

    def seqs(self) -> np.ndarray:
        """Every document number's passage seq."""
        return np.concatenate([s.seqs for s in self.segments]) if self.segments else np.zeros(0, dtype=np.int64)

    def lengths(self, field: str) -> np.ndarray:
        """Every document's quantised length of `field` (as whoosh's `doc_field_length` gave it)."""
        if not self.segments:
            return np.zeros(0, dtype=np.float64)
        held = np.concatenate([s.lengths[field] for s in self.segments])
        return length_table()[held].astype(np.float64)

    def postings(self, field: str, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(document numbers, term counts) of the passages whose `field` holds `term`; None when none does."""
        ids, tfs = [], []
        for segment, base in zip(self.segments, self.bases):
            part = segment.fields[field]
            found = part.find(term)
            if found is not None:
                ids.append(part.docs[found[0]:found[1]].astype(np.int64) + base)
                tfs.append(part.tfs[found[0]:found[1]].astype(np.float64))
        if not ids:
            return None
        return (ids[0], tfs[0]) if len(ids) == 1 else (np.concatenate(ids), np.concatenate(tfs))


