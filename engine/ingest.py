"""Ingest: documents in, durable passages out, searchable by keyword at once, embedded behind.

Stage 1: documents -> refs (sha256; seen before -> "unchanged") -> text (in
extraction worker processes, streamed) -> passages with provenance (chunk,
character range, pages, section path) -> one catalogue transaction per group
of documents (the durable point), each group indexed for keyword search as
soon as it lands. A group closes at `ingest_commit_passages` passages or
after COMMIT_SECONDS, so the first documents answer within seconds.

Stage 2 (engine/embedded/backlog.py): the passages committed without vectors (the
dataset's embedding backlog, durable in the catalogue) are embedded in
chunks, and the dense graph follows. A stop anywhere loses nothing
committed; the next writer finishes the backlog.

A backend whose store cannot hold passages without vectors (Milvus: its
`defers_embedding` is False) embeds each group before committing it.
A document that cannot be read is refused on its own; the rest go in.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterable, Protocol, Sequence

import numpy as np

from .config import Settings
from .dataset_settings import MODEL_SETTING_KEY
from .embedding.cards import ModelCard, chat_model_advisory
from .embedding.embedders import no_embedder_error
from .embedding.host import prepare_embedder
from .errors import KxError, Status, invalid
from .extract import Extracted, extract_many, page_span, section_path
from .fingerprint import Fingerprint, check_compatible, current_fingerprint
from .names import validate_name
from .records import (
    DocumentResult,
    DocumentStatus,
    IngestEvent,
    IngestReport,
    Notice,
    Progress,
)
from .records import IngestEventFn as EventFn
from .rows import DocumentRow, NewDocument, NewPassage, passage_ref
from .text.chunking import chunk_text
from .text.inputs import DocumentInput, with_a_storable_name
from .text.kx_files import refuse_the_token
from .vectors import checked_vectors

if TYPE_CHECKING:
    from .embedding.embedders import Embedder

StopFn = Callable[[], bool]

# A commit group closes after this long even when small, so the first documents are searchable within seconds.
COMMIT_SECONDS = 2.0
# A step on one document (cutting it, indexing its passages) reports its own progress at most this often; a
# step shorter than this reports nothing, so only large documents ever do.
PART_SECONDS = 0.5


class IngestEngine(Protocol):
    """What an ingest needs of the engine: its settings and its model (loaded on first use)."""

    settings: Settings

    def model_card(self) -> ModelCard | None: ...

    def embedder(self) -> Embedder | None: ...


class IngestCatalogue(Protocol):
    """What an ingest writes through, under the target's write lock: the embedded SQLite catalogue
    (engine/embedded/store.py) or Milvus's (engine/milvus/store.py)."""

    def fingerprint(self) -> Fingerprint | None: ...

    def known_refs(self, refs: Sequence[str]) -> set[str]: ...

    def document(self, ref: str) -> DocumentRow | None: ...

    def commit_documents(self, documents: Sequence[NewDocument], vectors: np.ndarray | None,
                         fingerprint: Fingerprint) -> None:
        """One group, durably; `vectors` None only for a target with a stage two (the embedding backlog)."""
        ...

    def record_current(self, pairs: Sequence[tuple[str, str, str | None]]) -> int: ...

    def counts(self) -> tuple[int, int]: ...


class IngestTarget(Protocol):
    """Where an ingest's documents go: the embedded `Dataset` (engine/embedded/dataset.py) or `MilvusDataset`."""

    def exists(self) -> bool: ...

    def writing(self, on_wait: Callable[[str], None] | None = None) -> ContextManager[Any]:
        """Hold the write lock and yield the catalogue (an IngestCatalogue), creating the dataset if needed."""
        ...

    def storage_guard(self) -> ContextManager[None]:
        """Storage failures (a full disk, a damaged file) told as KxErrors while the ingest runs."""
        ...

    def sync_sparse(self, catalogue: Any, on_stage: Callable[[str], None] | None = None,
                    on_progress: Callable[[int, int], None] | None = None) -> None:
        """Keyword search catches up with the committed passages (nothing to do where the store indexes rows)."""
        ...

    def sync_dense(self, catalogue: Any) -> None:
        """The dense index catches up with the stored vectors (nothing to do where the store indexes rows)."""
        ...

    def sync_indexes(self, catalogue: Any, on_stage: Callable[[str], None] | None = None) -> None: ...

    def discard(self) -> None:
        """Remove what a first ingest that stored nothing left behind."""
        ...


