"""The catalogue's documents: their rows, original bytes and text, and each document's passages in order.

A document's text is what its passages' character ranges index into: the
stored extracted text when there is one, else its bytes read as the first
schema read them (`text_of_bytes`; frozen, see there). Never re-extracted.
"""

from __future__ import annotations

import json
from typing import Sequence

from ...rows import DocumentRow, PassageRow
from ...text.inputs import RECORD_MEDIA_TYPE
from ..storage_errors import damaged_catalogue
from .schema import DOCUMENT_COLUMNS, PASSAGE_COLUMNS, CatalogueFile


def text_of_bytes(data: bytes, media_type: str) -> str | None:
    """The text a document's bytes read as without an extractor: UTF-8, or a JSONL record's title and text.

    The first catalogue schema stored no extracted texts; its documents' text is this.

    Frozen: documents stored without a `texts` row are read through this, so
    changing it would shift their passages' character ranges. None when the
    bytes are not text this way (the extracted text must then be stored).
    """
    if media_type == RECORD_MEDIA_TYPE:
        try:
            record = json.loads(data)
            title, text = record["title"], record["text"]
        except (ValueError, KeyError, TypeError):
            return None
        return f"{title}\n\n{text}" if title.strip() else text
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


class DocumentReads(CatalogueFile):
    """Reading documents (by ref or in ingest order), their bytes and text, and their passages."""

    def longest_document(self) -> int:
        """The most passages any document holds (0 for none)."""
        return int(self._db.execute("SELECT COALESCE(MAX(passage_count), 0) FROM documents").fetchone()[0])

    def counts(self) -> tuple[int, int]:
        docs = self._db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        passages = self._db.execute("SELECT COUNT(*) FROM passages").fetchone()[0]
        return int(docs), int(passages)

    def known_refs(self, refs: Sequence[str]) -> set[str]:
        return {row[0] for row in self._where_in("SELECT ref FROM documents", "ref", refs)}

    def documents(self, offset: int = 0, limit: int = 1_000_000) -> list[DocumentRow]:
        rows = self._db.execute(f"{self._select('documents', DOCUMENT_COLUMNS)} ORDER BY seq LIMIT ? OFFSET ?",
                                (limit, offset))
        return [DocumentRow(*row) for row in rows]

    def document(self, ref: str) -> DocumentRow | None:
        row = self._db.execute(f"{self._select('documents', DOCUMENT_COLUMNS)} WHERE ref = ?", (ref,)).fetchone()
        return None if row is None else DocumentRow(*row)

    def documents_by_ref(self, refs: Sequence[str]) -> dict[str, DocumentRow]:
        rows = self._where_in(self._select("documents", DOCUMENT_COLUMNS), "ref", list(dict.fromkeys(refs)))
        return {row[0]: DocumentRow(*row) for row in rows}

    def document_bytes(self, ref: str) -> bytes | None:
        row = self._db.execute("SELECT data FROM blobs WHERE ref = ?", (ref,)).fetchone()
        return None if row is None else bytes(row[0])

    def document_text(self, ref: str) -> str | None:
        """The text the document's character ranges index into; None when the document is not here.

        The stored extracted text when there is one, else the bytes read as
        the first schema read them (documents whose text is just their bytes, and every
        document ingested before schema 2). Never re-extracted.
        """
        if self._columns["texts"]:
            row = self._db.execute("SELECT text FROM texts WHERE doc_ref = ?", (ref,)).fetchone()
            if row is not None:
                return row[0]
        found = self._db.execute("SELECT d.media_type, b.data FROM documents d JOIN blobs b ON b.ref = d.ref "
                                 "WHERE d.ref = ?", (ref,)).fetchone()
        if found is None:
            return None
        text = text_of_bytes(bytes(found[1]), found[0])
        if text is None:
            raise damaged_catalogue(self.path, f"document {ref[:12]} has neither a stored text nor UTF-8 bytes")
        return text

    def passages_of(self, doc_ref: str) -> list[PassageRow]:
        rows = self._db.execute(f"{self._select('passages', PASSAGE_COLUMNS)} WHERE doc_ref = ? "
                                "ORDER BY chunk_index", (doc_ref,))
        return [PassageRow(*row) for row in rows]
