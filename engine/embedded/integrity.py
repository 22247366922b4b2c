"""`kx datasets check NAME [--repair]`: every row of a dataset's catalogue checked, and the damaged ones set aside.

A query checks the rows it answers with (engine/embedded/catalogue/passages.py)
and refuses with DATA_LOSS rather than answer from a damaged one; this is the
full pass that message points to:

- SQLite's own `PRAGMA integrity_check` (pages, b-trees, indexes);
- every document row: its ref is a sha256's hex;
- every passage row: its refs are sha256 hex and its ref is the one its
  document and span give, its text decodes as UTF-8, its vector is empty
  (the embedding backlog) or a finite unit vector of the fingerprint's
  dimension, its document is in the catalogue;
- the index sidecars against the catalogue: what they hold, and that they
  describe this catalogue's passages (a forked or swapped index does not).

`--repair`, under the dataset's write lock: a passage whose only damage is its
vector gets an empty one (it joins the backlog; `kx datasets embed NAME`
embeds it again from its intact text); any other damaged row is copied into
`quarantine-<time>.jsonl` in the dataset's folder (every column, bytes as
hex) and deleted from the catalogue; SQLite's indexes are rebuilt (REINDEX)
when its check failed; the dense and keyword indexes are rebuilt from the
catalogue. The report lists exactly what was set aside and which documents
lost which passages. Pages SQLite cannot read at all cannot be repaired here:
the report says so and what to do.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import KxError, Status
from .catalogue.passages import UNIT_TOLERANCE, passage_problem
from .dataset import Dataset
from .storage_errors import classify_sqlite

_INDEX_FILES = ("dense.voy", "dense.json", "sparse.json", "sparse")


@dataclass
class Finding:
    """One damaged row: its table, its key (a passage's seq, a document's rowid), what is wrong, and
    whether re-embedding alone repairs it (`vector_only`)."""

    table: str
    key: int
    problem: str
    vector_only: bool = False
    document: str | None = None  # the passage's document ref, when it could be read


@dataclass
class CheckReport:
    dataset: str
    catalogue: str
    sqlite_check: list[str] = field(default_factory=list)  # ["ok"] when SQLite found nothing
    documents: int = 0
    passages: int = 0
    findings: list[Finding] = field(default_factory=list)
    indexes: list[str] = field(default_factory=list)        # what is wrong with the index files, if anything
    unreadable: str | None = None                          # rows SQLite could not read past, if any
    repaired: bool = False
    quarantine_file: str | None = None
    re_embed: int = 0                                      # passages whose vectors were cleared for re-embedding
    lost_passages: dict[str, list[int]] = field(default_factory=dict)  # document ref -> chunk indexes removed
    after: list[str] = field(default_factory=list)         # SQLite's check after the repair

    @property
    def healthy(self) -> bool:
        return self.sqlite_check == ["ok"] and not self.findings and not self.indexes and self.unreadable is None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "healthy": self.healthy}


def check_dataset(settings: Settings, name: str, repair: bool = False) -> CheckReport:
    """The full check of dataset `name` (NOT_FOUND when there is none); with `repair`, the repair too."""
    dataset = Dataset(settings, name)
    dataset.require(settings)
    if not repair:
        return _check(dataset)
    from filelock import FileLock

    # the write lock alone (opening the catalogue as a writer would refuse a damaged one): no ingest adds
    # rows while damaged ones are set aside
    with FileLock(str(dataset.folder / "write.lock")):
        report = _check(dataset)
        if report.unreadable is None:
            _repair(dataset, report)
            _rebuild_indexes(dataset)
            report.repaired = True
        return report


def _connect(path: Path, readonly: bool) -> sqlite3.Connection:
    uri = f"file:{path}?mode=ro" if readonly else f"file:{path}"
    db = sqlite3.connect(uri, uri=True, isolation_level=None)
    db.text_factory = bytes  # texts come back as their stored bytes: a check decodes them itself
    db.execute("PRAGMA busy_timeout=30000")
    return db


def _check(dataset: Dataset) -> CheckReport:
    path = dataset.catalogue_path
    report = CheckReport(dataset=dataset.name, catalogue=str(path))
    try:
        db = _connect(path, readonly=True)
    except sqlite3.Error as exc:
        raise _translated(exc, path) from None
    try:
        report.sqlite_check = [_text(row[0]) for row in db.execute("PRAGMA integrity_check(100)")]
        dimension = _dimension(db)
        documents = _documents(db, report)
        _passages(db, report, documents, dimension)
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # the latter: a damaged schema's own text
        report.unreadable = (f"SQLite could not read past a damaged page ({exc}); salvage the file with "
                             f"`sqlite3 {path} \".recover\"` into a new catalogue, or restore it from a backup")
    finally:
        db.close()
    if report.unreadable is None:
        report.indexes = _index_problems(dataset)
    return report


def _translated(exc: sqlite3.Error, path: Path) -> KxError:
    return classify_sqlite(exc, path) or KxError(Status.DATA_LOSS, f"the catalogue {path} cannot be read ({exc})")


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _dimension(db: sqlite3.Connection) -> int | None:
    row = db.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
    try:
        value = json.loads(row[0]) if row else None
        return int(value["dimension"]) if isinstance(value, dict) else None
    except (ValueError, KeyError, TypeError):
        return None


def _documents(db: sqlite3.Connection, report: CheckReport) -> set[str]:
    from ..rows import REF_RE

    refs = set()
    for rowid, ref in db.execute("SELECT rowid, ref FROM documents"):
        report.documents += 1
        text = ref.decode("utf-8", "replace") if isinstance(ref, bytes) else str(ref)
        if not REF_RE.fullmatch(text):
            report.findings.append(Finding("documents", int(rowid), f"document row {rowid}'s ref {text[:80]!r} is "
                                                                    "not 64 hex digits"))
        refs.add(text)
    return refs


def _passages(db: sqlite3.Connection, report: CheckReport, documents: set[str], dimension: int | None) -> None:
    import numpy as np

    texts: dict[str, str | None] = {}  # each document's text, read once (passages come in document order)
    rows = db.execute("SELECT seq, ref, doc_ref, char_start, char_end, text, vector FROM passages ORDER BY seq")
    for seq, ref, doc_ref, start, end, text, vector in rows:
        report.passages += 1
        decoded: list[Any] = []
        for value in (ref, doc_ref, text):
            try:
                decoded.append(value.decode("utf-8") if isinstance(value, bytes) else value)
            except UnicodeDecodeError:
                decoded.append(None)
        ref_s, doc_s, text_s = decoded
        problem = (f"passage {seq}'s text is not valid UTF-8" if text_s is None and text is not None
                   else passage_problem(seq, ref_s, doc_s, start, end, text_s))
        if problem is None and doc_s not in documents:
            problem = f"passage {seq}'s document {str(doc_s)[:12]}... has no row"
        if problem is None:
            whole = texts.get(doc_s) if doc_s in texts else texts.setdefault(doc_s, _document_text(db, doc_s))
            if whole is None:
                problem = f"passage {seq}'s document {doc_s[:12]}...'s text cannot be read"
            elif whole[start:end] != text_s:
                problem = f"passage {seq}'s text is not its document's text over its span"
        if problem is not None:
            report.findings.append(Finding("passages", int(seq), problem, document=doc_s))
            continue
        if not isinstance(vector, bytes) or not vector:
            if vector is not None and not isinstance(vector, bytes):
                report.findings.append(Finding("passages", int(seq), f"passage {seq}'s vector is not a blob",
                                               vector_only=True, document=doc_s))
            continue
        if dimension is not None and len(vector) != 4 * dimension:
            report.findings.append(Finding("passages", int(seq), f"passage {seq}'s vector is {len(vector)} bytes, "
                                                                 f"not {4 * dimension}", True, doc_s))
            continue
        values = np.frombuffer(vector[: len(vector) // 4 * 4], dtype=np.float32).astype(np.float64)
        with np.errstate(all="ignore"):
            length = float(np.sqrt(values @ values))
        if not np.isfinite(length) or abs(length - 1.0) > UNIT_TOLERANCE:
            report.findings.append(Finding("passages", int(seq), f"passage {seq}'s vector is not a finite unit "
                                                                 f"vector (length {length:.6g})", True, doc_s))


def _document_text(db: sqlite3.Connection, ref: str) -> str | None:
    """The text a document's spans index into (documents.py document_text), None when it cannot be read."""
    from .catalogue.documents import text_of_bytes

    try:
        row = db.execute("SELECT text FROM texts WHERE doc_ref = ?", (ref,)).fetchone()
        if row is not None:
            return row[0].decode("utf-8") if isinstance(row[0], bytes) else row[0]
        found = db.execute("SELECT d.media_type, b.data FROM documents d JOIN blobs b ON b.ref = d.ref "
                           "WHERE d.ref = ?", (ref,)).fetchone()
        if found is None:
            return None
        media = found[0].decode("utf-8") if isinstance(found[0], bytes) else found[0]
        return text_of_bytes(bytes(found[1]), media)
    except (UnicodeDecodeError, sqlite3.Error):
        return None


