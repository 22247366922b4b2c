"""One dataset on disk: its folder, its write lock, its catalogue and indexes.

    $KX_HOME/datasets/<name>/
        catalog.sqlite   the source of truth (WAL)
        dense.voy        voyager graph + dense.json (watermark)
        sparse/          whoosh index + sparse.json (watermark)
        write.lock       one writer at a time

A name is a short slug checked before any path is built from it, so no name
can reach outside KX_HOME.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..config import Settings
from ..errors import not_found
from ..names import NAME_RE, validate_name
from .catalogue.schema import CatalogueEmpty
from .storage_errors import storage_errors
from .store import Catalogue

if TYPE_CHECKING:  # the indexes import numpy; listing datasets never opens them
    from .dense import DenseIndex
    from .sparse import SparseIndex

class Dataset:
    """One dataset's folder: the ingest target of the embedded backend (engine/ingest.py's IngestTarget).

    Passages may be committed before their vectors (the embedding backlog, engine/embedded/backlog.py).
    """

    def __init__(self, settings: Settings, name: str) -> None:
        self.name = validate_name(name)
        self.folder = settings.datasets_dir / self.name
        self.catalogue_path = self.folder / "catalog.sqlite"

    def exists(self) -> bool:
        return self.catalogue_path.exists()

    def require(self, settings: Settings) -> None:
        if not self.exists():
            names = list_dataset_names(settings)
            have = ", ".join(names) if names else "none yet"
            raise not_found(
                f"dataset '{self.name}' does not exist (datasets: {have}); "
                f"create it with: kx datasets ingest {self.name} --file FILE"
            )

    def storage_guard(self) -> contextlib.AbstractContextManager[None]:
        """A full disk or a damaged catalogue under this folder, told as a KxError."""
        return storage_errors(self.folder)

    @contextlib.contextmanager
    def writing(self, on_wait: Callable[[str], None] | None = None) -> Iterator[Catalogue]:
        """Hold the dataset's write lock and its catalogue, creating both if needed."""
        from filelock import FileLock, Timeout

        self.folder.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.folder / "write.lock"))
        try:
            lock.acquire(timeout=0.5)
        except Timeout:
            if on_wait is not None:
                on_wait(f"waiting for another writer to finish with dataset '{self.name}'")
            lock.acquire()
        try:
            catalogue = Catalogue(self.catalogue_path)
            try:
                yield catalogue
            finally:
                catalogue.close()
        finally:
            lock.release()

    def discard(self) -> None:
        """Remove a dataset that never received a document (its first ingest refused everything)."""
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)

    def reading(self) -> Catalogue:
        try:
            return Catalogue(self.catalogue_path, readonly=True)
        except CatalogueEmpty:
            if self._writer_busy():  # an ingest is creating it this instant: not damage, just nothing yet
                raise not_found(f"dataset '{self.name}' is being created by an ingest and holds no documents "
                                "yet; ask again in a moment") from None
            raise

    def _lock_if_free(self) -> Any:
        """The write lock, taken, when no writer holds it; None when one does. Never waits."""
        from filelock import FileLock, Timeout

        lock = FileLock(str(self.folder / "write.lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            return None
        return lock

    def _writer_busy(self) -> bool:
        try:
            lock = self._lock_if_free()
        except OSError:  # a read-only folder: nobody can be writing there
            return False
        if lock is None:
            return True
        lock.release()
        return False

    def dense(self, dimension: int, dataset_id: str = "") -> DenseIndex:
        """The dense index; with `dataset_id` (the catalogue's) it trusts only a graph made for this dataset."""
        from .dense import DenseIndex

        return DenseIndex(self.folder, dimension, dataset_id)

    def sparse(self, stopwords: bool, dataset_id: str = "") -> SparseIndex:
        from .sparse import SparseIndex

        return SparseIndex(self.folder, stopwords, dataset_id)

    def indexes_behind(self, catalogue: Catalogue) -> bool:
        """Whether an index holds less than the catalogue could give it (the dense one: what is embedded)."""
        fingerprint = catalogue.fingerprint()
        if fingerprint is None:
            return False
        dense = self.dense(fingerprint.dimension, catalogue.dataset_id)
        return (dense.watermark < catalogue.embedded_prefix() or not dense.consistent_with(catalogue)
                or self.sparse(fingerprint.stopwords, catalogue.dataset_id).watermark < catalogue.max_passage_seq()
                or not self.sparse(fingerprint.stopwords, catalogue.dataset_id).consistent_with(catalogue))

    def heal_if_behind(self) -> bool:
        """Catch the indexes up if a crash left them behind, unless a writer is busy.

        A busy writer will bring them up to date itself when it finishes; a
        reader never waits for it. Returns True when the indexes are current.
        """
        catalogue = self.reading()
        try:
            if not self.indexes_behind(catalogue):
                return True
        finally:
            catalogue.close()
        lock = self._lock_if_free()
        if lock is None:
            return False
        try:
            writable = Catalogue(self.catalogue_path)
            try:
                self.sync_indexes(writable)
            finally:
                writable.close()
        finally:
            lock.release()
        return True

    def sync_indexes(self, catalogue: Catalogue, on_stage: Callable[[str], None] | None = None) -> None:
        """Bring both derived indexes up to the catalogue. Caller holds the write lock.

        The dense index takes the embedded passages only (up to the catalogue's
        embedded prefix); the backlog's passages join it as they are embedded.
        """
        fingerprint = catalogue.fingerprint()
        if fingerprint is None:
            return
        self.sync_sparse(catalogue, on_stage)
        self.sync_dense(catalogue, on_stage)

    def sync_sparse(self, catalogue: Catalogue, on_stage: Callable[[str], None] | None = None,
                    on_progress: Callable[[int, int], None] | None = None) -> None:
        """Index every committed passage for keyword search. Caller holds the write lock.

        `on_progress(done, total)`: see SparseIndex.catch_up (a huge group's indexing, shown moving).
        """
        fingerprint = catalogue.fingerprint()
        if fingerprint is None:
            return
        top = catalogue.max_passage_seq()
        sparse = self.sparse(fingerprint.stopwords, catalogue.dataset_id)
        if not sparse.consistent_with(catalogue):  # a fork's index copied over: rebuild, never trust it
            sparse.forget()
        if sparse.watermark < top:
            if on_stage:
                on_stage("sparse")
            sparse.catch_up(catalogue, top, on_progress)

    def sync_dense(self, catalogue: Catalogue, on_stage: Callable[[str], None] | None = None,
                   dense: DenseIndex | None = None) -> None:
        """Add the embedded passages the dense graph lacks. Caller holds the write lock.

        `dense`: an index already loaded by the caller (the embedding stage keeps one across saves).
        """
        fingerprint = catalogue.fingerprint()
        if fingerprint is None:
            return
        upto = catalogue.embedded_prefix()
        dense = dense or self.dense(fingerprint.dimension, catalogue.dataset_id)
        if not dense.consistent_with(catalogue):  # an edited or foreign sidecar: rebuild, never trust it
            dense.forget()
        if dense.watermark < upto:
            if on_stage:
                on_stage("dense")
            dense.catch_up(catalogue, upto)


def list_dataset_names(settings: Settings) -> list[str]:
    root = settings.datasets_dir
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if NAME_RE.fullmatch(p.name) and (p / "catalog.sqlite").exists())
