"""The embedding backlog in the catalogue (schema 3): passages committed before their vectors, and giving them theirs.

An ingest may commit a document's passages before their vectors exist (stage
one; store.py `commit_documents` with no vectors). Such a passage holds an
empty `vector` blob; together they are the dataset's embedding backlog,
durable state that any later writer works through in seq order
(engine/embedded/backlog.py). `embedded_prefix()` is the highest seq below
which every passage has its vector: what the dense index may hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from .passages import PassageReads
from .schema import rollback

if TYPE_CHECKING:
    import numpy as np

# Each document's passages waiting for vectors. The backlog's seqs come from its partial index (schema.py
# passages_unembedded) first: grouped directly, SQLite walked passages_by_doc and read every passage row (0.4 s
# a listing page at 200k passages, with no backlog at all; SCALING.md, round 4)
BACKLOG_BY_DOCUMENT = ("SELECT doc_ref, COUNT(*) FROM passages WHERE seq IN "
                       "(SELECT seq FROM passages WHERE length(vector) = 0) GROUP BY doc_ref")


class BacklogRows(PassageReads):
    """Which passages wait for vectors, and storing their vectors in one transaction."""

    def backlog(self) -> int:
        """How many committed passages still wait for their vectors."""
        return int(self._db.execute("SELECT COUNT(*) FROM passages WHERE length(vector) = 0").fetchone()[0])

    def embedded_prefix(self) -> int:
        """The highest seq at or below which every passage has its vector: what the dense index may hold."""
        first = self._db.execute("SELECT MIN(seq) FROM passages WHERE length(vector) = 0").fetchone()[0]
        return self.max_passage_seq() if first is None else int(first) - 1

    def unembedded(self, limit: int) -> list[tuple[int, str]]:
        """(seq, text) of the first `limit` passages of the backlog, ascending."""
        return [(int(seq), text) for seq, text in self._db.execute(
            "SELECT seq, text FROM passages WHERE length(vector) = 0 ORDER BY seq LIMIT ?", (limit,))]

    def backlog_by_document(self, refs: Sequence[str]) -> dict[str, int]:
        """For each of `refs` with a backlog, how many of its passages wait for vectors."""
        rows = self._db.execute(BACKLOG_BY_DOCUMENT)
        wanted = set(refs)
        return {ref: int(n) for ref, n in rows if ref in wanted}

    def store_vectors(self, seqs: Sequence[int], vectors: np.ndarray) -> int:
        """Give backlog passages their vectors, in one transaction; returns how many were still waiting.

        A passage that already has a vector keeps it: a second writer can never
        embed a passage twice over the first one's result.
        """
        import numpy as np

        cur = self._db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            cur.executemany("UPDATE passages SET vector = ? WHERE seq = ? AND length(vector) = 0",
                            [(np.ascontiguousarray(vectors[i], dtype=np.float32).tobytes(), int(seq))
                             for i, seq in enumerate(seqs)])
            stored = cur.rowcount
            cur.execute("COMMIT")
        except BaseException:
            rollback(cur)
            raise
        return int(stored)
