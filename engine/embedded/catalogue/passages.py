"""The catalogue's passages by seq: what the derived indexes catch up on and what a query's readers look up.

Passages are numbered by `seq`, ascending in commit order and never reused;
the dense and sparse indexes use it as their id and remember the highest seq
they hold, so catching up is reading the passages after it
(`iter_passages_after`). A query maps seqs back to passages, refs and stored
vectors, and turns a `--where` filter into the seqs it lets through.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Sequence

from ...errors import KxError
from ...lineage import shown_as
from ...rows import PassageRow
from ..storage_errors import damaged_catalogue
from .schema import PASSAGE_COLUMNS, CatalogueFile

if TYPE_CHECKING:  # numpy is imported where vectors are touched: `kx datasets list` never pays for it
    import numpy as np

    from ...filters import Where

# (catalogue path, dataset id) -> (a committed seq, how many passages have a seq at or below it)
_COUNTED: dict[tuple[str, str], tuple[int, int]] = {}
_RANGE_COUNT = 50_000   # rows counted by their seq range at most; further apart, the index count is cheaper


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

    def passages_by_seq(self, seqs: Sequence[int]) -> dict[int, PassageRow]:
        rows = self._where_in(self._select("passages", PASSAGE_COLUMNS), "seq", [int(s) for s in seqs])
        return {row[0]: PassageRow(*row) for row in rows}

    def refs_by_seq(self, seqs: Sequence[int]) -> dict[int, str]:
        return dict(self._where_in("SELECT seq, ref FROM passages", "seq", [int(s) for s in seqs]))

    def vectors_by_seq(self, seqs: Sequence[int], dimension: int) -> np.ndarray:
        """Stored unit vectors for `seqs`, in that order."""
        import numpy as np

        found = dict(self._where_in("SELECT seq, vector FROM passages", "seq", [int(s) for s in seqs]))
        blobs = [found[int(seq)] for seq in seqs]
        if all(len(blob) == 4 * dimension for blob in blobs):
            # one buffer for all of them: one frombuffer and one copy, not one of each per passage (MMR reads
            # its 30 vectors on every query)
            return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(seqs), dimension).copy()
        out = np.zeros((len(seqs), dimension), dtype=np.float32)
        for i, blob in enumerate(blobs):
            if len(blob) not in (0, 4 * dimension):
                raise self._bad_vector(int(seqs[i]), len(blob), dimension)
            if blob:  # a passage still in the backlog stays a zero vector: like nothing, a duplicate of nothing
                out[i] = np.frombuffer(blob, dtype=np.float32)
        return out

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
                bad = next((row for row in rows if len(row[2]) not in sizes), None)
                if bad is not None:
                    raise self._bad_vector(bad[0], len(bad[2]), sizes[1] // 4)
            yield rows
            last = rows[-1][0]

    def seqs_of_documents(self, refs: Sequence[str]) -> np.ndarray:
        """The passage seqs of documents `refs`, sorted."""
        import numpy as np

        seqs = [row[0] for row in self._where_in("SELECT seq FROM passages", "doc_ref", list(refs))]
        return np.array(sorted(seqs), dtype=np.int64)

    def allowed_seqs(self, where: Where, hidden: set[str],
                     renamed: dict[str, tuple[str, str | None]] | None = None) -> np.ndarray:
        """The passage seqs a `--where` filter lets through, leaving out documents `hidden`; sorted.
        `renamed`: documents shown under another name and path (LineageState.renamed), matched as shown."""
        import numpy as np

        moved = renamed or {}
        refs = [ref for ref, name, path, media, at in self._db.execute(
                    "SELECT ref, name, source_path, media_type, ingested_at FROM documents")
                if ref not in hidden and where.admits_document(*shown_as(moved, ref, name, path), media, at, ref)]
        select = "SELECT seq FROM passages"
        if where.pages is not None:
            if "page_start" not in self._columns["passages"]:
                return np.zeros(0, dtype=np.int64)
            first, last = where.pages
            select = (f"SELECT seq FROM passages WHERE page_start IS NOT NULL AND page_start <= {int(last)} "
                      f"AND COALESCE(page_end, page_start) >= {int(first)} AND doc_ref IN")
            seqs = [row[0] for part in _chunks(refs)
                    for row in self._db.execute(f"{select} ({','.join('?' * len(part))})", part)]
        else:
            seqs = [row[0] for row in self._where_in(select, "doc_ref", refs)]
        return np.array(sorted(seqs), dtype=np.int64)


def _chunks(values: Sequence[Any], size: int = 500) -> Iterator[list[Any]]:
    for start in range(0, len(values), size):
        yield list(values[start:start + size])

