"""Rebuild: a new dataset made from an existing one's stored original bytes, under the current settings.

A dataset's fingerprint (model, chunker, tokenizer) is fixed once stamped, so
switching a dataset to int8 or to another chunk size means a new dataset.
kx stores every original's bytes, so nothing has to be found and fed again:
`run_rebuild(engine, "handbook", "handbook-int8")` offers every stored
version of the source, oldest first, to the ordinary two-stage ingest of the
target (names, source paths and media types kept), then gives the target the
source's lineage state (which version of each lineage is current, which
lineages are retired), then embeds the target's backlog.

The source is only read. The work goes through the pipeline, so it is
resumable: stopped during stage 1, the same command continues (what is in
comes back unchanged; the target carries a `rebuilt_from` mark so that only
a rebuild of the same source may continue it); stopped during stage 2, `kx
datasets embed TARGET` (or the same command) finishes the embedding.
Each document keeps the time it was first ingested into the source, so
`after:`/`before:` filters answer the same on the rebuilt dataset.
"""

from __future__ import annotations

from typing import Callable, Protocol

from ..config import Settings
from ..errors import KxError, Status, invalid
from ..names import validate_name
from ..records import DocumentResult, EmbedReport, IngestReport, Notice
from ..records import IngestEventFn as EventFn
from ..text.inputs import DocumentInput
from .dataset import Dataset
from .store import Catalogue

REBUILT_FROM = "rebuilt_from"
BATCH_BYTES = 64 * 2**20  # originals held in memory at once


class RebuildEngine(Protocol):
    """What a rebuild needs of the engine: its settings, an ingest that can leave stage 2, and the embed."""

    settings: Settings

    def ingest(self, name: str, documents: list[DocumentInput], vectors: None = None,
               on_event: EventFn | None = None, should_stop: Callable[[], bool] | None = None) -> IngestReport: ...

    def embed(self, name: str, on_event: EventFn | None = None,
              should_stop: Callable[[], bool] | None = None) -> EmbedReport: ...


def run_rebuild(engine: RebuildEngine, source: str, target: str, on_event: EventFn | None = None,
                should_stop: Callable[[], bool] | None = None) -> IngestReport:
    """Build dataset `target` from `source`'s stored originals under `engine`'s settings; `source` is untouched."""
    emit = on_event or (lambda _event: None)
    validate_name(source)
    validate_name(target)
    if source == target:
        raise invalid(f"rebuild '{source}' into a new dataset: --as NAME must differ from '{source}'")
    settings = engine.settings
    origin = Dataset(settings, source)
    origin.require(settings)
    destination = Dataset(settings, target)
    created = not destination.exists()
    if not created:
        mark = _read_mark(destination)
        if mark != source:
            raise KxError(Status.ALREADY_EXISTS,
                          f"dataset '{target}' exists already" + (f" (rebuilt from '{mark}')" if mark else "")
                          + f"; pick another name for --as, or rebuild '{source}' into it only to continue "
                            "an interrupted rebuild of the same source")
        emit(Notice("preparing", f"continuing the rebuild of '{source}' into '{target}'"))
    else:
        # Marked before anything goes in: a stop or a kill at any moment after this (its first commit
        # included) leaves a target that the same command continues, never one it refuses as taken.
        with destination.writing() as marking:
            _mark(marking, source)
    try:
        return _fill(engine, origin, destination, on_event=emit, should_stop=should_stop)
    except Exception:
        # A failure (a model that cannot load, a full disk, a damaged original) leaves no half-made dataset that
        # `kx datasets list` would show; only one this run created, though: a target it was continuing was
        # there before. A stop (Ctrl-C, SIGTERM: KeyboardInterrupt, not an Exception) or a kill keeps what
        # was committed, for the same command to continue.
        if created:
            destination.discard()
        raise


def _fill(engine: RebuildEngine, origin: Dataset, destination: Dataset, on_event: EventFn,
          should_stop: Callable[[], bool] | None) -> IngestReport:
    """The marked target `destination` filled from `origin`'s originals, given its lineage state, embedded."""
    emit = on_event
    source, target = origin.name, destination.name
    catalogue = origin.reading()
    try:
        rows = catalogue.documents()
        state = catalogue.lineage_state()
        lineages = state.current
        ingested_at = {row.ref: row.ingested_at for row in rows}
        results: list[DocumentResult] = []
        batch: list[DocumentInput] = []
        size = 0
        for row in rows:
            data = catalogue.document_bytes(row.ref)
            if data is None:
                raise KxError(Status.DATA_LOSS, f"document {row.ref[:12]} ({row.name}) of '{source}' has no stored "
                                                "bytes; the catalogue is damaged: restore it from a backup")
            # under the name its lineage has now: a renamed file's earlier versions stay in its lineage
            name, source_path = state.shown(row.ref, row.name, row.source_path)
            batch.append(DocumentInput(name, data, source_path, row.media_type))
            size += len(data)
            if size >= BATCH_BYTES:
                results += _stage_one(engine, source, target, batch, emit)
                batch, size = [], 0
        if batch or not results:
            results += _stage_one(engine, source, target, batch, emit)
    finally:
        catalogue.close()
    if _holds_nothing(destination):  # nothing could be read again (every original refused under these settings)
        destination.discard()
        return IngestReport(target, results, False, 0, 0, [])
    with destination.writing(on_wait=lambda message: emit(Notice("waiting", message))) as written:
        # the source's lineage state: its current versions (an undo may have made an older one current)
        # and its retirements
        written.record_current([(name, ref, state.paths.get(name)) for name, ref in lineages.items()
                                if ref is not None])
        written.retire([name for name, ref in lineages.items() if ref is None])
        written.restore_ingested_at(ingested_at)
    report = engine.embed(target, on_event=emit, should_stop=should_stop)
    summary = report.dataset
    # an ingest's totals: the documents stored (every version), as `kx datasets ingest` reports them
    stored = summary.documents if summary.versions is None else summary.versions
    return IngestReport(target, results, True, stored, summary.passages, [])


def _stage_one(engine: RebuildEngine, source: str, target: str, batch: list[DocumentInput],
               emit: EventFn) -> list[DocumentResult]:
    """One batch through stage 1 (committed, keyword-searchable); its embedding is left to the end."""
    if not batch:
        return []
    report = engine.ingest(target, batch, on_event=emit, should_stop=lambda: True)
    return list(report.results)


def _mark(catalogue: Catalogue, source: str) -> None:
    catalogue.set_meta(REBUILT_FROM, source)


def _holds_nothing(dataset: Dataset) -> bool:
    catalogue = dataset.reading()
    try:
        return catalogue.counts()[0] == 0
    finally:
        catalogue.close()


def _read_mark(dataset: Dataset) -> str | None:
    catalogue = dataset.reading()
    try:
        return catalogue.meta(REBUILT_FROM)
    finally:
        catalogue.close()
