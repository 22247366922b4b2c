"""A dataset's catalogue kept in Milvus: the face engine/ingest.py writes through, and the reads.

`MilvusDataset` and `MilvusCatalogue` offer what `Dataset` and `Catalogue`
offer the ingest pipeline (exists / writing / sync_indexes / discard;
fingerprint / known_refs / document / commit_documents / counts), so
extraction, chunking, provenance, embedding and the statuses are the
embedded engine's own code, not a copy.

Milvus has no transactions, so the write order makes the document row the
durable point, as the embedded catalogue's COMMIT is: a group's passages
and text pieces are upserted first, the document rows last. A document is
in the dataset once its row is; passages whose row never came (a crash in
between) are invisible to queries (engine/milvus/search.py drops them), and
since passage refs are content addresses, ingesting the same bytes again
upserts exactly those rows. Writes go in batches (`_BATCH_ROWS` rows, about
`_BATCH_BYTES` bytes), far under gRPC's message limit.

There is no write lock across processes: two writers adding the same bytes
upsert identical rows; a lock within this process keeps one ingest per
dataset at a time, as the embedded engine's file lock does.

Lineages (engine/embedded/catalogue/lineage_log.py, schema 4) live in a fourth, append-only
collection of events (`kxl_<name>`): each committed document appends "this
ref is its lineage's current version", a retirement appends a NULL. Events
are written after the document rows, so a crash in between leaves the new
version stored but not current (its lineage keeps answering with the
version before); offering the same file again (a watcher's start scan does)
makes it current. A dataset from before lineages has no such collection:
each name's newest document is current, as in an un-migrated catalogue.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import KxError, Status, not_found, precondition
from ..fingerprint import Fingerprint
from ..lineage import LineageState, LineageWrites
from ..rows import DocumentRow, NewDocument, PassageRow
from . import schema
from .schema import (
    PLACEHOLDER,
    REGISTRY,
    TEXT_PIECE_CHARS,
    collections_of,
    cut_to_bytes,
    lineages_of,
)

if TYPE_CHECKING:
    import numpy as np

    from .errors import MilvusConnection

_BATCH_ROWS = 512
_BATCH_BYTES = 8 * 2**20
_IN_CHUNK = 500          # values per `ref in [...]` filter
_QUERY_WINDOW = 16_384   # Milvus's most rows per query (offset + limit)

PASSAGE_FIELDS = ["ref", "doc_ref", "chunk_index", "chunk_count", "char_start", "char_end", "text", "text_cut",
                  "page_start", "page_end", "section"]
DOCUMENT_FIELDS = ["ref", "name", "source_path", "size", "media_type", "ingested_at", "text_length", "passage_count",
                   "title", "page_count", "extractor", "notes", "text_pieces"]


_seq_lock = threading.Lock()
_last_seq = 0


def next_seqs(count: int) -> list[int]:
    """`count` lineage event numbers: nanoseconds since the epoch, strictly rising within this process."""
    global _last_seq
    with _seq_lock:
        first = max(time.time_ns(), _last_seq + 1)
        _last_seq = first + count - 1
    return list(range(first, first + count))


def quoted(values: Sequence[str]) -> str:
    """A Milvus list literal of refs / names (hex digests and validated slugs: nothing to escape)."""
    return "[" + ",".join(f'"{v}"' for v in values) + "]"


class MilvusStore:
    """The collections of every dataset on one Milvus, and the registry that names them."""

    def __init__(self, conn: MilvusConnection) -> None:
        self.conn = conn
        self._known: set[str] = set()          # collections seen to exist (they are never dropped under us)
        self._write_locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    # -- collections ----------------------------------------------------------------

    def has(self, collection: str) -> bool:
        if collection in self._known:
            return True
        if self.conn.call("has_collection", collection):
            # a collection opened again (a new process, a restarted server) starts released: load it once
            state = self.conn.call("get_load_state", collection)
            if "Loaded" not in str(state.get("state", "")):
                self.conn.load(collection)
            self._known.add(collection)
            return True
        return False

    def create(self, collection: str, made: tuple[Any, Any]) -> None:
        if self.has(collection):
            return
        schema_, index = made
        try:
            self.conn.call("create_collection", collection, schema=schema_,
                           consistency_level="Strong")  # a query right after an ingest sees it
        except KxError:
            if not self.conn.call("has_collection", collection):  # another writer may have just made it
                raise
        # Indexes on an empty collection: nothing to wait for (pymilvus would poll
        # every 0.5 s per index); loading waits, so the first query finds it ready.
        self.conn.call("create_index", collection, index, sync=False)
        self.conn.call("load_collection", collection)
        self._known.add(collection)

    def drop(self, collection: str) -> None:
        self._known.discard(collection)
        if self.conn.call("has_collection", collection):
            self.conn.call("drop_collection", collection)

    def write_lock(self, name: str) -> threading.Lock:
        with self._locks_lock:
            return self._write_locks.setdefault(name, threading.Lock())

    # -- the registry ---------------------------------------------------------------

    def registry_row(self, name: str) -> dict[str, Any] | None:
        if not self.has(REGISTRY):
            return None
        rows = self.conn.call("query", REGISTRY, filter=f'name == "{name}"',
                              output_fields=["name", "fingerprint", "created_at"])
        return dict(rows[0]) if rows else None

    def dataset_names(self) -> list[str]:
        if not self.has(REGISTRY):
            return []
        rows = self.conn.call("query", REGISTRY, filter='name != ""', output_fields=["name"], limit=_QUERY_WINDOW)
        return sorted(row["name"] for row in rows)

    def register(self, name: str, fingerprint: Fingerprint) -> dict[str, Any]:
        """Stamp the dataset with its fingerprint (the first commit does this); the row as stored."""
        self.create(REGISTRY, schema.registry_schema(self.conn.client))
        row = {"name": name, "fingerprint": json.dumps(fingerprint.to_dict(), sort_keys=True),
               "created_at": time.time(), "schema_version": schema.SCHEMA_VERSION, "_v": PLACEHOLDER}
        self.conn.call("upsert", REGISTRY, [row])
        return row

    def unregister(self, name: str) -> None:
        if self.has(REGISTRY):
            self.conn.call("delete", REGISTRY, filter=f'name == "{name}"')

    # -- reads ------------------------------------------------------------------------

    def rows_in(self, collection: str, column: str, values: Sequence[str], fields: list[str]) -> list[dict]:
        """Rows of `collection` whose `column` is one of `values`, asked _IN_CHUNK at a time."""
        out: list[dict] = []
        values = list(dict.fromkeys(values))
        for start in range(0, len(values), _IN_CHUNK):
            part = values[start:start + _IN_CHUNK]
            out.extend(self.conn.call("query", collection, filter=f"{column} in {quoted(part)}",
                                      output_fields=fields, limit=_QUERY_WINDOW))
        return out

    def all_rows(self, collection: str, fields: list[str], filter: str = "") -> Iterator[dict]:
        """Every row of `collection` (matching `filter`), in batches: more than one query window may match."""
        iterator = self.conn.call("query_iterator", collection, batch_size=1000, filter=filter,
                                  output_fields=fields)
        try:
            while True:
                batch = self.conn.guarded(iterator.next)
                if not batch:
                    return
                yield from batch
        finally:
            with contextlib.suppress(Exception):
                iterator.close()

    def count(self, collection: str) -> int:
        if not self.has(collection):
            return 0
        rows = self.conn.call("query", collection, filter="", output_fields=["count(*)"])
        return int(rows[0]["count(*)"]) if rows else 0

    def upsert(self, collection: str, rows: list[dict]) -> None:
        """Upsert in batches of at most _BATCH_ROWS rows and about _BATCH_BYTES bytes."""
        batch: list[dict] = []
        size = 0
        for row in rows:
            weight = sum(len(v) if isinstance(v, str) else 8 for v in row.values()) + 4 * len(row.get("vector", ()))
            if batch and (len(batch) >= _BATCH_ROWS or size + weight > _BATCH_BYTES):
                self.conn.call("upsert", collection, batch)
                batch, size = [], 0
            batch.append(row)
            size += weight
        if batch:
            self.conn.call("upsert", collection, batch)


def document_row(row: dict) -> DocumentRow:
    return DocumentRow(ref=row["ref"], name=row["name"], source_path=row.get("source_path"), size=int(row["size"]),
                       media_type=row["media_type"], ingested_at=float(row["ingested_at"]),
                       text_length=int(row["text_length"]), passage_count=int(row["passage_count"]),
                       title=row.get("title"), page_count=row.get("page_count"), extractor=row.get("extractor"),
                       notes=row.get("notes"))


def passage_row(row: dict, document_text: Callable[[str], str | None]) -> PassageRow:
    """A passage as the query pipeline reads it; `seq` is its ref (Milvus has no commit-order numbers)."""
    text = row["text"]
    if row.get("text_cut"):
        whole = document_text(row["doc_ref"])
        if whole is not None:
            text = whole[int(row["char_start"]):int(row["char_end"])]
    return PassageRow(seq=row["ref"], ref=row["ref"], doc_ref=row["doc_ref"], chunk_index=int(row["chunk_index"]),
                      chunk_count=int(row["chunk_count"]), char_start=int(row["char_start"]),
                      char_end=int(row["char_end"]), text=text, page_start=row.get("page_start"),
                      page_end=row.get("page_end"), section=row.get("section"))


class MilvusCatalogue(LineageWrites):
    """One dataset's catalogue in Milvus (see the module head for the write order)."""

    def __init__(self, store: MilvusStore, name: str) -> None:
        self.store = store
        self.name = name
        self.passages_col, self.documents_col, self.texts_col = collections_of(name)
        self.lineages_col = lineages_of(name)
        self._registry: dict[str, Any] | None = None

    def close(self) -> None:
        """Nothing to release: the connection belongs to the backend."""

    def require_registered(self) -> None:
        """NOT_FOUND unless the dataset exists (what a write that cannot create one checks first)."""
        MilvusDataset(self.store, self.name).require()

    # -- metadata ---------------------------------------------------------------------

    def _registered(self) -> dict[str, Any] | None:
        if self._registry is None:
            self._registry = self.store.registry_row(self.name)
        return self._registry

    def _registry_where(self) -> str:
        from .errors import redacted

        return (f"Milvus's registry row of dataset '{self.name}' (collection {REGISTRY} at "
                f"{redacted(self.store.conn.uri)})")

    def fingerprint(self) -> Fingerprint | None:
        row = self._registered()
        return None if row is None else Fingerprint.from_json(row["fingerprint"], self._registry_where())

    @property
    def created_at(self) -> float:
        row = self._registered()
        return float(row["created_at"]) if row else 0.0

    # -- reads ------------------------------------------------------------------------

    def counts(self) -> tuple[int, int]:
        return self.store.count(self.documents_col), self.store.count(self.passages_col)

    def known_refs(self, refs: Sequence[str]) -> set[str]:
        if not refs or not self.store.has(self.documents_col):
            return set()
        return {row["ref"] for row in self.store.rows_in(self.documents_col, "ref", refs, ["ref"])}

    def documents_by_ref(self, refs: Sequence[str]) -> dict[str, DocumentRow]:
        if not refs or not self.store.has(self.documents_col):
            return {}
        rows = self.store.rows_in(self.documents_col, "ref", refs, DOCUMENT_FIELDS)
        return {row["ref"]: document_row(row) for row in rows}

    def document(self, ref: str) -> DocumentRow | None:
        return self.documents_by_ref([ref]).get(ref)

    def documents(self, offset: int = 0, limit: int = 1_000_000) -> list[DocumentRow]:
        """Documents in ingest order (time of their commit, then ref).

        Milvus cannot sort a query, so this reads every document's (ref,
        time) and sorts here: fine for browsing thousands, linear in the
        dataset's documents (SCALING.md).
        """
        if not self.store.has(self.documents_col):
            return []
        keys = sorted((float(r["ingested_at"]), r["ref"]) for r in
                      self.store.all_rows(self.documents_col, ["ref", "ingested_at"]))
        page = [ref for _t, ref in keys[offset:offset + limit]]
        found = self.documents_by_ref(page)
        return [found[ref] for ref in page if ref in found]

    def document_text(self, ref: str) -> str | None:
        row = self.document(ref)
        if row is None:
            return None
        pieces = self.store.rows_in(self.texts_col, "doc_ref", [ref], ["piece", "text"])
        return "".join(p["text"] for p in sorted(pieces, key=lambda p: int(p["piece"])))

    def passages_of(self, doc_ref: str) -> list[PassageRow]:
        rows = self.store.rows_in(self.passages_col, "doc_ref", [doc_ref], PASSAGE_FIELDS)
        text: dict[str, str | None] = {}

        def whole(ref: str) -> str | None:
            if ref not in text:
                text[ref] = self.document_text(ref)
            return text[ref]

        return sorted((passage_row(r, whole) for r in rows), key=lambda p: p.chunk_index)

    # -- the write --------------------------------------------------------------------

    # -- lineages (see the module head) -------------------------------------------------

    def lineage_mark(self) -> int:
        """Moves whenever an event is appended (every committed document appends one): readers compare it."""
        return self.store.count(self.lineages_col)

    def document_keys(self) -> list[tuple[float, str, str, str | None, str]]:
        """(ingested_at, ref, name, source_path, media_type) of every document, in ingest order."""
        if not self.store.has(self.documents_col):
            return []
        return sorted((float(r["ingested_at"]), r["ref"], r["name"], r.get("source_path"), r["media_type"])
                      for r in self.store.all_rows(self.documents_col,
                                                   ["ref", "name", "source_path", "media_type", "ingested_at"]))

    def lineage_state(self, keys: Sequence[tuple[float, str, str, str | None, str]] | None = None) -> LineageState:
        """Every document's lineage and version; `keys` (document_keys()) when the caller read them already."""
        keys = self.document_keys() if keys is None else keys
        events: list[tuple[int, str, str | None, str | None, str | None]] = []
        if self.store.has(self.lineages_col):
            events = sorted((int(r["seq"]), r["lineage"], r.get("doc_ref"), r.get("moved_from"), r.get("source_path"))
                            for r in self.store.all_rows(self.lineages_col, ["seq", "lineage", "doc_ref",
                                                                             "moved_from", "source_path"]))
        return LineageState.from_history([(ref, name) for _t, ref, name, _p, _m in keys],
                                         [event[1:] for event in events])

    def _append_events(self, events: Sequence[tuple[str, str | None] | tuple[str, str | None, str | None, str | None]]
                       ) -> int:
        """Append events: (lineage, ref or None), or (lineage, ref, moved_from, source_path) for a rename
        (moved_from: the old name) or for bytes a copy took on (moved_from None, source_path: the copy's file)."""
        if not events:
            return 0
        self.store.create(self.lineages_col, schema.lineages_schema(self.store.conn.client))
        now = time.time()
        rows = []
        for seq, event in zip(next_seqs(len(events)), events):
            moved_from, path = event[2:] if len(event) == 4 else (None, None)
            rows.append({"seq": seq, "lineage": cut_to_bytes(event[0])[0], "doc_ref": event[1], "at": now,
                         "moved_from": moved_from and cut_to_bytes(moved_from)[0],
                         "source_path": path and cut_to_bytes(path)[0], "_v": PLACEHOLDER})
        self.store.upsert(self.lineages_col, rows)
        return len(events)

    def commit_documents(self, documents: Sequence[NewDocument], vectors: np.ndarray | None,
                         fingerprint: Fingerprint) -> None:
        """Write a group of documents: passages and texts first, the document rows last (the durable point)."""
        import numpy as np

        if vectors is None:  # an ingest gives Milvus no stage two: every group comes with its vectors
            raise precondition("Milvus stores a passage with its vector; this group came without vectors")

        if self._registered() is None:
            self._create(fingerprint)
        now = time.time()
        passages: list[dict] = []
        texts: list[dict] = []
        docs: list[dict] = []
        row = 0
        for doc in documents:
            for i, p in enumerate(doc.passages):
                stored, cut = cut_to_bytes(p.text)
                section = cut_to_bytes(p.section)[0] if p.section else None
                passages.append({
                    "ref": p.ref, "doc_ref": doc.ref, "chunk_index": p.chunk_index, "chunk_count": p.chunk_count,
                    "char_start": p.char_start, "char_end": p.char_end, "text": stored, "text_cut": cut,
                    "page_start": p.page_start, "page_end": p.page_end, "section": section,
                    "vector": np.asarray(vectors[row + i], dtype=np.float32).tolist(),
                })
            row += len(doc.passages)
            text = doc.text if doc.text is not None else doc.data.decode("utf-8", errors="replace")
            pieces = [text[i:i + TEXT_PIECE_CHARS] for i in range(0, len(text), TEXT_PIECE_CHARS)] or [""]
            texts.extend({"key": f"{doc.ref}:{n}", "doc_ref": doc.ref, "piece": n, "text": piece, "_v": PLACEHOLDER}
                         for n, piece in enumerate(pieces))
            docs.append({
                "ref": doc.ref, "name": cut_to_bytes(doc.name)[0],
                "source_path": cut_to_bytes(doc.source_path)[0] if doc.source_path else None,
                "size": len(doc.data), "media_type": doc.media_type[:256], "ingested_at": now,
                "text_length": doc.text_length, "passage_count": len(doc.passages), "text_pieces": len(pieces),
                "title": cut_to_bytes(doc.title)[0] if doc.title else None, "page_count": doc.page_count,
                "extractor": (doc.extractor or None) and doc.extractor[:256],
                "notes": cut_to_bytes(json.dumps(list(doc.notes)))[0] if doc.notes else None,
                "_v": PLACEHOLDER,
            })
        self.store.upsert(self.passages_col, passages)
        self.store.upsert(self.texts_col, texts)
        self.store.upsert(self.documents_col, docs)   # from here on the documents are in
        # then each is its lineage's current version (a crash before this: see the module head)
        self._append_events([(doc.name, doc.ref) for doc in documents])

    def _create(self, fingerprint: Fingerprint) -> None:
        client = self.store.conn.client
        self.store.create(self.passages_col, schema.passages_schema(client, fingerprint.dimension))
        self.store.create(self.documents_col, schema.documents_schema(client))
        self.store.create(self.texts_col, schema.texts_schema(client))
        self.store.create(self.lineages_col, schema.lineages_schema(client))
        self.store.register(self.name, fingerprint)
        stored = self.store.registry_row(self.name)   # read back: a writer racing us may have stamped first
        if stored is None:
            raise KxError(Status.UNAVAILABLE, f"Milvus did not keep the registration of dataset '{self.name}'; "
                                              "try the ingest again")
        self._registry = stored
        theirs = Fingerprint.from_json(stored["fingerprint"], self._registry_where())
        if theirs != fingerprint:
            from ..fingerprint import check_compatible

            check_compatible(self.name, theirs, fingerprint)

    def flush(self) -> None:
        for collection in (self.passages_col, self.texts_col, self.documents_col, self.lineages_col):
            if self.store.has(collection):
                self.store.conn.call("flush", collection)


