"""Which format a document is, from its bytes first and its name second.

A file's name can lie (a PDF saved as `.txt`, random bytes named `.pdf`), its
bytes rarely do, so the content decides: `%PDF-` near the start is a PDF, a
ZIP holding `word/document.xml` is a Word document, a ZIP whose `mimetype`
says so is an EPUB, markup that opens with a doctype or `<html` is HTML.
Only when the content names no format do the media type and the extension
have their say: Markdown and plain text are told apart by name, and a file
named like a binary format whose bytes are not that format is refused rather
than read as text.

Stdlib only: `kx datasets list` imports this module's package.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass

from ..errors import invalid
from ..text.inputs import RECORD_MEDIA_TYPE, DocumentInput

PDF, DOCX, EPUB, HTML, MARKDOWN, TEXT, RECORD = "pdf", "docx", "epub", "html", "markdown", "text", "record"
IMAGE = "image"
PPTX, XLSX, ODT, ODP, DELIMITED = "pptx", "xlsx", "odt", "odp", "delimited"

@dataclass(frozen=True)
class FormatSpec:
    """One format kx reads: how a refusal names it, the media types and file name endings that claim it, and
    the extractor that reads it in a worker process ("module:function"; None: read in-process, cheaply)."""

    name: str
    media_types: tuple[str, ...]
    suffixes: tuple[str, ...]
    extractor: str | None = None


# Every format in one table: detection by name, the mislabelled-binary refusal and the worker extractors
# (engine/extract/__init__.py EXTRACTORS) are read from here. Adding a format: a row here, its detection by
# content in detect_format, its `type:` kinds in engine/filters.py (the gateway's schema takes those).
FORMATS: dict[str, FormatSpec] = {
    PDF: FormatSpec("a PDF", ("application/pdf",), (".pdf",), "engine.extract.pdf:extract_pdf"),
    DOCX: FormatSpec("a Word (DOCX) document",
                     ("application/vnd.openxmlformats-officedocument.wordprocessingml.document",), (".docx",),
                     "engine.extract.docx:extract_docx"),
    PPTX: FormatSpec("a PowerPoint (PPTX) presentation",
                     ("application/vnd.openxmlformats-officedocument.presentationml.presentation",), (".pptx",),
                     "engine.extract.slides:extract_pptx"),
    XLSX: FormatSpec("an Excel (XLSX) workbook",
                     ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",), (".xlsx",),
                     "engine.extract.sheets:extract_xlsx"),
    ODT: FormatSpec("an OpenDocument text (ODT)", ("application/vnd.oasis.opendocument.text",), (".odt",),
                    "engine.extract.opendocument:extract_odt"),
    ODP: FormatSpec("an OpenDocument presentation (ODP)", ("application/vnd.oasis.opendocument.presentation",),
                    (".odp",), "engine.extract.opendocument:extract_odp"),
    EPUB: FormatSpec("an EPUB book", ("application/epub+zip",), (".epub",), "engine.extract.epub:extract_epub"),
    HTML: FormatSpec("an HTML page", ("text/html", "application/xhtml+xml"), (".html", ".htm", ".xhtml"),
                     "engine.extract.html:extract_html"),
    IMAGE: FormatSpec("an image", ("image/png", "image/jpeg", "image/tiff", "image/webp", "image/bmp"),
                      (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".bmp"),
                      "engine.extract.image:extract_image"),
    MARKDOWN: FormatSpec("Markdown", ("text/markdown", "text/x-markdown"), (".md", ".markdown")),
    DELIMITED: FormatSpec("CSV/TSV", ("text/csv", "text/tab-separated-values"), (".csv", ".tsv")),
}
_BY_MEDIA = {media: fmt for fmt, spec in FORMATS.items() for media in spec.media_types}
_BY_SUFFIX = {suffix: fmt for fmt, spec in FORMATS.items() for suffix in spec.suffixes}
# formats whose bytes always say what they are: a file named like one whose bytes are not is refused
_BINARY = {fmt: spec.name for fmt, spec in FORMATS.items() if spec.extractor and fmt != HTML}
_ODF = {b"application/vnd.oasis.opendocument.text": ODT, b"application/vnd.oasis.opendocument.presentation": ODP,
        b"application/epub+zip": EPUB}
# the images OCR reads, by their first bytes (BMP's two letters only count with a sane header behind them)
_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*")

# After an optional BOM and whitespace (and XML declaration / comments, which XHTML
# and saved pages put first): a doctype or an <html> element.
_HTML_START = re.compile(
    rb"\A(?:\xef\xbb\xbf)?\s*(?:<\?xml[^>]*\?>\s*)?(?:<!--.*?-->\s*)*(?:<!doctype\s+html|<html[\s>])",
    re.IGNORECASE | re.DOTALL,
)
# A page saved without <html> (a fragment) still opens with one of these: treated as HTML
# only when the name or media type says HTML too, so a Markdown file starting "<div>" stays Markdown.
_HTML_FRAGMENT = re.compile(rb"\A(?:\xef\xbb\xbf)?\s*<(?:head|body|meta|title|div|p|article|section)[\s>]",
                            re.IGNORECASE)


def detect_format(doc: DocumentInput) -> str:
    """The document's format id (PDF, DOCX, ...); raises KxError for a mislabelled binary."""
    if doc.media_type == RECORD_MEDIA_TYPE:
        return RECORD
    data = doc.data
    if b"%PDF-" in data[:1024]:  # the spec lets a little junk precede the header
        return PDF
    if data[:4] == b"PK\x03\x04":
        found = _zip_format(data)
        if found:
            return found
    if _is_image(data):
        return IMAGE
    claimed = _claimed_format(doc)
    if _HTML_START.match(data[:4096]) or (claimed == HTML and _HTML_FRAGMENT.match(data[:4096])):
        return HTML
    if claimed in _BINARY:
        raise invalid(
            f"{doc.source_path or doc.name} is named or typed as {_BINARY[claimed]} but its bytes are not one "
            f"({_what_it_is(data)}); it may be damaged or mislabelled: re-export or re-download it"
        )
    return claimed if claimed in (MARKDOWN, DELIMITED) else TEXT