def _index_problems(dataset: Dataset) -> list[str]:
    """What is wrong with the index files: behind, damaged, or describing another catalogue."""
    try:
        catalogue = dataset.reading()
    except KxError as exc:
        return [f"the catalogue cannot be opened to compare the indexes with it: {exc.message}"]
    try:
        fingerprint = catalogue.fingerprint()
        if fingerprint is None:
            return []
        problems = []
        dense = dataset.dense(fingerprint.dimension, catalogue.dataset_id)
        if not dense.consistent_with(catalogue):
            problems.append("the dense index describes other passages than this catalogue's (a forked, copied "
                            "or edited index)")
        elif dense.watermark < catalogue.embedded_prefix():
            problems.append(f"the dense index holds passages up to {dense.watermark} of the "
                            f"{catalogue.embedded_prefix()} embedded (behind, or damaged and rebuilt on next use)")
        sparse = dataset.sparse(fingerprint.stopwords, catalogue.dataset_id)
        if not sparse.consistent_with(catalogue):
            problems.append("the keyword index describes other passages than this catalogue's (a forked or "
                            "copied index)")
        elif sparse.watermark < catalogue.max_passage_seq():
            problems.append(f"the keyword index holds passages up to {sparse.watermark} of "
                            f"{catalogue.max_passage_seq()} (behind, or damaged and rebuilt on next use)")
        return problems
    except KxError as exc:
        return [exc.message]
    except (sqlite3.Error, UnicodeDecodeError) as exc:  # rows the comparison reads are damaged (listed above)
        return [f"the indexes could not be compared with the catalogue: {exc}"]
    finally:
        catalogue.close()


