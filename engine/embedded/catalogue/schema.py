"""The catalogue file: its schema, how it is opened (read-only too) and migrated, and its meta facts.

`CatalogueFile` owns the SQLite connection every other part of the catalogue
reads and writes through (engine/embedded/catalogue/, joined by
engine/embedded/store.py's `Catalogue`). A writer opens the file in WAL mode
with full syncs, creates what is missing and migrates an older schema in
place; a reader opens it read-only and copes with an un-migrated file: the
columns it lacks read as NULL (`_select`).

Each catalogue carries a random `dataset_id`, written at creation, that the
derived indexes record so that files from another dataset are never trusted.

The schema's history, each step readable by the next:
- 1: documents, their bytes (`blobs`), passages with their vectors.
- 2, provenance: each passage keeps the pages it spans and the heading path
  at its start; each document keeps its title, page count, the extractor that
  read it, and the extracted text itself whenever that text is not simply the
  bytes read as UTF-8 (`texts`; catalogue/documents.py `text_of_bytes`), so
  character ranges stay true even after an extractor changes.
- 3, two stages: passages may be committed before their vectors (an empty
  `vector` blob; catalogue/backlog.py).
- 4, lineages: the append-only `lineage_events` (catalogue/lineages.py).
- 5, renames: a lineage event may carry the lineage on under a new name.
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any, Iterator, Sequence

from ...errors import KxError, Status
from ...fingerprint import Fingerprint
from ..storage_errors import classify_sqlite, damaged_catalogue, missing_tables

SCHEMA_VERSION = 5

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
    passage_count INTEGER NOT NULL,
    title         TEXT,
    page_count    INTEGER,
    extractor     TEXT,
    notes         TEXT                -- JSON list of strings
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
    vector      BLOB NOT NULL,        -- float32, unit length; empty (x'') until embedded (the backlog)
    page_start  INTEGER,              -- 1-based; NULL for formats without pages
    page_end    INTEGER,
    section     TEXT                  -- heading path at char_start ("3 Model › 3.1 LRS model")
);
CREATE INDEX IF NOT EXISTS passages_by_doc ON passages(doc_ref, chunk_index);
CREATE INDEX IF NOT EXISTS passages_unembedded ON passages(seq) WHERE length(vector) = 0;
CREATE TABLE IF NOT EXISTS lineage_events (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    lineage TEXT NOT NULL,            -- the documents' name
    doc_ref TEXT,                     -- the version current from now on; NULL: the lineage was retired
    at      REAL NOT NULL,
    moved_from  TEXT,                 -- schema 5: lineage `moved_from` continues as `lineage` (a rename)
    source_path TEXT                  -- schema 5: where the renamed file is now
);
CREATE INDEX IF NOT EXISTS lineage_events_by_lineage ON lineage_events(lineage, seq);
CREATE TABLE IF NOT EXISTS texts (
    doc_ref TEXT PRIMARY KEY REFERENCES documents(ref),
    text    TEXT NOT NULL             -- what char_start/char_end index into
);
"""

# Columns schema 2 added to schema-1 tables: (table, column, SQL type).
_ADDED_COLUMNS = (
    ("documents", "title", "TEXT"), ("documents", "page_count", "INTEGER"), ("documents", "extractor", "TEXT"),
    ("documents", "notes", "TEXT"),
    ("passages", "page_start", "INTEGER"), ("passages", "page_end", "INTEGER"), ("passages", "section", "TEXT"),
    # schema 5: renames carry a lineage on (schema-4 catalogues made the table without them)
    ("lineage_events", "moved_from", "TEXT"), ("lineage_events", "source_path", "TEXT"),
)

# kx's tables and the schema that brought each: a catalogue at that version or later lacking one was damaged
# (a table dropped), while an older one lacks it by right and is given it, empty, when a writer migrates it.
_TABLES_SINCE = (("meta", 1), ("blobs", 1), ("documents", 1), ("passages", 1), ("texts", 2), ("lineage_events", 4))

# The rows' columns, in engine/rows.py's field order (DocumentRow, PassageRow).
DOCUMENT_COLUMNS = ("ref", "name", "source_path", "size", "media_type", "ingested_at", "text_length",
                    "passage_count", "title", "page_count", "extractor", "notes")
PASSAGE_COLUMNS = ("seq", "ref", "doc_ref", "chunk_index", "chunk_count", "char_start", "char_end", "text",
                   "page_start", "page_end", "section")


class CatalogueEmpty(KxError):
    """A catalogue file with no kx tables: one a writer is creating this instant, or an emptied (damaged) one."""

    def __init__(self, path: Path) -> None:
        super().__init__(Status.DATA_LOSS, f"the catalogue {path} is empty (0 tables; a damaged or truncated file); "
                                           f"restore it from a backup, or remove the folder {path.parent} and "
                                           "ingest again")


def _open_readonly(path: Path) -> sqlite3.Connection:
    """Open for reading; in a folder nobody can write (a read-only mount), as an immutable file.

    A WAL database needs its -shm file to be read, and SQLite cannot create
    one there: reads of a read-only KX_HOME would fail as a whole. Nothing
    can write through a read-only folder either, so immutable is the truth.
    """
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    try:
        db.execute("SELECT 1 FROM sqlite_master LIMIT 1")  # connect() is lazy: open the file now
        return db
    except sqlite3.OperationalError:
        db.close()
        if os.access(path.parent, os.W_OK) or not path.exists():
            raise
        return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, check_same_thread=False)