def _is_image(data: bytes) -> bool:
    if data.startswith(_IMAGE_MAGIC) or (data[:4] == b"RIFF" and data[8:12] == b"WEBP"):
        return True
    # BMP: "BM", then the file size, two reserved words, the pixel offset and a DIB header of a known size
    return data[:2] == b"BM" and len(data) > 18 and int.from_bytes(data[14:18], "little") in (12, 40, 52, 56, 108, 124)


def _claimed_format(doc: DocumentInput) -> str | None:
    name = (doc.source_path or doc.name or "").lower()
    for suffix, fmt in _BY_SUFFIX.items():
        if name.endswith(suffix):
            return fmt
    return _BY_MEDIA.get(doc.media_type.split(";")[0].strip().lower())


def _zip_format(data: bytes) -> str | None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
            if "word/document.xml" in names:
                return DOCX
            if "ppt/presentation.xml" in names:
                return PPTX
            if "xl/workbook.xml" in names:
                return XLSX
            if "mimetype" in names:
                info = archive.getinfo("mimetype")
                if info.file_size < 100:
                    return _ODF.get(archive.read("mimetype").strip())
    except (zipfile.BadZipFile, KeyError, OSError, EOFError, NotImplementedError, RuntimeError):
        return None
    return None


def _what_it_is(data: bytes) -> str:
    if not data:
        return "it is empty"
    if data[:4] == b"PK\x03\x04":
        return "it is a ZIP archive of another kind"
    if b"\x00" in data[:8192]:
        return "it holds binary data of an unknown kind"
    return "it looks like text"