class StageTwo(Protocol):
    """The embedding backlog embedded beside stage 1 (engine/embedded/backlog.py's BesideStage1)."""

    def emit(self, event: IngestEvent) -> None:
        """Both stages' events, one at a time, to the caller."""
        ...

    def start(self) -> None:
        """A group was committed without vectors: embed it (loading the model the first time)."""
        ...

    def raise_if_stopped(self) -> None: ...

    def complete(self, catalogue: Any) -> int:
        """Stage 1 is done: embed the rest of the backlog; how many passages were embedded."""
        ...

    def stop(self) -> None:
        """Abandon the chunk in hand (always called before the write lock is let go)."""
        ...


# A target that commits passages before their vectors comes with its stage two: (engine, target, emit,
# should_stop) -> StageTwo. One that needs each row's vector (Milvus) has none: each group is embedded first.
StageTwoFactory = Callable[[IngestEngine, Any, EventFn, StopFn | None], StageTwo]


@dataclass
class _Prepared:
    position: int
    document: NewDocument
    vector: np.ndarray | None  # the caller's own vector, when given
    extracted: Extracted       # the text and structure the passages were cut from


def run_ingest(
    engine: IngestEngine,
    name: str,
    documents: Iterable[DocumentInput],
    vectors: Sequence[Sequence[float]] | np.ndarray | None = None,
    on_event: EventFn | None = None,
    *,
    target: IngestTarget,
    stage_two: StageTwoFactory | None = None,
    should_stop: StopFn | None = None,
) -> IngestReport:
    """Add documents to dataset `name`, creating it on first use, then embed its backlog.

    With `vectors`, each document is one passage with the caller's vector
    (no model needed). Documents that cannot be read are refused one by
    one; the rest go in. Raises only for what stops the whole command: a
    bad name, no model, or an incompatible fingerprint. `should_stop` is
    asked between embedding chunks: True leaves the rest of the backlog to
    the next writer (nothing committed is lost).

    `target` is where the documents go (the embedded `Dataset`, Milvus's
    `MilvusDataset`); `stage_two`, given by a backend whose catalogue holds
    passages without vectors, embeds them behind stage 1.
    """
    emit = on_event or (lambda _event: None)
    validate_name(name)
    # whatever door they came through, no document may carry the gateway's token (engine/text/kx_files.py)
    docs = refuse_the_token([with_a_storable_name(doc) for doc in documents], engine.settings.home)
    given = None if vectors is None else checked_vectors(vectors, len(docs), "one vector per document")
    card = _card_for_ingest(engine, given)
    if given is None and card is None:
        raise no_embedder_error("ingesting text")
    if card is not None and card.causal_lm:
        emit(Notice("advisory", chat_model_advisory(card)))
    dimension = given.shape[1] if given is not None else card.dimension  # type: ignore[union-attr]  # card set: checked above
    model_card = card if card is not None and card.dimension == dimension else None
    current = current_fingerprint(engine.settings, model_card, dimension)

    dataset = target
    created = not dataset.exists()
    if created and docs and all(doc.error is not None for doc in docs):
        # refused as a whole (nothing readable): no dataset is made and nothing stored is touched
        refusals = [_refused(doc, doc.error) for doc in docs if doc.error is not None]
        for result in refusals:
            emit(result)
        return IngestReport(name, refusals, False, 0, 0, [])
    # stage 2 runs beside stage 1 from its first commit: the model loads (a first use exports it) and then
    # embeds while extraction goes on in its worker processes; no wait before the first keyword answer
    beside = stage_two(engine, dataset, emit, should_stop) if given is None and stage_two is not None else None
    if beside is not None:
        emit = beside.emit  # both stages' events reach the caller one at a time
    run = _Run(engine, name, dataset, docs, given, card, current, emit, stage_two is not None, beside)
    try:
        # storage failures become KxErrors here already, so a full disk can be told with what went in first
        with dataset.storage_guard(), \
                dataset.writing(on_wait=lambda message: emit(Notice("waiting", message))) as catalogue:
            run.write(catalogue)
    except KxError as exc:
        added = sum(1 for r in run.results if r is not None and r.status == DocumentStatus.ADDED)
        if exc.status is Status.RESOURCE_EXHAUSTED and added:
            raise KxError(exc.status, f"{exc.message}. Before that, this command committed {added} document(s) "
                                      "to the catalogue; they stay, and what their indexes lack is completed "
                                      "from the catalogue by the next command on this dataset") from None
        raise
    finally:
        if created and run.stored_nothing():
            # nothing went in (all refused, or a failure before the first commit): leave no empty
            # dataset behind. A failure or a stop AFTER a commit keeps the dataset: its documents are in.
            dataset.discard()
    advisories = [chat_model_advisory(card)] if card is not None and card.causal_lm else []
    return IngestReport(name, [r for r in run.results if r is not None], created and run.totals[0] > 0,
                        run.totals[0], run.totals[1], advisories)


