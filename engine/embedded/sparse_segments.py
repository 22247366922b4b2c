"""Reading whoosh's segments directly: each document's seq and field lengths from the per-document columns,
a term's postings from the term table and postings file, decoded as numpy arrays.

The sparse index's storage side (engine/embedded/sparse.py writes it; engine/embedded/bm25.py scores over
what is read here). Everything here reaches into whoosh's W3 codec, so each reader checks the shapes it
knows and answers None for anything else; the caller then asks whoosh itself.
tests/test_bm25_parity.py holds every reader to whoosh's own answers.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


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
    tests/test_bm25_parity.py checks it against the stored fields.
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
    document without the field, counts 0). tests/test_bm25_parity.py checks it against the walk.
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
    counts them in a term's document frequency): Bm25Scorer masks them. tests/test_bm25_parity.py
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
