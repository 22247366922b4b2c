"""The catalogue's passages by seq: what the derived indexes catch up on and what a query's readers look up.

Passages are numbered by `seq`, ascending in commit order and never reused;
the dense and sparse indexes use it as their id and remember the highest seq
they hold, so catching up is reading the passages after it
(`iter_passages_after`). A query maps seqs back to passages, refs and stored
vectors, and turns a `--where` filter into the seqs it lets through.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, AbstractSet, Any, Iterator, Sequence

from ...errors import KxError
from ...lineage import shown_as
from ...records import ocr_confidence
from ...rows import REF_RE, PassageRow, passage_ref
from ...text.inputs import RECORD_MEDIA_TYPE
from ..storage_errors import damaged_catalogue
from .schema import PASSAGE_COLUMNS, CatalogueFile

if TYPE_CHECKING:  # numpy is imported where vectors are touched: `kx datasets list` never pays for it
    import numpy as np

    from ...filters import Where

# (catalogue path, dataset id) -> (a committed seq, how many passages have a seq at or below it)
_COUNTED: dict[tuple[str, str], tuple[int, int]] = {}
_RANGE_COUNT = 50_000   # rows counted by their seq range at most; further apart, the index count is cheaper
# (catalogue path, dataset id) -> (a committed seq, the content digest up to it): extended, never recomputed
_DIGESTS: dict[tuple[str, str], tuple[int, int]] = {}
# How far from 1 a stored vector's length may be: float32 rounding of a normalised vector stays under 1e-6;
# a flipped bit in a float32 changes its value by at least 2^-23 of it, most far more (an exponent bit: x2)
UNIT_TOLERANCE = 1e-3
# A hit's text is compared with its document's only for documents up to this size: reading a 40 MB page's
# text (and walking it to a character offset) for every hit would cost a query more than it answers
TEXT_CHECK_BYTES = 2**20


def passage_problem(seq: int, ref: object, doc_ref: object, start: object, end: object, text: object) -> str | None:
    """What is wrong with a passage row read back, or None: refs are sha256 hex and the passage's ref is
    the one its document and span give (engine/rows.py passage_ref), its text a string."""
    if not isinstance(doc_ref, str) or not REF_RE.fullmatch(doc_ref):
        return f"passage {seq}'s document ref {str(doc_ref)[:80]!r} is not 64 hex digits"
    if not isinstance(ref, str) or not REF_RE.fullmatch(ref):
        return f"passage {seq}'s ref {str(ref)[:80]!r} is not 64 hex digits"
    if not isinstance(start, int) or not isinstance(end, int) or ref != passage_ref(doc_ref, start, end):
        return f"passage {seq}'s ref {ref[:12]}... is not the one its document and span ({start}-{end}) give"
    if not isinstance(text, str):
        return f"passage {seq}'s text is not text"
    return None


class PassageReads(CatalogueFile):
    """Passages by seq: the highest, how many up to one, batches after one, and lookups of many at once."""

    def data_version(self) -> int:
        """Moves whenever another connection (a writer, in any process) commits to the catalogue."""
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def max_passage_seq(self) -> int:
        return int(self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM passages").fetchone()[0])

    def passages_upto(self, seq: int) -> int:
        """How many passages have a seq at or below `seq`."""
        # `+seq` keeps SQLite off the rowid range, which walks the table's leaf pages (a passage row with
        # its vector fills most of a page): it counts over the ref index instead, ~10 x fewer pages (reopen
        # at 1M passages: seconds -> a fraction)
        #
        # Passages are never deleted and seqs only grow, so the count up to a committed seq never changes:
        # the last one counted per catalogue is remembered, and a later count (a reader reopened after a
        # small commit) adds the few rows between by their seq range instead of counting them all again.
        key = (str(self.path), self.dataset_id)
        known = _COUNTED.get(key) if key[1] and not self._db.in_transaction else None
        if known is not None and 0 <= seq - known[0] <= _RANGE_COUNT:
            count = known[1] + int(self._db.execute("SELECT COUNT(*) FROM passages WHERE seq > ? AND seq <= ?",
                                                    (known[0], seq)).fetchone()[0])
        elif known is not None and 0 < known[0] - seq <= _RANGE_COUNT:
            count = known[1] - int(self._db.execute("SELECT COUNT(*) FROM passages WHERE seq > ? AND seq <= ?",
                                                    (seq, known[0])).fetchone()[0])
        else:
            count = int(self._db.execute("SELECT COUNT(*) FROM passages WHERE +seq <= ?", (seq,)).fetchone()[0])
        if key[1] and not self._db.in_transaction and seq <= self.max_passage_seq() \
                and (known is None or seq >= known[0]):
            if len(_COUNTED) > 256:
                _COUNTED.clear()
            _COUNTED[key] = (seq, count)
        return count

    def content_digest(self, upto: int) -> str:
        """A digest over every passage's (seq, ref) up to `upto`: what an index sidecar binds to, so that an
        index made for another catalogue with the same dataset id (a `cp -r` fork that went its own way, a
        swapped file) is rebuilt instead of answering with the other's passages. Order-free (a sum), so the
        last one computed per catalogue is extended by the new rows only."""
        import hashlib

        key = (str(self.path), self.dataset_id)
        known = _DIGESTS.get(key) if key[1] and not self._db.in_transaction else None
        start, total = known if known is not None and known[0] <= upto else (0, 0)
        for seq, ref in self._db.execute("SELECT seq, ref FROM passages WHERE seq > ? AND seq <= ?", (start, upto)):
            part = hashlib.blake2b(f"{seq}:{ref}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
            total = (total + int.from_bytes(part, "big")) & 0xFFFF_FFFF_FFFF_FFFF
        if key[1] and not self._db.in_transaction and upto <= self.max_passage_seq():
            if len(_DIGESTS) > 256:
                _DIGESTS.clear()
            _DIGESTS[key] = (upto, total)
        return f"{total:016x}"

    def passages_by_seq(self, seqs: Sequence[int]) -> dict[int, PassageRow]:
        """The passages `seqs` (an index's answer), each checked: a seq no row holds, a ref that is not the
        one its document and span give, or a text that is not a string is DATA_LOSS, never a wrong hit."""
        wanted = [int(s) for s in seqs]
        rows = {row[0]: PassageRow(*row) for row in
                self._where_in(self._select("passages", PASSAGE_COLUMNS), "seq", wanted)}
        for seq in wanted:
            row = rows.get(seq)
            if row is None:  # passages are never deleted: an index's seq without its row is a row lost
                raise damaged_catalogue(self.path, f"passage {seq} is in the dataset's indexes but its row is "
                                                   "gone from the catalogue")
            problem = passage_problem(row.seq, row.ref, row.doc_ref, row.char_start, row.char_end, row.text)
            if problem:
                raise damaged_catalogue(self.path, problem)
        if self._columns.get("texts") and wanted:
            # a passage's text is its document's text over its span, so a changed character in either shows:
            # the stored text, else the bytes as UTF-8 (BOM dropped, documents.py text_of_bytes); records excepted
            differs = self._db.execute(
                "SELECT p.seq FROM passages p JOIN documents d ON d.ref = p.doc_ref JOIN blobs b ON b.ref = p.doc_ref "
                "LEFT JOIN texts t ON t.doc_ref = p.doc_ref WHERE p.seq IN (SELECT value FROM json_each(?)) "
                f"AND d.size <= {TEXT_CHECK_BYTES} AND (t.text IS NOT NULL OR d.media_type IS NOT ?) "
                "AND substr(COALESCE(t.text, CAST(CASE WHEN "
                "substr(b.data, 1, 3) = x'efbbbf' THEN substr(b.data, 4) ELSE b.data END AS TEXT)), "
                "p.char_start + 1, p.char_end - p.char_start) IS NOT p.text LIMIT 1",
                (json.dumps(wanted), RECORD_MEDIA_TYPE)).fetchone()
            if differs is not None:
                raise damaged_catalogue(self.path, f"passage {differs[0]}'s text is not its document's text over "
                                                   "its span (a changed character in one of them)")
        return rows

    def names_by_seq(self, seqs: Sequence[int]) -> dict[int, tuple[str, str | None]]:
        """Each passage's document name and title (the sparse index's name field)."""
        return {seq: (name, title) for seq, name, title in self._where_in(
            "SELECT p.seq, d.name, d.title FROM passages p JOIN documents d ON d.ref = p.doc_ref", "p.seq",
            [int(s) for s in seqs])}

    def refs_by_seq(self, seqs: Sequence[int]) -> dict[int, str]:
        """Each seq's passage ref (the ties' tie-breaker); one that is not a sha256's hex is DATA_LOSS."""
        found = dict(self._where_in("SELECT seq, ref FROM passages", "seq", [int(s) for s in seqs]))
        bad = next((seq for seq, ref in found.items() if not isinstance(ref, str) or not REF_RE.fullmatch(ref)),
                   None)
        if bad is not None:
            raise damaged_catalogue(self.path, f"passage {bad}'s ref {str(found[bad])[:80]!r} is not 64 hex digits")
        return found

    def chunk_counts_by_seq(self, seqs: Sequence[int]) -> dict[int, int]:
        """Each seq's document's passage count (dense's long-document correction, engine/ranking.py)."""
        return {int(seq): int(count) for seq, count in
                self._where_in("SELECT seq, chunk_count FROM passages", "seq", [int(s) for s in seqs])}

    def vectors_by_seq(self, seqs: Sequence[int], dimension: int) -> np.ndarray:
        """Stored unit vectors for `seqs`, in that order; a missing, non-finite or not unit-length one is
        DATA_LOSS (a flipped bit scored a passage -1.26e35 and it still ranked)."""
        import numpy as np

        found = dict(self._where_in("SELECT seq, vector FROM passages", "seq", [int(s) for s in seqs]))
        missing = next((int(seq) for seq in seqs if int(seq) not in found), None)
        if missing is not None:
            raise damaged_catalogue(self.path, f"passage {missing} is in the dataset's indexes but its row is gone "
                                               "from the catalogue")
        blobs = [found[int(seq)] for seq in seqs]
        if all(isinstance(blob, bytes) and len(blob) == 4 * dimension for blob in blobs):
            # one buffer for all of them: one frombuffer and one copy, not one of each per passage (MMR reads
            # its 30 vectors on every query)
            out = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(seqs), dimension).copy()
        else:
            out = np.zeros((len(seqs), dimension), dtype=np.float32)
            for i, blob in enumerate(blobs):
                if not isinstance(blob, bytes) or len(blob) not in (0, 4 * dimension):
                    raise self._bad_vector(int(seqs[i]), len(blob) if isinstance(blob, bytes) else -1, dimension)
                if blob:  # a passage still in the backlog stays a zero vector: like nothing, a duplicate of nothing
                    out[i] = np.frombuffer(blob, dtype=np.float32)
        self._check_unit(out, [int(s) for s in seqs], [len(b) > 0 for b in blobs])
        return out

    def _check_unit(self, vectors: np.ndarray, seqs: Sequence[int], stored: Sequence[bool]) -> None:
        """DATA_LOSS naming the first stored vector that is not finite or not of unit length (kx stores unit
        vectors: engine/vectors.py); backlog rows (not `stored`) are zero and pass."""
        import numpy as np

        with np.errstate(all="ignore"):
            norms = np.sqrt(np.einsum("ij,ij->i", vectors.astype(np.float64), vectors.astype(np.float64)))
        bad = ~np.isfinite(norms) | (np.abs(norms - 1.0) > UNIT_TOLERANCE)
        bad &= np.asarray(stored, dtype=bool)
        if bad.any():
            i = int(np.argmax(bad))
            raise damaged_catalogue(self.path, f"passage {seqs[i]}'s stored vector is not a unit vector (length "
                                               f"{norms[i]:.6g}; a flipped bit?)")

    def _bad_vector(self, seq: int, size: int, dimension: int) -> KxError:
        # Only an empty blob is a legitimate state besides a whole vector (the backlog). Any other size was
        # never written by kx; read as "not embedded" it would stay out of the backlog (which picks empty
        # blobs only) and silently never be searched densely again, so it is damage.
        return damaged_catalogue(self.path, f"passage {seq}'s vector is {size} bytes, not the {4 * dimension} "
                                            f"of its {dimension} dimensions")

    def iter_passages_after(self, seq: int, upto: int, batch: int = 2048) -> Iterator[list[tuple[int, str, bytes]]]:
        """(seq, text, vector bytes) for passages in (seq, upto], in batches, ascending; each vector empty (the
        backlog) or of the fingerprint's dimension, else DATA_LOSS (the indexes build from these bytes)."""
        fingerprint = self.fingerprint()
        sizes = (0, 4 * fingerprint.dimension) if fingerprint is not None else None
        last = seq
        while True:
            rows = self._db.execute(
                "SELECT seq, text, vector FROM passages WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
                (last, upto, batch),
            ).fetchall()
            if not rows:
                return
            if sizes is not None:
                bad = next((row for row in rows if not isinstance(row[2], bytes) or len(row[2]) not in sizes), None)
                if bad is not None:
                    raise self._bad_vector(bad[0], len(bad[2]) if isinstance(bad[2], bytes) else -1, sizes[1] // 4)
                self._check_batch(rows, sizes[1] // 4)
            yield rows
            last = rows[-1][0]

    def _check_batch(self, rows: list[tuple[int, str, bytes]], dimension: int) -> None:
        """The indexes build from these rows: their texts are strings and their vectors unit (or empty)."""
        import numpy as np

        bad_text = next((row[0] for row in rows if not isinstance(row[1], str)), None)
        if bad_text is not None:
            raise damaged_catalogue(self.path, f"passage {bad_text}'s text is not text")
        stored = [len(row[2]) > 0 for row in rows]
        if any(stored):
            vectors = np.zeros((len(rows), dimension), dtype=np.float32)
            for i, row in enumerate(rows):
                if row[2]:
                    vectors[i] = np.frombuffer(row[2], dtype=np.float32)
            self._check_unit(vectors, [row[0] for row in rows], stored)

    def seqs_of_documents(self, refs: Sequence[str]) -> np.ndarray:
        """The passage seqs of documents `refs`, sorted."""
        import numpy as np

        seqs = [row[0] for row in self._where_in("SELECT seq FROM passages", "doc_ref", list(refs))]
        return np.array(sorted(seqs), dtype=np.int64)

    def allowed_seqs(self, where: Where, hidden: AbstractSet[str],
                     renamed: dict[str, tuple[str, str | None]] | None = None,
                     after_document: int = 0) -> tuple[np.ndarray, int]:
        """The passage seqs a `--where` filter lets through, leaving out documents `hidden`, sorted; and the
        highest document seq read. `renamed`: documents shown under another name and path
        (LineageState.renamed), matched as shown. `after_document`: only the documents stored after that one
        (seqs grow with each commit: a reader reopened after one asks only for the new documents)."""
        import numpy as np

        moved = renamed or {}
        refs = []
        last = after_document
        for seq, ref, name, path, media, at, extractor in self._db.execute(
                "SELECT seq, ref, name, source_path, media_type, ingested_at, extractor FROM documents "
                "WHERE seq > ?", (after_document,)):
            last = max(last, seq)
            if moved and ref in moved:
                name, path = shown_as(moved, ref, name, path)
            if ref not in hidden and \
                    where.admits_document(name, path, media, at, ref, ocr_confidence(extractor) is not None):
                refs.append(ref)
        select = "SELECT seq FROM passages"
        if where.pages is not None:
            if "page_start" not in self._columns["passages"]:
                return np.zeros(0, dtype=np.int64), last
            first, last = where.pages
            select = (f"SELECT seq FROM passages WHERE page_start IS NOT NULL AND page_start <= {int(last)} "
                      f"AND COALESCE(page_end, page_start) >= {int(first)} AND doc_ref IN")
            seqs = [row[0] for part in _chunks(refs)
                    for row in self._db.execute(f"{select} ({','.join('?' * len(part))})", part)]
        else:
            seqs = [row[0] for row in self._where_in(select, "doc_ref", refs)]
        return np.array(sorted(seqs), dtype=np.int64), last


def _chunks(values: Sequence[Any], size: int = 500) -> Iterator[list[Any]]:
    for start in range(0, len(values), size):
        yield list(values[start:start + size])

