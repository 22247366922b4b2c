"""The catalogue: one SQLite file per dataset, append-only, content-addressed.

It is the source of truth. A document, its original bytes, its passages and
their vectors are written in ONE transaction (`commit_documents`): that commit
is the durable point, so a crash leaves either the whole document or none of
it. The dense and sparse indexes are derived from the passages table and can
always be rebuilt.

`Catalogue` is that one face (engine/ingest.py's `IngestCatalogue`), joined
from its parts in engine/embedded/catalogue/, each over the same connection:
    schema.py        the file: schema and its history, opening, migrating, meta facts
    documents.py     documents, their bytes and text, a document's passages
    passages.py      passages by seq: what the indexes catch up on, what readers look up
    backlog_rows.py  passages committed before their vectors (the embedding backlog)
    lineage_log.py   which stored version of each source is current, and the events that move it
Here: the writes that span them.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Sequence

from ..fingerprint import Fingerprint
from ..rows import NewDocument
from .catalogue.backlog_rows import BacklogRows
from .catalogue.documents import DocumentReads, text_of_bytes
from .catalogue.lineage_log import LineageLog
from .catalogue.schema import rollback

if TYPE_CHECKING:  # numpy is imported where vectors are touched: `kx datasets list` never pays for it
    import numpy as np


class Catalogue(LineageLog, BacklogRows, DocumentReads):
    """A dataset's SQLite catalogue. Writers must hold the dataset's write lock."""

    def commit_documents(
        self,
        documents: Sequence[NewDocument],
        vectors: np.ndarray | None,
        fingerprint: Fingerprint,
    ) -> None:
        """Write documents, their bytes, passages and vectors in one transaction.

        `vectors` holds one row per passage, in the order the passages appear
        across `documents`; None commits the passages to the embedding backlog
        (empty vectors, embedded later by engine/embedded/backlog.py). The fingerprint
        is stamped with the first commit.
        """
        import numpy as np

        now = time.time()
        row = 0
        cur = self._db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            if self._meta("fingerprint") is None:
                cur.execute(
                    "INSERT INTO meta VALUES ('fingerprint', ?)", (json.dumps(fingerprint.to_dict(), sort_keys=True),)
                )
            for doc in documents:
                cur.execute("INSERT OR IGNORE INTO blobs VALUES (?, ?)", (doc.ref, doc.data))
                cur.execute(
                    "INSERT INTO documents (ref, name, source_path, size, media_type, ingested_at, text_length, "
                    "passage_count, title, page_count, extractor, notes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (doc.ref, doc.name, doc.source_path, len(doc.data), doc.media_type, now, doc.text_length,
                     len(doc.passages), doc.title, doc.page_count, doc.extractor,
                     json.dumps(list(doc.notes)) if doc.notes else None),
                )
                if doc.text is not None and doc.text != text_of_bytes(doc.data, doc.media_type):
                    cur.execute("INSERT INTO texts VALUES (?, ?)", (doc.ref, doc.text))
                cur.executemany(
                    "INSERT INTO passages (ref, doc_ref, chunk_index, chunk_count, char_start, char_end, text, vector, "
                    "page_start, page_end, section) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (p.ref, doc.ref, p.chunk_index, p.chunk_count, p.char_start, p.char_end, p.text,
                         b"" if vectors is None else np.ascontiguousarray(vectors[row + i], dtype=np.float32).tobytes(),
                         p.page_start, p.page_end, p.section)
                        for i, p in enumerate(doc.passages)
                    ],
                )
                row += len(doc.passages)
                if "lineage_events" in self._tables:
                    cur.execute("INSERT INTO lineage_events (lineage, doc_ref, at) VALUES (?, ?, ?)",
                                (doc.name, doc.ref, now))
            cur.execute("COMMIT")
        except BaseException:
            rollback(cur)
            raise

    def restore_ingested_at(self, times: dict[str, float]) -> int:
        """Give documents (by ref) the time they were first ingested elsewhere (a rebuild keeps its source's
        dates, so `after:`/`before:` filters mean the same on both); how many rows changed."""
        if not times:
            return 0
        cur = self._db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            cur.executemany("UPDATE documents SET ingested_at = ? WHERE ref = ? AND ingested_at != ?",
                            [(at, ref, at) for ref, at in times.items()])
            changed = cur.rowcount
            cur.execute("COMMIT")
        except BaseException:
            rollback(cur)
            raise
        return max(changed, 0)