class _Run:
    """One ingest's work under the dataset's write lock, and what it leaves for `run_ingest`'s clean-up
    (the results so far, the totals, whether the model proved unusable) even when it raises."""

    def __init__(self, engine: IngestEngine, name: str, dataset: Any, docs: list[DocumentInput],
                 given: np.ndarray | None, card: ModelCard | None, current: Fingerprint, emit: EventFn,
                 has_stage_two: bool, beside: StageTwo | None) -> None:
        self.engine, self.name, self.dataset, self.docs = engine, name, dataset, docs
        self.given, self.card, self.current, self.emit = given, card, current, emit
        self.has_stage_two, self.beside = has_stage_two, beside
        self.results: list[DocumentResult | None] = [None] * len(docs)
        self.committer: _Committer | None = None
        self.totals = (0, 0)
        self.unusable_model = False

    def write(self, catalogue: Any) -> None:
        engine, dataset, beside, given = self.engine, self.dataset, self.beside, self.given
        stored = catalogue.fingerprint()
        if stored is not None:
            _check_stored(self.name, stored, self.current, given is not None, engine)
        elif given is None and hasattr(catalogue, "set_meta") and _named_by_setting(engine.settings, self.card):
            # the model as the setting that named it: later commands use it unless told otherwise
            catalogue.set_meta(MODEL_SETTING_KEY, engine.settings.embed_model)
        committer = self.committer = _Committer(engine, dataset, catalogue, stored or self.current, self.results,
                                                self.emit, self.has_stage_two, len(self.docs), beside)
        try:
            _prepare(engine.settings, self.docs, given, catalogue, self.results, self.emit, committer)
            committer.flush()
            if committer.defers:  # a stop or a crash during an earlier command's keyword indexing: finish it
                dataset.sync_sparse(catalogue, on_progress=committer.part("indexing for keyword search"))
            # stored bytes offered again are their lineage's current version (a new name takes them on)
            catalogue.record_current(committer.revived)
            self.totals = catalogue.counts()
            if beside is not None:
                try:
                    beside.complete(catalogue)
                except KxError as exc:
                    # the model cannot embed: a dataset this command created would be pinned to it for
                    # good (its fingerprint), so it goes; an existing one keeps its commits as a backlog
                    self.unusable_model = exc.status is Status.FAILED_PRECONDITION
                    raise
            elif committer.defers:  # the caller's vectors: no model was checked against the dataset's
                dataset.sync_dense(catalogue)
            else:
                dataset.sync_indexes(catalogue, on_stage=lambda stage: self.emit(Progress(f"indexing {stage}", 0, 1)))
        finally:
            if beside is not None:
                beside.stop()  # before the lock is let go; never leave ONNX Runtime running at exit

    def stored_nothing(self) -> bool:
        """Whether the model proved unusable, or nothing is in the dataset and nothing was committed or added."""
        committed = self.committer is not None and self.committer.stored > 0  # if not yet reported (a stop)
        return self.unusable_model or self.totals[0] == 0 and not committed and not any(
            r is not None and r.status == DocumentStatus.ADDED for r in self.results)


def _named_by_setting(settings: Settings, card: ModelCard | None) -> bool:
    """Whether `card` is the model settings.embed_model names (not an embedder a caller handed in)."""
    from .embedding.cards import model_card_for
    from .setting_values import served_model

    if served_model(settings.embed_model):   # its card came from the server the setting names
        return card is not None
    try:
        named = model_card_for(settings.embed_model)
    except KxError:
        return False
    return card is not None and named is not None and named.model_id == card.model_id


def _card_for_ingest(engine: IngestEngine, given: np.ndarray | None) -> ModelCard | None:
    if given is None:
        return engine.model_card()
    try:  # bringing your own vectors must work without a usable model
        return engine.model_card()
    except KxError:
        return None

def _check_stored(name: str, stored: Fingerprint, current: Fingerprint, own_vectors: bool,
                  engine: IngestEngine) -> None:
    if own_vectors:
        if stored.dimension != current.dimension:
            raise invalid(
                f"dataset '{name}' holds {stored.dimension}-dimensional vectors but the given vectors have "
                f"{current.dimension}; pass vectors from the dataset's model ({stored.embed_model})"
            )
        return
    recorded = getattr(engine, "recorded_model_setting", None)   # the embedded engine's (dataset_settings.py)
    check_compatible(name, stored, current, settings=engine.settings,
                     model_setting=recorded(name) if recorded is not None else None)

