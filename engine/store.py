"""The catalogue: one SQLite file per dataset, append-only, content-addressed.

It is the source of truth. A document, its original bytes, its passages and
their vectors are written in ONE transaction: that commit is the durable point,
so a crash leaves either the whole document or none of it. The dense and
sparse indexes are derived from the passages table and can always be rebuilt.

Passages are numbered by `seq` (ascending in commit order); the derived
indexes use it as their id and remember the highest seq they hold.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from .errors import KxError, Status
from .fingerprint import Fingerprint
from .storage_errors import classify_sqlite

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS blobs (
    ref  TEXT PRIMARY KEY,          -- sha256 of data
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS documents (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    ref           TEXT NOT NULL UNIQUE REFERENCES blobs(ref),
    name          TEXT NOT NULL,
    source_path   TEXT,
    size          INTEGER NOT NULL,
    media_type    TEXT NOT NULL,
    ingested_at   REAL NOT NULL,
    text_length   INTEGER NOT NULL,
    passage_count INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_by_name ON documents(name);
CREATE TABLE IF NOT EXISTS passages (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    ref         TEXT NOT NULL UNIQUE,
    doc_ref     TEXT NOT NULL REFERENCES documents(ref),
    chunk_index INTEGER NOT NULL,
    chunk_count INTEGER NOT NULL,
    char_start  INTEGER NOT NULL,
    char_end    INTEGER NOT NULL,
    text        TEXT NOT NULL,
    vector      BLOB NOT NULL         -- float32, unit length
);
CREATE INDEX IF NOT EXISTS passages_by_doc ON passages(doc_ref, chunk_index);
"""


_DOCUMENT_ROW = ("SELECT ref, name, source_path, size, media_type, ingested_at, text_length, passage_count "
                 "FROM documents")
_PASSAGE_ROW = "SELECT seq, ref, doc_ref, chunk_index, chunk_count, char_start, char_end, text FROM passages"


@dataclass(frozen=True)
class NewPassage:
    ref: str
    chunk_index: int
    chunk_count: int
    char_start: int
    char_end: int
    text: str


@dataclass(frozen=True)
class NewDocument:
    ref: str
    name: str
    source_path: str | None
    media_type: str
    data: bytes
    text_length: int
    passages: Sequence[NewPassage]


@dataclass(frozen=True)
class DocumentRow:
    ref: str
    name: str
    source_path: str | None
    size: int
    media_type: str
    ingested_at: float
    text_length: int
    passage_count: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PassageRow:
    seq: int
    ref: str
    doc_ref: str
    chunk_index: int
    chunk_count: int
    char_start: int
    char_end: int
    text: str

    @property
    def label(self) -> str:
        return f"[chunk {self.chunk_index + 1}/{self.chunk_count}]"