def rollback(cur: sqlite3.Cursor) -> None:
    """Roll back if a transaction is still open: SQLite may already have ended it (a full disk ends it
    itself), and "cannot rollback - no transaction is active" must not hide the real error."""
    if cur.connection.in_transaction:
        cur.execute("ROLLBACK")


class CatalogueFile:
    """One catalogue's SQLite connection, its schema and meta facts. Writers must hold the dataset's write lock."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        try:
            if readonly:
                self._db = _open_readonly(path)
            else:
                self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
                # before anything is created or migrated: `CREATE TABLE IF NOT EXISTS` would otherwise put an
                # empty table where a dropped one was (and the next ingest "heal" the damage away), and the
                # migration would stamp a newer kx's catalogue with this kx's older schema version
                self._check_stored()
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=FULL")
                self._db.executescript(_SCHEMA)
                self._init_meta()
                self._migrate()
            self._db.execute("PRAGMA busy_timeout=30000")
            if readonly:
                self._check_stored()  # first: a catalogue that lost only its meta table is not "empty"
            if readonly and not self._table_columns("meta"):
                self._db.close()
                raise CatalogueEmpty(path)
            self._columns = {table: self._table_columns(table)
                             for table in ("documents", "passages", "texts", "lineage_events")}
            self._tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except KxError:
            self._db.close()
            raise
        except UnicodeDecodeError as exc:  # its schema or meta text damaged
            if hasattr(self, "_db"):
                self._db.close()
            raise damaged_catalogue(path, f"a stored text is not valid UTF-8: {exc}") from None
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

    # -- the schema and meta facts ------------------------------------------------

    def _init_meta(self) -> None:
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('created_at', ?)", (repr(time.time()),))
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('dataset_id', ?)", (uuid.uuid4().hex,))

    def _check_stored(self) -> None:
        """Refuse, touching nothing, a stored catalogue a newer kx made (FAILED_PRECONDITION) or one missing a
        table its schema version has (DATA_LOSS). A new file, or one a writer is creating this instant (no
        schema_version yet, no documents), passes."""
        tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "meta" not in tables:
            if tables & {name for name, _since in _TABLES_SINCE}:  # a writer creates meta first
                raise missing_tables(self.path, ["meta"])
            return
        raw = self._meta("schema_version")
        if raw is None:
            if "documents" in tables and self._db.execute("SELECT 1 FROM documents LIMIT 1").fetchone():
                raise damaged_catalogue(self.path, "its schema_version is missing from meta")
            return
        try:
            version = int(raw)
        except ValueError:
            raise damaged_catalogue(self.path, f"its schema_version is {raw!r}, not a number") from None
        if version > SCHEMA_VERSION:
            raise KxError(Status.FAILED_PRECONDITION,
                          f"the catalogue {self.path} was made by a newer kx (schema {version}, this kx reads up to "
                          f"{SCHEMA_VERSION}); upgrade kx to read or add to it (nothing in it was changed)")
        missing = [name for name, since in _TABLES_SINCE if since <= max(version, 1) and name not in tables]
        if missing:
            raise missing_tables(self.path, missing)

    def _table_columns(self, table: str) -> set[str]:
        return {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}

    def _migrate(self) -> None:
        """Bring an older catalogue to SCHEMA_VERSION in place.

        Schema 2's provenance columns are added as NULLs (old documents keep no
        `texts` row: their text is text_of_bytes of their bytes, exactly what
        their character ranges were cut from). Schema 3's backlog index and
        schema 4's `lineage_events` table are created empty by _SCHEMA: with no
        events, each lineage is current at its newest document, as before.
        """
        missing = [(t, c, kind) for t, c, kind in _ADDED_COLUMNS if c not in self._table_columns(t)]
        if not missing and self._meta("schema_version") == str(SCHEMA_VERSION):
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for table, column, kind in missing:
                if column not in self._table_columns(table):  # another writer may have done it meanwhile
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            self._db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    def _select(self, table: str, columns: Sequence[str]) -> str:
        """SELECT of `columns`, with NULL for those an un-migrated (read-only) catalogue lacks."""
        have = self._columns[table]
        return f"SELECT {', '.join(c if c in have else 'NULL' for c in columns)} FROM {table}"

    @property
    def schema_version(self) -> int:
        return int(self._meta("schema_version") or 1)

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def meta(self, key: str) -> str | None:
        """A free-form catalogue fact (e.g. `rebuilt_from`); None when not set."""
        return self._meta(key)

    def set_meta(self, key: str, value: str) -> None:
        """Record a free-form catalogue fact; the schema's own keys are not for this."""
        if key in ("schema_version", "created_at", "dataset_id", "fingerprint"):
            raise ValueError(f"{key} is the catalogue's own")
        self._db.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                         (key, value))

    @property
    def created_at(self) -> float:
        return float(self._meta("created_at") or 0.0)

    @property
    def dataset_id(self) -> str:
        """The random id written when the dataset was created ("" in a catalogue no writer has opened since)."""
        return self._meta("dataset_id") or ""

    def fingerprint(self) -> Fingerprint | None:
        raw = self._meta("fingerprint")
        return None if raw is None else Fingerprint.from_json(raw, str(self.path))

    def _where_in(self, select: str, column: str, values: Sequence[Any]) -> Iterator[tuple]:
        """Rows of `select ... WHERE column IN (values)`, asked 500 at a time (SQLite caps bound variables)."""
        for start in range(0, len(values), 500):
            part = list(values[start:start + 500])
            yield from self._db.execute(f"{select} WHERE {column} IN ({','.join('?' * len(part))})", part)
