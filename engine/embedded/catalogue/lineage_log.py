"""The catalogue's lineage log (schemas 4 and 5): reading which stored version of each source is current,
and appending the events that move it.

Documents from the same source (the same name: a file's path in a watched or
ingested folder, a JSONL id, or a name an SDK caller gives) form a lineage. Nothing is ever
deleted: the append-only `lineage_events` table records which stored version
is current (every added document, and old bytes offered again under their own
name), or that the lineage was retired (its file left a watched folder:
doc_ref NULL). The latest event decides; a lineage without events
(everything written before schema 4) is current at its newest document.
`lineage_state()` reads the whole picture; queries and listings show the
current versions only unless asked for all of them.

Renames (schema 5): a lineage is named by the name it answers to now, not by
the name its documents were stored under. A file renamed inside a watched
folder appends a move event (`moved_from` = the old name, `source_path` = the
file's new path): the lineage's whole history, every earlier version
included, continues under the new name, and its documents are shown under it
(`LineageState.renamed`). Stored rows never change. Bytes stored under one name
and offered under another (a copy) append an event with `source_path` and no
`moved_from`: the copy's own file, whose path the stored row does not hold.

The rules for appending (`record_current`, `retire`, `rename`) are
engine/lineage.py's `LineageWrites`, shared with the Milvus catalogue; the
picture read from the log is its `LineageState`.
"""

from __future__ import annotations

import time
from typing import Sequence

from ...lineage import LineageMarks, LineageState, LineageView, LineageWrites, SimpleLineage
from .schema import CatalogueFile, rollback


class LineageLog(CatalogueFile, LineageWrites):
    """The `lineage_events` table: its mark, the state read from it (in full or on from a mark), appends."""

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

    def lineage_view(self) -> LineageView:
        """What listings read: a SimpleLineage where the history is simple, else the whole state."""
        return self.simple_lineage_after(None) or self.lineage_state()

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

    def simple_lineage_after(self, known: SimpleLineage | None) -> SimpleLineage | None:
        """The lineage state as a SimpleLineage where the history is simple (see there), else None (the
        caller builds the whole state). From `known` (a simple state read earlier) only the documents and
        events after its marks are looked at; cold, the whole log is checked in SQL (1.7 s at a million
        documents, against ~10 s for the state itself). Read in one snapshot."""
        if "lineage_events" not in self._tables:
            return None  # a catalogue from before schema 4: documents placed by name, the whole state decides
        began = not self._db.in_transaction
        if began:
            self._db.execute("BEGIN")
        try:
            return self._simple_after(known) if known is not None else self._simple_whole()
        finally:
            if began and self._db.in_transaction:
                self._db.execute("COMMIT")

    def _simple_whole(self) -> SimpleLineage | None:
        db = self._db
        documents, last_document = db.execute("SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM documents").fetchone()
        moved = "moved_from" if "moved_from" in self._columns["lineage_events"] else "NULL"  # schema 4: no renames
        events, last_event, odd = db.execute(
            f"SELECT COUNT(*), COALESCE(MAX(seq), 0), COALESCE(SUM(doc_ref IS NULL OR {moved} IS NOT NULL), 0) "
            "FROM lineage_events").fetchone()
        if events != documents or odd:
            return None  # a retirement, a rename, a version again, or documents without events
        if db.execute("SELECT 1 FROM lineage_events GROUP BY lineage HAVING COUNT(*) > 1 LIMIT 1").fetchone():
            return None  # a lineage with two events: a second version, or old bytes offered again
        # each lineage has one event and there are as many as documents: simple when each document has its own
        matched = db.execute("SELECT COUNT(*) FROM documents d WHERE EXISTS (SELECT 1 FROM lineage_events e "
                             "WHERE e.lineage = d.name AND e.doc_ref = d.ref)").fetchone()[0]
        return SimpleLineage(documents, (last_document, last_event)) if matched == documents else None

    def _simple_after(self, known: SimpleLineage) -> SimpleLineage | None:
        documents, events = self._lineage_rows(*known.marks)
        if not documents and not events:
            return known
        if len(events) != len(documents) or any(doc_ref is None or moved_from is not None
                                                for _seq, _lineage, doc_ref, moved_from, _path in events):
            return None
        if {(name, ref) for _seq, ref, name in documents} != {(lineage, doc_ref)
                                                              for _seq, lineage, doc_ref, _m, _p in events}:
            return None
        lineages = [lineage for _seq, lineage, _r, _m, _p in events]
        if len(set(lineages)) != len(lineages):
            return None
        for lineage in lineages:  # a lineage with an earlier event: its second version (the index answers)
            if self._db.execute("SELECT 1 FROM lineage_events WHERE lineage = ? AND seq <= ? LIMIT 1",
                                (lineage, known.marks[1])).fetchone():
                return None
        return SimpleLineage(known.documents + len(documents),
                             (documents[-1][0] if documents else known.marks[0],
                              events[-1][0] if events else known.marks[1]))

    def _lineage_rows(self, documents_after: int, events_after: int) -> tuple[list[tuple], list[tuple]]:
        documents = self._db.execute("SELECT seq, ref, name FROM documents WHERE seq > ? ORDER BY seq",
                                     (documents_after,)).fetchall()
        events: list[tuple] = []
        if "lineage_events" in self._tables:
            events = self._db.execute(self._select("lineage_events", ("seq", "lineage", "doc_ref", "moved_from",
                                                                      "source_path")) + " WHERE seq > ? ORDER BY seq",
                                      (events_after,)).fetchall()
        return documents, events

    def _append_events(self, events: Sequence[tuple[str, str | None] | tuple[str, str | None, str | None, str | None]]
                       ) -> int:
        """Append events: (lineage, ref or None), or (lineage, ref, moved_from, source_path) for a rename
        (moved_from: the old name) or for bytes a copy took on (moved_from None, source_path: the copy's file)."""
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
            rollback(cur)
            raise
        return len(events)