def _prepare(settings: Settings, docs, given, catalogue, results, emit, committer: _Committer) -> None:
    """Read, extract and cut each new document, handing each to `committer` as soon as it is cut."""
    known = catalogue.known_refs([d.ref for d in docs if d.error is None])
    # Each new ref is extracted once, in worker processes that run ahead of the loop below.
    first_of: dict[str, DocumentInput] = {}
    for doc in docs:
        if doc.error is None and doc.ref not in known:
            first_of.setdefault(doc.ref, doc)
    # a generator: close() stops its workers; a worker's news on a long document (OCR, page by page) shows as
    # the reading stage's part
    extractions = extract_many(first_of.values(), settings, on_progress=committer.worker_news)
    try:
        _cut(settings, docs, given, catalogue, results, emit, known, extractions, committer)
    finally:
        extractions.close()  # type: ignore[attr-defined]  # stops the extraction workers, also on an error


def _cut(settings: Settings, docs, given, catalogue, results, emit, known, extractions,
         committer: _Committer) -> None:
    seen: dict[str, int] = {}  # ref -> passages, for documents cut in this command
    refused: dict[str, tuple[str, KxError]] = {}  # ref -> (the label its reason names, the reason)
    for position, doc in enumerate(docs):
        committer.read_one()
        if doc.error is not None:
            results[position] = _refused(doc, doc.error)
            emit(results[position])
            continue
        ref = doc.ref
        if ref in refused:  # the same bytes as a document refused above: the same reason, told of this one
            first, exc = refused[ref]
            label = doc.source_path or doc.name
            if exc.message.startswith(first) and label != first:  # reasons begin with the file they refuse
                exc = KxError(exc.status, label + exc.message[len(first):])
            results[position] = _refused(doc, exc)
            emit(results[position])
            continue
        if ref in known or ref in seen:
            row = catalogue.document(ref)
            passages = row.passage_count if row else seen[ref]
            if row is not None or ref in seen:  # current again for its lineage (or taken on by a new name)
                committer.revived.append((doc.name, ref, doc.source_path))
            results[position] = DocumentResult(doc.name, DocumentStatus.UNCHANGED, ref, passages, doc.source_path)
            emit(results[position])
            continue
        try:
            extracted = next(extractions)[1]
            if isinstance(extracted, KxError):
                raise extracted
        except KxError as exc:
            refused[ref] = (doc.source_path or doc.name, exc)
            results[position] = _refused(doc, exc)
            emit(results[position])
            continue
        text = extracted.text
        if given is not None:
            spans = [(0, len(text), text, 0, 1)]
        else:
            chunks = chunk_text(text, settings.chunk_size, settings.chunk_overlap,
                                on_progress=committer.part(f"cutting {doc.name} into passages"))
            spans = [(c.start, c.end, c.text, c.index, c.count) for c in chunks]
        seen[ref] = len(spans)
        committer.add(_Prepared(
            position,
            _new_document(doc, ref, extracted, spans),
            None if given is None else given[position],
            extracted,
        ))

def _new_document(doc: DocumentInput, ref: str, extracted: Extracted, spans) -> NewDocument:
    """The document as the catalogue keeps it: its passages with pages and section, its text and title."""
    passages = []
    for s, e, t, i, n in spans:
        first, last = page_span(extracted.page_starts, s, e)
        passages.append(NewPassage(passage_ref(ref, s, e), i, n, s, e, t, first, last,
                                   section_path(extracted.sections, s)))
    # the type the bytes were read as (a DOCX named .pdf is a DOCX), which `--where type:` and listings show
    media_type = extracted.media_type or doc.media_type
    return NewDocument(ref, doc.name, doc.source_path, media_type, doc.data, len(extracted.text), passages,
                       text=extracted.text, title=extracted.title, page_count=extracted.page_count,
                       extractor=extracted.extractor or None, notes=extracted.notes)

