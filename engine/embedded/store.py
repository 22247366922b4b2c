"""The catalogue: one SQLite file per dataset, append-only, content-addressed.

It is the source of truth. A document, its original bytes, its passages and
their vectors are written in ONE transaction: that commit is the durable point,
so a crash leaves either the whole document or none of it. The dense and
sparse indexes are derived from the passages table and can always be rebuilt.

Passages are numbered by `seq` (ascending in commit order); the derived
indexes use it as their id and remember the highest seq they hold.

Two stages (schema 3): a document's passages may be committed before their
vectors exist. Such a passage holds an empty `vector` blob; together they are
the dataset's embedding backlog, durable state that any later writer works
through (engine/embedded/backlog.py) in seq order. `embedded_prefix()` is the highest
seq below which every passage has its vector: what the dense index may hold.
Each catalogue also carries a random `dataset_id`, written at creation, that
the derived indexes record so that files from another dataset are never
trusted.

Lineages (schema 4): documents from the same source (the same name: a
file's path in a watched or ingested folder, or the same `--name`) form a
lineage. Nothing is ever deleted: the append-only `lineage_events` table
records which stored version is current (every added document, and old bytes
offered again under their own name), or that the lineage was retired (its
file left a watched folder: doc_ref NULL). The latest event decides; a
lineage without events (everything written before schema 4) is current at
its newest document. `lineage_state()` reads the whole picture; queries and
listings show the current versions only unless asked for all of them.

Renames (schema 5): a lineage is named by the name it answers to now, not
by the name its documents were stored under. A file renamed inside a
watched folder appends a move event (`moved_from` = the old name,
`source_path` = the file's new path): the lineage's whole history, every
earlier version included, continues under the new name, and its documents
are shown under it (`LineageState.renamed`). Stored rows never change.

Provenance (schema 2): each passage keeps the pages it spans and the heading
path at its start; each document keeps its title, page count, the extractor
that read it, and the extracted text itself whenever that text is not simply
the bytes read as UTF-8 (`texts`), so character ranges stay true even after
an extractor changes. A catalogue written by schema 1 is migrated in place
the first time a writer opens it; a reader copes with an un-migrated file
(the new fields read as NULL, the text is the bytes decoded as round 1 did).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from ..errors import KxError, Status
from ..fingerprint import Fingerprint
from ..lineage import LineageMarks, LineageState, LineageWrites, shown_as
from ..rows import DocumentRow, NewDocument, PassageRow
from ..text.inputs import RECORD_MEDIA_TYPE
from .storage_errors import classify_sqlite

if TYPE_CHECKING:  # numpy is imported where vectors are touched: `kx datasets list` never pays for it
    import numpy as np

    from ..filters import Where

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


_DOCUMENT_COLUMNS = ("ref", "name", "source_path", "size", "media_type", "ingested_at", "text_length",
                     "passage_count", "title", "page_count", "extractor", "notes")
_PASSAGE_COLUMNS = ("seq", "ref", "doc_ref", "chunk_index", "chunk_count", "char_start", "char_end", "text",
                    "page_start", "page_end", "section")


def text_of_bytes(data: bytes, media_type: str) -> str | None:
    """The text a document's bytes read as without an extractor: UTF-8, or a JSONL record's title and text.

    The first catalogue schema stored no extracted texts; its documents' text is this.

    Frozen: documents stored without a `texts` row are read through this, so
    changing it would shift their passages' character ranges. None when the
    bytes are not text this way (the extracted text must then be stored).
    """
    if media_type == RECORD_MEDIA_TYPE:
        try:
            record = json.loads(data)
            title, text = record["title"], record["text"]
        except (ValueError, KeyError, TypeError):
            return None
        return f"{title}\n\n{text}" if title.strip() else text
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


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


class Catalogue(LineageWrites):
    """A dataset's SQLite catalogue. Writers must hold the dataset's write lock."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        try:
            if readonly:
                self._db = _open_readonly(path)
            else:
                self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=FULL")
                self._db.executescript(_SCHEMA)
                self._init_meta()
                self._migrate()
            self._db.execute("PRAGMA busy_timeout=30000")
            if readonly and not self._table_columns("meta"):
                self._db.close()
                raise CatalogueEmpty(path)
            self._columns = {table: self._table_columns(table)
                             for table in ("documents", "passages", "texts", "lineage_events")}
            self._tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
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
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('dataset_id', ?)", (uuid.uuid4().hex,))

    def _table_columns(self, table: str) -> set[str]:
        return {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}

    def _migrate(self) -> None:
        """Bring an older catalogue to schema 4 in place.

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
        return None if raw is None else Fingerprint.from_dict(json.loads(raw))

    # -- reads --------------------------------------------------------------------

    def counts(self) -> tuple[int, int]:
        docs = self._db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        passages = self._db.execute("SELECT COUNT(*) FROM passages").fetchone()[0]
        return int(docs), int(passages)

    def data_version(self) -> int:
        """Moves whenever another connection (a writer, in any process) commits to the catalogue."""
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def max_passage_seq(self) -> int:
        return int(self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM passages").fetchone()[0])

    # -- lineages: the current version of each source (schema 4) -------------------------

    def lineage_mark(self) -> int:
        """Moves whenever a lineage changes head or is retired (readers compare it to stay current)."""
        if "lineage_events" not in self._tables:
            if self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'lineage_events'").fetchone() is None:
                return 0  # a catalogue from before schema 4, not migrated yet
            self._tables.add("lineage_events")
        return int(self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM lineage_events").fetchone()[0])

    def lineage_state(self) -> LineageState:
        """Every document's lineage, version number and whether it is current; retired and renamed lineages."""
        return self.lineage_state_after(None).state

    def lineage_state_after(self, known: LineageMarks | None) -> LineageMarks:
        """The lineage state now, with the marks it was read up to: from `known` (an earlier state and its
        marks) and the documents and events appended since, where that gives it exactly
        (LineageState.advanced), else from the whole history. Read in one snapshot."""
        began = not self._db.in_transaction
        if began:
            self._db.execute("BEGIN")
        try:
            after = (known.documents, known.events) if known is not None else (0, 0)
            documents, events = self._lineage_rows(*after)
            state = None
            if known is not None:
                state = known.state.advanced([(ref, name) for _seq, ref, name in documents],
                                             [row[1:] for row in events])
            if state is None:
                if known is not None:
                    documents, events = self._lineage_rows(0, 0)
                state = LineageState.from_history([(ref, name) for _seq, ref, name in documents],
                                                  [row[1:] for row in events])
            return LineageMarks(state, documents[-1][0] if documents else after[0],
                                events[-1][0] if events else after[1])
        finally:
            if began and self._db.in_transaction:
                self._db.execute("COMMIT")

    def _lineage_rows(self, documents_after: int, events_after: int) -> tuple[list[tuple], list[tuple]]:
        documents = self._db.execute("SELECT seq, ref, name FROM documents WHERE seq > ? ORDER BY seq",
                                     (documents_after,)).fetchall()
        events: list[tuple] = []
        if "lineage_events" in self._tables:
            events = self._db.execute(self._select("lineage_events", ("seq", "lineage", "doc_ref", "moved_from",
                                                                      "source_path")) + " WHERE seq > ? ORDER BY seq",
                                      (events_after,)).fetchall()
        return documents, events

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
            _rollback(cur)
            raise
        return max(changed, 0)

    def _append_events(self, events: Sequence[tuple[str, str | None] | tuple[str, str | None, str, str | None]]
                       ) -> int:
        """Append events: (lineage, ref or None) or, for a rename, (lineage, ref, moved_from, source_path)."""
        if not events:
            return 0
        cur = self._db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            now = time.time()
            cur.executemany("INSERT INTO lineage_events (lineage, doc_ref, at, moved_from, source_path) "
                            "VALUES (?, ?, ?, ?, ?)",
                            [(e[0], e[1], now, *(e[2:] if len(e) == 4 else (None, None))) for e in events])
            cur.execute("COMMIT")
        except BaseException:
            _rollback(cur)
            raise
        return len(events)

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

    # -- the embedding backlog (passages committed before their vectors) ---------------

    def backlog(self) -> int:
        """How many committed passages still wait for their vectors."""
        return int(self._db.execute("SELECT COUNT(*) FROM passages WHERE length(vector) = 0").fetchone()[0])

    def embedded_prefix(self) -> int:
        """The highest seq at or below which every passage has its vector: what the dense index may hold."""
        first = self._db.execute("SELECT MIN(seq) FROM passages WHERE length(vector) = 0").fetchone()[0]
        return self.max_passage_seq() if first is None else int(first) - 1

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

    def unembedded(self, limit: int) -> list[tuple[int, str]]:
        """(seq, text) of the first `limit` passages of the backlog, ascending."""
        return [(int(seq), text) for seq, text in self._db.execute(
            "SELECT seq, text FROM passages WHERE length(vector) = 0 ORDER BY seq LIMIT ?", (limit,))]

    def backlog_by_document(self, refs: Sequence[str]) -> dict[str, int]:
        """For each of `refs` with a backlog, how many of its passages wait for vectors."""
        rows = self._db.execute("SELECT doc_ref, COUNT(*) FROM passages WHERE length(vector) = 0 GROUP BY doc_ref")
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
            _rollback(cur)
            raise
        return int(stored)

    def _where_in(self, select: str, column: str, values: Sequence[Any]) -> Iterator[tuple]:
        """Rows of `select ... WHERE column IN (values)`, asked 500 at a time (SQLite caps bound variables)."""
        for start in range(0, len(values), 500):
            part = list(values[start:start + 500])
            yield from self._db.execute(f"{select} WHERE {column} IN ({','.join('?' * len(part))})", part)

    def known_refs(self, refs: Sequence[str]) -> set[str]:
        return {row[0] for row in self._where_in("SELECT ref FROM documents", "ref", refs)}

    def documents(self, offset: int = 0, limit: int = 1_000_000) -> list[DocumentRow]:
        rows = self._db.execute(f"{self._select('documents', _DOCUMENT_COLUMNS)} ORDER BY seq LIMIT ? OFFSET ?",
                                (limit, offset))
        return [DocumentRow(*row) for row in rows]

    def document(self, ref: str) -> DocumentRow | None:
        row = self._db.execute(f"{self._select('documents', _DOCUMENT_COLUMNS)} WHERE ref = ?", (ref,)).fetchone()
        return None if row is None else DocumentRow(*row)

    def documents_by_ref(self, refs: Sequence[str]) -> dict[str, DocumentRow]:
        rows = self._where_in(self._select("documents", _DOCUMENT_COLUMNS), "ref", list(dict.fromkeys(refs)))
        return {row[0]: DocumentRow(*row) for row in rows}

    def document_bytes(self, ref: str) -> bytes | None:
        row = self._db.execute("SELECT data FROM blobs WHERE ref = ?", (ref,)).fetchone()
        return None if row is None else bytes(row[0])

    def document_text(self, ref: str) -> str | None:
        """The text the document's character ranges index into; None when the document is not here.

        The stored extracted text when there is one, else the bytes read as
        round 1 read them (documents whose text is just their bytes, and every
        document ingested before schema 2). Never re-extracted.
        """
        if self._columns["texts"]:
            row = self._db.execute("SELECT text FROM texts WHERE doc_ref = ?", (ref,)).fetchone()
            if row is not None:
                return row[0]
        found = self._db.execute("SELECT d.media_type, b.data FROM documents d JOIN blobs b ON b.ref = d.ref "
                                 "WHERE d.ref = ?", (ref,)).fetchone()
        if found is None:
            return None
        text = text_of_bytes(bytes(found[1]), found[0])
        if text is None:
            raise KxError(Status.INTERNAL, f"document {ref[:12]} has neither a stored text nor UTF-8 bytes; "
                                           "the catalogue is damaged: restore it from a backup or re-ingest")
        return text

    def passages_of(self, doc_ref: str) -> list[PassageRow]:
        rows = self._db.execute(f"{self._select('passages', _PASSAGE_COLUMNS)} WHERE doc_ref = ? "
                                "ORDER BY chunk_index", (doc_ref,))
        return [PassageRow(*row) for row in rows]

    def passages_by_seq(self, seqs: Sequence[int]) -> dict[int, PassageRow]:
        rows = self._where_in(self._select("passages", _PASSAGE_COLUMNS), "seq", [int(s) for s in seqs])
        return {row[0]: PassageRow(*row) for row in rows}

    def refs_by_seq(self, seqs: Sequence[int]) -> dict[int, str]:
        return dict(self._where_in("SELECT seq, ref FROM passages", "seq", [int(s) for s in seqs]))

    def vectors_by_seq(self, seqs: Sequence[int], dimension: int) -> np.ndarray:
        """Stored unit vectors for `seqs`, in that order."""
        import numpy as np

        found = dict(self._where_in("SELECT seq, vector FROM passages", "seq", [int(s) for s in seqs]))
        out = np.zeros((len(seqs), dimension), dtype=np.float32)
        for i, seq in enumerate(seqs):
            blob = found[int(seq)]
            if blob:  # a passage still in the backlog stays a zero vector: like nothing, a duplicate of nothing
                out[i] = np.frombuffer(blob, dtype=np.float32)
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
            _rollback(cur)
            raise


# (catalogue path, dataset id) -> (a committed seq, how many passages have a seq at or below it)
_COUNTED: dict[tuple[str, str], tuple[int, int]] = {}
_RANGE_COUNT = 50_000   # rows counted by their seq range at most; further apart, the index count is cheaper


def _chunks(values: Sequence[Any], size: int = 500) -> Iterator[list[Any]]:
    for start in range(0, len(values), size):
        yield list(values[start:start + size])


def _rollback(cur: sqlite3.Cursor) -> None:
    """Roll back if a transaction is still open: SQLite may already have ended it (a full disk ends it
    itself), and "cannot rollback - no transaction is active" must not hide the real error."""
    if cur.connection.in_transaction:
        cur.execute("ROLLBACK")
