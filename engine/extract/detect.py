"""Which format a document is, from its bytes first and its name second.

A file's name can lie (a PDF saved as `.txt`, random bytes named `.pdf`), its
bytes rarely do, so the content decides: `%PDF-` near the start is a PDF, a
ZIP holding `word/document.xml` is a Word document, a ZIP whose `mimetype`
says so is an EPUB, markup that opens with a doctype or `<html` is HTML.
Only when the content names no format do the media type and the extension
have their say: Markdown and plain text are told apart by name, and a file
named like a binary format whose bytes are not that format is refused rather
than read as text.

The formats and what claims each are declared in engine/formats.py; the checks of their bytes are here.
Stdlib only: `kx datasets list` imports this module's package.
"""

from __future__ import annotations

import io
import re
import zipfile

from ..errors import invalid
from ..formats import DELIMITED, FORMATS, HTML, IMAGE, MARKDOWN, PDF, RECORD, TEXT
from ..text.inputs import RECORD_MEDIA_TYPE, DocumentInput

# What a name or a media type claims when the bytes say nothing (engine/formats.py; text and records are what
# is left, never claimed by name)
_NAMED = [fmt for fmt in FORMATS.values() if fmt.by_name]
_BY_MEDIA = {media: fmt.id for fmt in _NAMED for media in fmt.media_types}
_BY_SUFFIX = {suffix: fmt.id for fmt in _NAMED for suffix in fmt.suffixes}
# formats whose bytes always say what they are: a file named like one whose bytes are not is refused
_BINARY = {fmt.id: fmt.label for fmt in FORMATS.values() if fmt.binary}
# a ZIP holding this member is this format (Office Open XML); one whose `mimetype` member says this (ODF, EPUB)
_ZIP_PARTS = {fmt.zip_part: fmt.id for fmt in FORMATS.values() if fmt.zip_part}
_ZIP_MIMETYPES = {fmt.media_type.encode(): fmt.id for fmt in FORMATS.values() if fmt.zip_mimetype}
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
            for part, fmt in _ZIP_PARTS.items():
                if part in names:
                    return fmt
            if "mimetype" in names:
                info = archive.getinfo("mimetype")
                if info.file_size < 100:
                    return _ZIP_MIMETYPES.get(archive.read("mimetype").strip())
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

