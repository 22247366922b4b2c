"""Documents to text: one interface for every format kx reads.

`extract(doc)` turns a document's bytes into an `Extracted`: the text that
passages are cut from (character ranges index into it, forever), where each
page begins (paged formats), the headings that give section paths, and the
document's own title. `extract_many` does the same for a stream of
documents. A document that cannot be read raises (or yields) a `KxError`
with the reason a user can act on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Iterator

from ..documents import DocumentInput, extract_text
from ..errors import KxError
from .base import Extracted, Section, page_span, section_path

if TYPE_CHECKING:
    from ..config import Settings

__all__ = ["Extracted", "Section", "extract", "extract_many", "page_span", "section_path"]

EXTRACTOR_VERSION = "text/1"


def extract(doc: DocumentInput) -> Extracted:
    """The document's text and structure; raises KxError when it cannot be read."""
    return Extracted(text=extract_text(doc), media_type=doc.media_type, extractor=EXTRACTOR_VERSION)


def extract_many(
    docs: Iterable[DocumentInput], settings: "Settings | None" = None
) -> Iterator[tuple[DocumentInput, Extracted | KxError]]:
    """Each document with its extraction or the error that refused it, in input order."""
    for doc in docs:
        try:
            yield doc, extract(doc)
        except KxError as exc:
            yield doc, exc