class MilvusDataset:
    """One dataset on Milvus: engine/ingest.py's IngestTarget. Milvus rows need their vector, so each group
    is embedded before it is committed (one stage: the ingest gets no stage two), and Milvus indexes the
    rows itself."""

    def __init__(self, store: MilvusStore, name: str) -> None:
        self.store = store
        self.name = name

    def exists(self) -> bool:
        return self.store.registry_row(self.name) is not None

    def require(self) -> None:
        if not self.exists():
            names = self.store.dataset_names()
            have = ", ".join(names) if names else "none yet"
            raise not_found(f"dataset '{self.name}' does not exist (datasets: {have}); "
                            f"create it with: kx datasets ingest {self.name} --file FILE")

    @contextlib.contextmanager
    def writing(self, on_wait: Callable[[str], None] | None = None) -> Iterator[MilvusCatalogue]:
        lock = self.store.write_lock(self.name)
        if not lock.acquire(timeout=0.5):
            if on_wait is not None:
                on_wait(f"waiting for another writer to finish with dataset '{self.name}'")
            lock.acquire()
        try:
            yield MilvusCatalogue(self.store, self.name)
        finally:
            lock.release()

    def storage_guard(self) -> contextlib.AbstractContextManager[None]:
        """Nothing on this machine's disk to translate: the connection tells its own failures (.errors)."""
        return contextlib.nullcontext()

    def sync_sparse(self, catalogue: MilvusCatalogue, on_stage: Callable[[str], None] | None = None,
                    on_progress: Callable[[int, int], None] | None = None) -> None:
        """Nothing to catch up: Milvus's BM25 function indexes each row as it is written."""

    def sync_dense(self, catalogue: MilvusCatalogue) -> None:
        """Nothing to catch up: each row carries its vector, and Milvus builds its HNSW index itself."""

    def sync_indexes(self, catalogue: MilvusCatalogue, on_stage: Callable[[str], None] | None = None) -> None:
        """Milvus indexes what it holds itself; flushing seals the new rows into segments now."""
        if catalogue.fingerprint() is None:
            return
        if on_stage:
            on_stage("milvus")
        catalogue.flush()

    def discard(self) -> None:
        """Drop what a first ingest that stored no document left (collections, the registry row); best effort."""
        with contextlib.suppress(KxError):  # the ingest's own failure is the one to report
            catalogue = MilvusCatalogue(self.store, self.name)
            if self.store.count(catalogue.documents_col):
                return
            self.store.unregister(self.name)
            for collection in (catalogue.passages_col, catalogue.documents_col, catalogue.texts_col,
                               catalogue.lineages_col):
                self.store.drop(collection)