class _Committer:
    """Groups cut documents and commits each group: to the backlog (two stages) or with its vectors."""

    def __init__(self, engine: IngestEngine, dataset: IngestTarget, catalogue: IngestCatalogue,
                 fingerprint: Fingerprint, results: list[DocumentResult | None], emit: EventFn, defers: bool,
                 documents: int, beside: StageTwo | None = None) -> None:
        self.engine, self.dataset, self.catalogue, self.fingerprint = engine, dataset, catalogue, fingerprint
        self.beside = beside
        self.results, self.emit, self.defers = results, emit, defers
        self.group: list[_Prepared] = []
        self.size = 0
        self.opened = time.monotonic()
        self.documents, self.read, self.committed = documents, 0, 0
        self.embedded = 0  # single-stage backends: passages embedded so far
        self.stored = 0    # documents in the catalogue (committed), reported "added" or not yet
        self.revived: list[tuple[str, str, str | None]] = []  # (lineage, ref, source path) of unchanged documents
        self._shown = 0    # the `done` of the last reading event

    def read_one(self) -> None:
        self._reading(self.read)
        self.read += 1

    def _reading(self, done: int, **part: Any) -> None:
        self._shown = done
        self.emit(Progress("reading", done, self.documents, unit="documents", passages=self.committed, **part))

    def worker_news(self, message: str, done: int, total: int) -> None:
        """An extraction worker's report on the document it reads ("reading scan.pdf: OCR page 3/12")."""
        self._reading(self._shown, part=message, part_done=min(done, total), part_total=total)

    def part(self, label: str) -> Callable[[int, int], None]:
        """A progress callback for one long step on one document (`label`), reported at most every PART_SECONDS.

        Events go through `emit` like every other, so a stop asked for meanwhile is honoured there too
        (the CLI raises from its event handler): nothing of the step is committed yet, or it is
        committed whole and only its derived index is left for the next writer.
        """
        started = last = time.monotonic()

        def report(done: int, total: int) -> None:
            nonlocal last
            now = time.monotonic()
            if now - last >= PART_SECONDS or (done >= total and now - started >= PART_SECONDS):
                last = now
                self._reading(self._shown, part=label, part_done=min(done, total), part_total=total)

        return report

    def add(self, item: _Prepared) -> None:
        if not self.group:
            self.opened = time.monotonic()
        self.group.append(item)
        self.size += len(item.document.passages)
        if (self.size >= self.engine.settings.ingest_commit_passages
                or time.monotonic() - self.opened >= COMMIT_SECONDS):
            self.flush()

    def flush(self) -> None:
        if self.group:
            group, self.group, size, self.size = self.group, [], self.size, 0
            own = group[0].vector is not None
            if self.defers and not own:
                vectors = None  # stage 2 embeds them (engine/embedded/backlog.py)
            else:
                vectors = _vectors_for(self.engine, group, self.embedded, self.embedded + size, self.emit)
                self.embedded += size
            self.catalogue.commit_documents([p.document for p in group], vectors, self.fingerprint)
            self.stored += len(group)
            try:
                if self.defers:  # keyword-searchable now, group by group (a failure here leaves a backlog)
                    self.dataset.sync_sparse(self.catalogue, on_progress=self.part(
                        f"indexing {size:,} passages for keyword search"))
                if self.beside is not None:
                    self.beside.raise_if_stopped()  # a stop asked through an event in the embedding thread
                    self.beside.start()            # embed this group (and load the model the first time)
            except BaseException:
                # committed all the same: a stop or a full disk here must not leave the group unreported (a
                # stopped `ingest --json` counted fewer documents than the catalogue held)
                self._report(group, size)
                raise
            self._report(group, size)
        self._reading(self.read)

    def _report(self, group: list[_Prepared], size: int) -> None:
        """Every document of a committed group reported added, even when the caller's handler raises on one of
        them (a stop): the rest still reach it, and the first error is raised after the last."""
        self.committed += size
        failed: BaseException | None = None
        for p in group:
            doc = p.document
            added = DocumentResult(doc.name, DocumentStatus.ADDED, doc.ref, len(doc.passages), doc.source_path)
            self.results[p.position] = added
            try:
                self.emit(added)
            except BaseException as exc:  # noqa: BLE001 - re-raised below, once every result is out
                failed = failed or exc
        if failed is not None:
            raise failed


def _vectors_for(engine: IngestEngine, group: list[_Prepared], done: int, total: int, emit: EventFn) -> np.ndarray:
    if group[0].vector is not None:
        # the caller's vectors come for every document of an ingest or for none (checked_vectors)
        return np.stack([p.vector for p in group]).astype(np.float32)  # type: ignore[misc]
    embedder = engine.embedder()
    if embedder is None:
        raise no_embedder_error("ingesting text")
    texts = [passage.text for p in group for passage in p.document.passages]
    progressed = done

    def progress(n: int) -> None:
        nonlocal progressed
        progressed += n
        emit(Progress("embedding", progressed, total))

    prepare_embedder(embedder, emit)
    emit(Progress("embedding", done, total))
    return embedder.encode(texts, batch_size=engine.settings.embed_batch_size, progress=progress)


def _refused(doc: DocumentInput, error: KxError) -> DocumentResult:
    return DocumentResult(doc.name, DocumentStatus.REFUSED, None, 0, doc.source_path, error.status.name, error.message)
