"""Documents to text: one interface for every format kx reads.

`extract(doc)` turns a document's bytes into an `Extracted`: the text that
passages are cut from (character ranges index into it, forever), where each
page begins (paged formats), the headings that give section paths, and the
document's own title. `extract_many` does the same for a stream of
documents. A document that cannot be read raises (or yields) a `KxError`
with the reason a user can act on.

The formats are declared once, in engine/formats.py; which one a document
is comes from its bytes (engine/extract/detect.py). Plain text, JSONL
records, Markdown and CSV/TSV are read in-process (cheap, and no parser to
crash); PDF, Office, HTML, EPUB and images go to worker processes with a
time and a memory limit (engine/extract/pool.py), so a hostile file is
refused and the rest go in. `EXTRACTORS` maps each of those formats to its
extractor by import path ("module:function" taking `(data, label, limits)`,
as the registry names it); the worker
imports it, which keeps every parser out of the commands that never read a
document, and lets a test substitute an extractor that hangs or crashes.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from ..errors import KxError
from ..formats import DELIMITED, FORMATS, MARKDOWN
from ..text.inputs import DocumentInput, extract_text
from .base import Extracted, Limits, Section, page_span, section_path
from .detect import detect_format

if TYPE_CHECKING:
    from ..config import Settings

__all__ = ["EXTRACTORS", "Extracted", "Limits", "Section", "extract", "extract_many", "page_span", "section_path"]

EXTRACTOR_VERSION = "text/1"

# the formats read in worker processes, by import path (engine/formats.py says which); a test may swap one
EXTRACTORS: dict[str, str] = {fmt: spec.extractor for fmt, spec in FORMATS.items() if spec.extractor}


def limits_for(settings: Settings | None) -> Limits:
    if settings is None:
        return Limits()
    from ..config import OcrMode, cores

    return Limits(max_pages=settings.extract_max_pages,
                  max_unpacked_bytes=settings.extract_max_unpacked_mb * 2**20,
                  ocr=settings.ocr != OcrMode.OFF,
                  # the workers share the cores: a lone scan uses one per worker, a folder of them all
                  ocr_threads=max(1, cores() // max(1, settings.extract_workers)),
                  timeout=settings.extract_timeout)


def extract(doc: DocumentInput, settings: Settings | None = None) -> Extracted:
    """The document's text and structure, read in this process; raises KxError when it cannot be read.

    No time or memory limit applies here: ingest goes through `extract_many`, which isolates parsers.
    """
    fmt = detect_format(doc)
    if fmt in EXTRACTORS:
        from .worker import resolve

        return resolve(EXTRACTORS[fmt])(doc.data, doc.source_path or doc.name, limits_for(settings))
    return _in_process(doc, fmt)


def extract_many(
    docs: Iterable[DocumentInput], settings: Settings | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> Iterator[tuple[DocumentInput, Extracted | KxError]]:
    """Each document with its extraction or the error that refused it, in input order.

    Runs ahead in worker processes (up to `extract_workers` at once, each document under
    `extract_timeout` and `extract_memory_mb`), so the caller can work while the next
    documents are read. Workers are started only when a document needs one, and stopped
    when the iterator is exhausted or closed. `on_progress(message, done, total)` hears a worker's
    reports on a long document ("reading scan.pdf: OCR page 3/12").
    """
    from ..config import load_settings

    settings = settings or load_settings()
    limits = limits_for(settings)
    pending: deque[DocumentInput] = deque()

    def items():
        from .pool import Ready
        from .worker import Job

        for doc in docs:
            pending.append(doc)
            try:
                fmt = detect_format(doc)
                if fmt in EXTRACTORS:
                    yield Job(EXTRACTORS[fmt], doc.data, doc.source_path or doc.name, limits)
                else:
                    yield Ready(_in_process(doc, fmt))
            except KxError as exc:
                yield Ready(exc)

    from .pool import ExtractPool, outcome_error
    from .worker import Done, Failed

    with ExtractPool(settings.extract_workers, settings.extract_timeout, settings.extract_memory_mb,
                     on_progress) as pool:
        for outcome in pool.ordered(items()):
            doc = pending.popleft()
            if isinstance(outcome, Done):
                yield doc, outcome.extracted
            elif isinstance(outcome, Failed):
                yield doc, outcome_error(outcome)
            else:
                yield doc, outcome  # type: ignore[misc]  # the pool hands back a KxError as it is


def _in_process(doc: DocumentInput, fmt: str) -> Extracted:
    if fmt == MARKDOWN:
        from .markdown import extract_markdown

        return extract_markdown(doc)
    if fmt == DELIMITED:
        from .sheets import extract_delimited

        return extract_delimited(doc.data, doc.source_path or doc.name, doc.source_path or doc.name)
    return Extracted(text=extract_text(doc), media_type=doc.media_type, extractor=EXTRACTOR_VERSION)

