"""Stage 2 of an ingest: embed a dataset's backlog, committing vectors and the dense graph as it goes.

Stage 1 (engine/ingest.py) commits documents and their passages with empty
vectors and indexes them for keyword search at once; the passages without
vectors are the dataset's embedding backlog, kept in the catalogue (not in a
process), so any later writer finishes it: the next ingest, `kx datasets
embed`, the watcher, `kx serve` or the TUI.

The backlog is worked through in seq order, a chunk at a time. Each chunk's
vectors are ONE catalogue transaction (a kill loses at most the chunk in
hand, never a committed vector), and a passage that already has a vector is
never overwritten, so nothing is embedded twice even across crashes. The
caller holds the dataset's write lock, so two processes never embed the same
backlog at once. The dense graph is saved every DENSE_SAVE_SECONDS (longer once
writing it takes long: SAVE_SHARE) and at the end, always up to the embedded
prefix: queries meanwhile see dense results for the passages embedded so far
and say how much that covers.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Protocol

from ..config import Settings
from ..embedding.embedders import no_embedder_error
from ..embedding.host import prepare_embedder
from ..errors import KxError, Status
from ..records import IngestEvent, Progress
from ..records import IngestEventFn as EventFn

if TYPE_CHECKING:
    from ..embedding.embedders import Embedder
    from .dataset import Dataset
    from .dense import DenseIndex
    from .store import Catalogue

StopFn = Callable[[], bool]

# The dense graph is rewritten whole on save (~0.05 s per 10k passages), so it is saved on a clock, not per chunk.
DENSE_SAVE_SECONDS = 10.0
# ... and at least this many times its last save's duration apart: a million passages' graph (1.6 GB written,
# fsynced and checksummed) takes seconds to save, and a fixed 10 s clock would spend a third of stage two on
# saves. Passages embedded since the last save are never lost (their vectors are committed; the next save or
# open adds them); only a reader's dense list waits a little longer for them.
SAVE_SHARE = 4.0


# Progress is reported once per encode batch: a batch should take about this long, so the display moves
# at least every ~2 s however slow the CPU (a loaded 2-core machine embeds 2-3 passages/s, not 25).
BATCH_SECONDS = 1.5
_MIN_BATCH = 4  # a batch of 4 still keeps ONNX Runtime busy; smaller ones cost more per call than they buy


def save_interval(last_save_seconds: float) -> float:
    """Seconds from one graph save to the next: the clock, or longer when writing the file takes a share of it."""
    return max(DENSE_SAVE_SECONDS, SAVE_SHARE * last_save_seconds)


def paced_batch(configured: int, passages: int, seconds: float) -> int:
    """The batch size for the next chunk: the configured one, smaller when a batch would take over BATCH_SECONDS."""
    if passages <= 0 or seconds <= 0:
        return configured
    fits = int(BATCH_SECONDS * passages / seconds)
    return max(min(configured, fits), min(_MIN_BATCH, configured))


def chunk_rows(batch: int, in_flight: int = 1) -> int:
    """Passages per backlog chunk: 8 batches, and at least two per request a served model keeps in flight
    (engine/embedding/served.py), so every request slot stays busy until the chunk's last wave."""
    return max(batch * max(8, 2 * in_flight), 32)


class ModelSource(Protocol):
    settings: Settings

    def embedder(self) -> Embedder | None: ...


class _Chunks:
    """Works through the backlog a chunk at a time: encode, commit the chunk's vectors, save the graph on a clock.

    A chunk is one catalogue transaction, so a kill loses at most the chunk in hand.
    """

    def __init__(self, engine: ModelSource, dataset: Dataset, catalogue: Catalogue, embedder: Embedder,
                 emit: EventFn, dense: DenseIndex) -> None:
        self.engine, self.dataset, self.catalogue, self.embedder = engine, dataset, catalogue, embedder
        self.emit, self.dense = emit, dense
        self.batch = engine.settings.embed_batch_size
        self.done = 0
        self.last_save = time.monotonic()
        self.save_wait = DENSE_SAVE_SECONDS

    def next(self, total: Callable[[], int], interrupt: StopFn | None = None) -> bool:
        """Embed and commit the next chunk; False when nothing waits. `total`: the figure progress counts towards.

        `interrupt` is asked after every encode batch: True abandons the chunk in hand (nothing of it is
        committed; the next writer embeds it), so a stop never waits for a whole chunk.
        """
        rows = self.catalogue.unembedded(chunk_rows(self.batch, getattr(self.embedder, "in_flight", 1)))
        if not rows:
            return False
        goal = total()
        started = time.monotonic()

        def step(n: int) -> None:
            self.done = min(self.done + n, goal)
            self.emit(Progress("embedding", self.done, goal))
            if interrupt is not None and interrupt():
                raise _Interrupted

        before = self.done
        try:
            vectors = self.embedder.encode([text for _seq, text in rows], batch_size=self.batch, progress=step)
        except _Interrupted:
            self.done = before  # the chunk in hand was not committed
            return False
        except KxError as exc:
            if exc.status is not Status.UNAVAILABLE:
                raise
            # a served model's server went away: what is committed stays, and says how to finish
            raise KxError(exc.status, f"{exc.message}. Dataset '{self.dataset.name}' keeps every passage "
                                      f"committed ({self.catalogue.backlog():,} still wait for vectors; keyword "
                                      "search covers them all); when the model answers again, "
                                      f"`kx datasets embed {self.dataset.name}` (or the next ingest) "
                                      "embeds the rest") from None
        self.catalogue.store_vectors([seq for seq, _text in rows], vectors)
        self.batch = paced_batch(self.engine.settings.embed_batch_size, len(rows), time.monotonic() - started)
        if time.monotonic() - self.last_save >= self.save_wait:
            self.save()
        return True

    def save(self) -> None:
        self.dataset.sync_dense(self.catalogue, dense=self.dense)
        self.last_save = time.monotonic()
        # the file's writing alone: the graph adds in the same call grow with the interval itself
        self.save_wait = save_interval(self.dense.save_seconds)


