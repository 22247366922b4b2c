"""What a folder watcher's worker tells the dataset: batches of settled files, renames, the backlog left.

Settled files are read (checked again against the signature they settled
with) and gathered into batches bounded in files and bytes; each batch is ONE
`ingest` call, and each file's outcome comes back as an event, then the
batch's totals. Renames go to the backend before the renamed files' unchanged
bytes come round, so the lineage moves instead of starting anew. The backend's
progress callback is the safe point to give a batch up at when asked
(`Abandoned`).
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import replace
from typing import Sequence

from ..errors import KxError, Status
from ..records import DocumentStatus
from ..text.folders import document_name, document_names, leads_outside, outside_refusal, printable
from ..text.inputs import DocumentInput, from_file
from .events import BatchDone, BatchStarted, Ingested, Refused, Renamed, Signature, Unchanged, WatchEventFn
from .intake import Intake
from .pending import IngestBackend, file_signature


class Abandoned(Exception):
    """Raised through the engine's ingest, between two of its steps, to give up the batch in hand."""


class Dispatch:
    """One watcher's calls into its backend for `dataset`, reported through `emit` (on the worker's thread)."""

    def __init__(self, engine: IngestBackend, dataset: str, intake: Intake, emit: WatchEventFn,
                 batch_files: int, batch_bytes: int) -> None:
        self.engine = engine
        self.dataset = dataset
        self.batch_files = batch_files
        self.batch_bytes = batch_bytes
        self.batches = 0
        self._intake = intake
        self._emit = emit

    def resume_backlog(self) -> None:
        """Finish the embedding an earlier ingest of this dataset left (a stop, a crash) before new files."""
        try:
            self.engine.embed(self.dataset, on_event=self._abandon_point)
        except KxError as exc:
            if exc.status is not Status.NOT_FOUND:  # no dataset yet: nothing waits
                raise

    def rename(self, pairs: dict[tuple[str, str], str]) -> None:
        """Tell the dataset about renames ((old name, new name) -> the file now), before the renamed files'
        (unchanged) bytes come round."""
        if not pairs:
            return
        try:
            moved = set(self.engine.rename(self.dataset, [(old, new, now) for (old, new), now in pairs.items()]))
        except KxError as exc:
            if exc.status is Status.NOT_FOUND:  # no dataset yet: nothing to carry
                return
            raise
        for (old, new), now in pairs.items():
            if old in moved:
                moved.discard(old)
                self._emit(Renamed(now, new, old))

    def take_batch(self, ready: deque[tuple[str, Signature]]) -> list[tuple[str, Signature, DocumentInput]]:
        """The next batch from the settled files `ready` (taken off it), read: at most `batch_files` files and,
        past the first, `batch_bytes` bytes. A file changed since it settled is left to settle again."""
        batch: list[tuple[str, Signature, DocumentInput]] = []
        size = 0
        limit = self.engine.settings.max_document_bytes
        listings: dict[str, list[str]] = {}  # each folder listed once a batch to name its files
        while ready and len(batch) < self.batch_files:
            path, signature = ready[0]
            cost = signature[0] if signature[0] <= limit else 0  # too large: refused unread
            if batch and size + cost > self.batch_bytes:
                break
            ready.popleft()
            doc = self._read(path, signature, limit, listings)
            if doc is not None:
                batch.append((path, signature, doc))
                size += cost
        return batch

    def _read(self, path: str, signature: Signature, limit: int,
              listings: dict[str, list[str]]) -> DocumentInput | None:
        """The file's document, or None when it vanished or changed since it settled (it settles again)."""
        if file_signature(path) != signature:
            self._intake.note(path)
            return None
        root = self._intake.root
        name = document_names(root, [path], listings)[path]
        if name != document_name(os.path.relpath(path, root)):
            # it keeps its extension: a file with its stem lies beside it, whose document may still hold the
            # bare name (`report` for report.md, now report.txt came): a reconcile moves it to `report.md`
            self._intake.ask_reconcile()
        real = leads_outside(path, root)
        if real is not None:  # refused unread: the event says where the link leads
            return DocumentInput(name, source_path=printable(path), error=outside_refusal(path, real))
        doc = from_file(path, limit)
        if doc.error is not None and doc.error.status is Status.NOT_FOUND:
            return None
        doc = replace(doc, name=name)
        if file_signature(path) != signature:  # written to while we read it: not the bytes that settled
            self._intake.note(path)
            return None
        return doc

    def _abandon_point(self, _event: object) -> None:
        """The ingest's progress callback: a safe point to give the batch up at, when asked to."""
        if self._intake.abandon:
            raise Abandoned

    def ingest(self, batch: Sequence[tuple[str, Signature, DocumentInput]]) -> None:
        """One ingest call for the batch; each file's outcome, then the batch's totals, as events."""
        self.batches += 1
        number = self.batches
        self._emit(BatchStarted(number, len(batch)))
        started = time.monotonic()
        report = self.engine.ingest(self.dataset, [doc for _, _, doc in batch], on_event=self._abandon_point)
        if len(report.results) != len(batch):
            raise KxError(Status.INTERNAL, f"ingest answered {len(report.results)} results for {len(batch)} files")
        for (path, signature, _doc), result in zip(batch, report.results):
            self._intake.pending.handled(path, signature)
            if result.status == DocumentStatus.ADDED:
                self._emit(Ingested(path, result.name, result.ref or "", result.passages, number))
            elif result.status == DocumentStatus.UNCHANGED:
                self._emit(Unchanged(path, result.name, result.ref or "", result.passages, number))
            else:
                self._emit(Refused(path, result.name, result.code or Status.INVALID_ARGUMENT.name,
                                   result.reason or "refused", number))
        self._emit(BatchDone(
            batch=number,
            files=len(batch),
            added=report.count(DocumentStatus.ADDED),
            unchanged=report.count(DocumentStatus.UNCHANGED),
            refused=len(batch) - report.count(DocumentStatus.ADDED) - report.count(DocumentStatus.UNCHANGED),
            passages_added=sum(r.passages for r in report.results if r.status == DocumentStatus.ADDED),
            documents=report.documents,
            passages=report.passages,
            seconds=round(time.monotonic() - started, 3),
        ))