class Catalogue:
    """A dataset's SQLite catalogue. Writers must hold the dataset's write lock."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        try:
            if readonly:
                self._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
            else:
                self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=FULL")
                self._db.executescript(_SCHEMA)
                self._init_meta()
            self._db.execute("PRAGMA busy_timeout=30000")
        except sqlite3.DatabaseError as exc:
            translated = classify_sqlite(exc, path)  # damaged (DATA_LOSS) or the disk is full
            if translated is not None:
                raise translated from None
            raise KxError(
                Status.FAILED_PRECONDITION,
                f"the catalogue {path} cannot be opened ({exc}); restore it from a backup or ingest into a new dataset",
            ) from None

    def close(self) -> None:
        self._db.close()

    # -- metadata -----------------------------------------------------------------

    def _init_meta(self) -> None:
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('created_at', ?)", (repr(time.time()),))

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    @property
    def created_at(self) -> float:
        return float(self._meta("created_at") or 0.0)

    def fingerprint(self) -> Fingerprint | None:
        raw = self._meta("fingerprint")
        return None if raw is None else Fingerprint.from_dict(json.loads(raw))

    # -- reads --------------------------------------------------------------------

    def counts(self) -> tuple[int, int]:
        docs = self._db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        passages = self._db.execute("SELECT COUNT(*) FROM passages").fetchone()[0]
        return int(docs), int(passages)

    def max_passage_seq(self) -> int:
        return int(self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM passages").fetchone()[0])

    def _where_in(self, select: str, column: str, values: Sequence[Any]) -> Iterator[tuple]:
        """Rows of `select ... WHERE column IN (values)`, asked 500 at a time (SQLite caps bound variables)."""
        for start in range(0, len(values), 500):
            part = list(values[start:start + 500])
            yield from self._db.execute(f"{select} WHERE {column} IN ({','.join('?' * len(part))})", part)

    def known_refs(self, refs: Sequence[str]) -> set[str]:
        return {row[0] for row in self._where_in("SELECT ref FROM documents", "ref", refs)}

    def documents(self, offset: int = 0, limit: int = 1_000_000) -> list[DocumentRow]:
        rows = self._db.execute(f"{_DOCUMENT_ROW} ORDER BY seq LIMIT ? OFFSET ?", (limit, offset))
        return [DocumentRow(*row) for row in rows]

    def document(self, ref: str) -> DocumentRow | None:
        row = self._db.execute(f"{_DOCUMENT_ROW} WHERE ref = ?", (ref,)).fetchone()
        return None if row is None else DocumentRow(*row)

    def document_bytes(self, ref: str) -> bytes | None:
        row = self._db.execute("SELECT data FROM blobs WHERE ref = ?", (ref,)).fetchone()
        return None if row is None else bytes(row[0])

    def passages_of(self, doc_ref: str) -> list[PassageRow]:
        rows = self._db.execute(f"{_PASSAGE_ROW} WHERE doc_ref = ? ORDER BY chunk_index", (doc_ref,))
        return [PassageRow(*row) for row in rows]

    def passages_by_seq(self, seqs: Sequence[int]) -> dict[int, PassageRow]:
        return {row[0]: PassageRow(*row) for row in self._where_in(_PASSAGE_ROW, "seq", [int(s) for s in seqs])}

    def refs_by_seq(self, seqs: Sequence[int]) -> dict[int, str]:
        return dict(self._where_in("SELECT seq, ref FROM passages", "seq", [int(s) for s in seqs]))

    def vectors_by_seq(self, seqs: Sequence[int], dimension: int) -> np.ndarray:
        """Stored unit vectors for `seqs`, in that order."""
        found = dict(self._where_in("SELECT seq, vector FROM passages", "seq", [int(s) for s in seqs]))
        out = np.zeros((len(seqs), dimension), dtype=np.float32)
        for i, seq in enumerate(seqs):
            out[i] = np.frombuffer(found[int(seq)], dtype=np.float32)
        return out

    def iter_passages_after(self, seq: int, upto: int, batch: int = 2048) -> Iterator[list[tuple[int, str, bytes]]]:
        """(seq, text, vector bytes) for passages in (seq, upto], in batches, ascending."""
        last = seq
        while True:
            rows = self._db.execute(
                "SELECT seq, text, vector FROM passages WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
                (last, upto, batch),
            ).fetchall()
            if not rows:
                return
            yield rows
            last = rows[-1][0]

    # -- the one write --------------------------------------------------------------

    def commit_documents(
        self,
        documents: Sequence[NewDocument],
        vectors: np.ndarray,
        fingerprint: Fingerprint,
    ) -> None:
        """Write documents, their bytes, passages and vectors in one transaction.

        `vectors` holds one row per passage, in the order the passages appear
        across `documents`. The fingerprint is stamped with the first commit.
        """
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
                    "passage_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (doc.ref, doc.name, doc.source_path, len(doc.data), doc.media_type, now, doc.text_length,
                     len(doc.passages)),
                )
                cur.executemany(
                    "INSERT INTO passages (ref, doc_ref, chunk_index, chunk_count, char_start, char_end, text, vector) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (p.ref, doc.ref, p.chunk_index, p.chunk_count, p.char_start, p.char_end, p.text,
                         np.ascontiguousarray(vectors[row + i], dtype=np.float32).tobytes())
                        for i, p in enumerate(doc.passages)
                    ],
                )
                row += len(doc.passages)
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
