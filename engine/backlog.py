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
backlog at once. The dense graph is saved every DENSE_SAVE_SECONDS and at the
end, always up to the embedded prefix: queries meanwhile see dense results
for the passages embedded so far and say how much that covers.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Protocol

from .config import Settings
from .embedders import no_embedder_error
from .records import Notice, Progress

if TYPE_CHECKING:
    from .dataset import Dataset
    from .embedders import Embedder
    from .store import Catalogue

EventFn = Callable[[object], None]
StopFn = Callable[[], bool]

# The dense graph is rewritten whole on save (~0.05 s per 10k passages), so it is saved on a clock, not per chunk.
DENSE_SAVE_SECONDS = 10.0


# Progress is reported once per encode batch: a batch should take about this long, so the display moves
# at least every ~2 s however slow the CPU (a loaded 2-core machine embeds 2-3 passages/s, not 25).
BATCH_SECONDS = 1.5
_MIN_BATCH = 8  # smaller batches cost throughput (per-call overhead, a commit per chunk) more than they buy


def paced_batch(configured: int, passages: int, seconds: float) -> int:
    """The batch size for the next chunk: the configured one, smaller when a batch would take over BATCH_SECONDS."""
    if passages <= 0 or seconds <= 0:
        return configured
    fits = int(BATCH_SECONDS * passages / seconds)
    return max(min(configured, fits), min(_MIN_BATCH, configured))


def prepare_embedder(embedder: Embedder, emit: EventFn) -> None:
    """Load the model now if it loads lazily; a first use exports its ONNX graph, said through `emit`."""
    prepare = getattr(embedder, "prepare", None)
    if callable(prepare):
        prepare(lambda line: emit(Notice("preparing", line)))


class ModelSource(Protocol):
    settings: Settings

    def embedder(self) -> Embedder | None: ...


def embed_backlog(engine: ModelSource, dataset: Dataset, catalogue: Catalogue, emit: EventFn,
                  should_stop: StopFn | None = None) -> int:
    """Embed the dataset's backlog (all of it, unless `should_stop` says so between chunks); how many were embedded.

    Caller holds the write lock. The dense index also catches up with any
    vectors it lacks (a crash between a vector commit and a graph save).
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
    settings = engine.settings
    batch = settings.embed_batch_size
    done = 0
    emit(Progress("embedding", 0, waiting))
    last_save = time.monotonic()
    while should_stop is None or not should_stop():
        rows = catalogue.unembedded(max(batch * 8, 32))
        if not rows:
            break
        started = time.monotonic()
        def step(n: int) -> None:
            nonlocal done
            done = min(done + n, waiting)
            emit(Progress("embedding", done, waiting))

        vectors = embedder.encode([text for _seq, text in rows], batch_size=batch, progress=step)
        catalogue.store_vectors([seq for seq, _text in rows], vectors)
        batch = paced_batch(settings.embed_batch_size, len(rows), time.monotonic() - started)
        if time.monotonic() - last_save >= DENSE_SAVE_SECONDS:
            dataset.sync_dense(catalogue, dense=dense)
            last_save = time.monotonic()
    dataset.sync_dense(catalogue, dense=dense)
    emit(Progress("embedding", min(done, waiting), waiting))
    return done