class _Interrupted(Exception):
    """Raised between two encode batches to abandon the chunk in hand."""


def embed_backlog(engine: ModelSource, dataset: Dataset, catalogue: Catalogue, emit: EventFn,
                  should_stop: StopFn | None = None, already: int = 0) -> int:
    """Embed the dataset's backlog (all of it, unless `should_stop` says so between chunks); how many were embedded.

    Caller holds the write lock. The dense index also catches up with any
    vectors it lacks (a crash between a vector commit and a graph save).
    `already`: passages this command embedded before (stage 2 beside stage 1), so progress counts on.
    """
    waiting = catalogue.backlog()
    fingerprint = catalogue.fingerprint()
    if fingerprint is None:
        return 0
    dense = dataset.dense(fingerprint.dimension, catalogue.dataset_id)
    if not waiting:
        dataset.sync_dense(catalogue, dense=dense)
        return 0
    embedder = engine.embedder()
    if embedder is None:
        raise no_embedder_error(f"embedding the {waiting} passages that wait for vectors")
    prepare_embedder(embedder, emit)
    chunks = _Chunks(engine, dataset, catalogue, embedder, emit, dense)
    chunks.done = already
    goal = already + waiting
    emit(Progress("embedding", already, goal))
    while (should_stop is None or not should_stop()) and chunks.next(lambda: goal):
        pass
    chunks.save()
    emit(Progress("embedding", chunks.done, goal))
    return chunks.done - already


class BesideStage1:
    """Stage 2 on a thread of its own while stage 1 still reads: the model embeds while extraction goes on.

    Started by stage 1's first commit to the backlog (a command whose documents
    all come back unchanged never loads the model). The thread loads the model
    (a first use exports it), then embeds each group as stage 1 commits it,
    on its own catalogue connection (WAL: stage 1's commits and these vector
    commits interleave), under the write lock the command holds. Its events go
    through `emit` one at a time with stage 1's. `finish()` waits for the
    backlog to run dry once stage 1 is done and re-raises what went wrong in
    the thread, so the caller decides (e.g. an unusable model); `stop()`
    abandons the chunk in hand (always called before the lock is let go: an
    ONNX Runtime thread still running at interpreter exit aborts the process).
    """

    def __init__(self, engine: ModelSource, dataset: Dataset, emit: EventFn, should_stop: StopFn | None) -> None:
        import threading

        self.engine, self.dataset, self.should_stop = engine, dataset, should_stop
        self._lock = threading.Lock()
        self._emit = emit
        self._wake = threading.Event()
        self._closing = False   # stage 1 is done: leave when the backlog is empty
        self._stopping = False  # leave now, abandoning the chunk in hand
        self.error: BaseException | None = None
        self.embedded = 0
        self._thread: threading.Thread | None = None

    def emit(self, event: IngestEvent) -> None:
        """Stage 1's and stage 2's events, one at a time, to the command's one consumer."""
        with self._lock:
            self._emit(event)

    def start(self) -> None:
        import threading

        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kx-embed", daemon=True)
            self._thread.start()
        self._wake.set()  # a group was committed: there is something to embed

    def raise_if_stopped(self) -> None:
        """Stage 1 asks this after each commit: a stop asked through an event (the caller's) ends it too.

        A KxError (say, a model that cannot load) waits for finish(): stage 1's commits stay useful for
        keyword search, and the caller decides what a model failure means for the dataset.
        """
        if self.error is not None and not isinstance(self.error, KxError):
            raise self.error

    def complete(self, catalogue: Catalogue) -> int:
        """Stage 1 is done: wait for this thread's share, then embed what is left on the caller's thread."""
        return embed_backlog(self.engine, self.dataset, catalogue, self.emit, self.should_stop, self.finish())

    def finish(self) -> int:
        """Stage 1 is done: wait until the thread has embedded what waits (or stopped); re-raise its failure."""
        self._closing = True
        self._wake.set()
        self._join()
        if self.error is not None:
            raise self.error
        return self.embedded

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._join()

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def _interrupted(self) -> bool:
        return self._stopping or (self.should_stop is not None and self.should_stop())

    def _run(self) -> None:
        from .store import Catalogue

        catalogue = None
        try:
            embedder = self.engine.embedder()
            if embedder is None:
                raise no_embedder_error("ingesting text")
            prepare_embedder(embedder, self.emit)
            catalogue = Catalogue(self.dataset.catalogue_path)
            fingerprint = catalogue.fingerprint()
            if fingerprint is None:
                return
            dense = self.dataset.dense(fingerprint.dimension, catalogue.dataset_id)
            chunks = _Chunks(self.engine, self.dataset, catalogue, embedder, self.emit, dense)
            # the backlog grows while stage 1 commits: progress counts towards its size at each chunk
            goal = lambda: chunks.done + catalogue.backlog()  # noqa: E731
            while not self._interrupted():
                self._wake.clear()
                if chunks.next(goal, self._interrupted):
                    self.embedded = chunks.done
                    continue
                if self._closing or self._interrupted():
                    break
                self._wake.wait(0.5)
            self.embedded = chunks.done
            chunks.save()
        except BaseException as exc:  # handed to stage 1's thread by raise_if_failed() / finish()
            self.error = exc
        finally:
            if catalogue is not None:
                catalogue.close()