def _repair(dataset: Dataset, report: CheckReport) -> None:
    """Set the damaged rows aside (vectors cleared, other rows copied out and deleted), REINDEX if needed."""
    db = _connect(dataset.catalogue_path, readonly=False)
    try:
        damaged = [f for f in report.findings if not f.vector_only]
        cleared = [f.key for f in report.findings if f.vector_only]
        if damaged:
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
            target = dataset.folder / f"quarantine-{stamp}.jsonl"
            with target.open("a", encoding="utf-8") as out:
                for finding in damaged:
                    key = "seq" if finding.table == "passages" else "rowid"
                    cursor = db.execute(f"SELECT * FROM {finding.table} WHERE {key} = ?", (finding.key,))
                    columns = [c[0] for c in cursor.description]
                    for row in cursor:
                        record = {c: (v.hex() if isinstance(v, bytes) else v) for c, v in zip(columns, row)}
                        out.write(json.dumps({"table": finding.table, "problem": finding.problem,
                                              "row": record}) + "\n")
                        if finding.table == "passages":
                            doc = finding.document or "unknown"
                            report.lost_passages.setdefault(doc, []).append(int(record.get("chunk_index") or 0))
            report.quarantine_file = str(target)
        db.execute("BEGIN IMMEDIATE")
        for finding in damaged:
            key = "seq" if finding.table == "passages" else "rowid"
            db.execute(f"DELETE FROM {finding.table} WHERE {key} = ?", (finding.key,))
        db.executemany("UPDATE passages SET vector = x'' WHERE seq = ?", [(seq,) for seq in cleared])
        db.execute("COMMIT")
        report.re_embed = len(cleared)
        if report.sqlite_check != ["ok"]:
            db.execute("REINDEX")
        report.after = [_text(row[0]) for row in db.execute("PRAGMA integrity_check(100)")]
    finally:
        db.close()
    from .catalogue import passages

    passages._COUNTED.clear()  # counts and digests remembered before rows were removed
    passages._DIGESTS.clear()


def _rebuild_indexes(dataset: Dataset) -> None:
    """Both indexes made again from the catalogue as it is now (the caller holds the write lock)."""
    from .store import Catalogue

    for name in _INDEX_FILES:
        path = dataset.folder / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    catalogue = Catalogue(dataset.catalogue_path)
    try:
        dataset.sync_indexes(catalogue)
    finally:
        catalogue.close()
