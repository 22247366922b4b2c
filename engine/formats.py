"""Every document format kx reads, declared once.

One `Format` per row of FORMATS: its id, how a refusal names it, how the list
of what kx accepts shows it, its media types (each with the file-name endings
that claim it and the `--where type:` names that select it alone), the names
that select every one of its media types, and the extractor that reads it in
a worker process. Everything else is read from here:

- detection by name and the mislabelled-binary refusal (engine/extract/detect.py),
- the worker extractors (engine/extract/__init__.py EXTRACTORS),
- a file's media type and the accepted list in refusals (engine/text/inputs.py),
- `--where type:KIND` (engine/filters.py) and the gateway's schema for it
  (engine/server/schema.py WHERE_PATTERN),
- the media type each extractor stores (engine/extract/*.py).

Adding a format: a row here, its extractor (a module under engine/extract/),
its detection by content in `detect_format` when its bytes say what it is,
and tests (tests/test_formats.py checks every kind in-process and
through the gateway).

Stdlib only and no parser: `kx datasets list` and `--help` import this.
"""

from __future__ import annotations

from dataclasses import dataclass

PDF, DOCX, PPTX, XLSX, ODT, ODP, EPUB, HTML = "pdf", "docx", "pptx", "xlsx", "odt", "odp", "epub", "html"
IMAGE, MARKDOWN, DELIMITED, TEXT, RECORD = "image", "markdown", "delimited", "text", "record"

RECORD_MEDIA_TYPE = "application/x-kx-record+json"  # one JSONL line: {"id", "title", "text"}


@dataclass(frozen=True)
class Media:
    """One media type of a format: the file-name endings that claim it, and the `type:` names that select
    it alone (`type:png`; the format's own names select all its types)."""

    type: str
    suffixes: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()


@dataclass(frozen=True)
class Format:
    """One format kx reads.

    `label` names it in a refusal ("named as a PDF but its bytes are not one"); `listed` shows it in the
    list of what kx accepts (`{suffixes}` there: its media types' first file-name endings); `media[0]` is
    the type its extractor stores. `kinds`: the `--where type:` names selecting every one of its media
    types. `extractor`: "module:function" taking (data, label, limits), run in a worker process; None:
    read in-process, cheaply. `binary`: its bytes always say what it is, so a file named like one whose
    bytes are not is refused rather than read as text. `by_name`: a file's name or media type claims it
    when the bytes say nothing (plain text and records are what is left, never claimed by name).
    `zip_part`: a ZIP holding this member is this format (Office Open XML); `zip_mimetype`: a ZIP whose
    `mimetype` member is this format's media type is this format (OpenDocument, EPUB).
    """

    id: str
    label: str
    listed: str
    media: tuple[Media, ...]
    kinds: tuple[str, ...] = ()
    extractor: str | None = None
    binary: bool = False
    by_name: bool = True
    zip_part: str | None = None
    zip_mimetype: bool = False

    @property
    def media_type(self) -> str:
        """The media type its extractor stores."""
        return self.media[0].type

    @property
    def media_types(self) -> tuple[str, ...]:
        return tuple(media.type for media in self.media)

    @property
    def suffixes(self) -> tuple[str, ...]:
        return tuple(suffix for media in self.media for suffix in media.suffixes)


_IMAGES = (Media("image/png", (".png",), ("png",)), Media("image/jpeg", (".jpg", ".jpeg"), ("jpeg", "jpg")),
           Media("image/tiff", (".tif", ".tiff"), ("tiff", "tif")), Media("image/webp", (".webp",), ("webp",)),
           Media("image/bmp", (".bmp",), ("bmp",)))
_TEXTS = (Media("text/plain", (".txt",), ("txt", "text")), Media("text/x-rst", (".rst",), ("rst",)),
          Media("application/json", (".json",)), Media("text/yaml", (".yaml", ".yml")),
          Media("text/x-toml", (".toml",)), Media("text/x-python", (".py",)))

# In the order the accepted list names them.
FORMATS: dict[str, Format] = {fmt.id: fmt for fmt in (
    Format(PDF, "a PDF", "PDF (scans read by OCR)", (Media("application/pdf", (".pdf",)),), ("pdf",),
           "engine.extract.pdf:extract_pdf", binary=True),
    Format(IMAGE, "an image", "images ({suffixes}; OCR)", _IMAGES, ("image",),
           "engine.extract.image:extract_image", binary=True),
    Format(DOCX, "a Word (DOCX) document", "Word ({suffixes})",
           (Media("application/vnd.openxmlformats-officedocument.wordprocessingml.document", (".docx",)),),
           ("docx", "word"), "engine.extract.docx:extract_docx", binary=True, zip_part="word/document.xml"),
    Format(PPTX, "a PowerPoint (PPTX) presentation", "PowerPoint ({suffixes})",
           (Media("application/vnd.openxmlformats-officedocument.presentationml.presentation", (".pptx",)),),
           ("pptx",), "engine.extract.slides:extract_pptx", binary=True, zip_part="ppt/presentation.xml"),
    Format(XLSX, "an Excel (XLSX) workbook", "Excel ({suffixes})",
           (Media("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", (".xlsx",)),),
           ("xlsx",), "engine.extract.sheets:extract_xlsx", binary=True, zip_part="xl/workbook.xml"),
    Format(ODT, "an OpenDocument text (ODT)", "OpenDocument text ({suffixes})",
           (Media("application/vnd.oasis.opendocument.text", (".odt",)),), ("odt",),
           "engine.extract.opendocument:extract_odt", binary=True, zip_mimetype=True),
    Format(ODP, "an OpenDocument presentation (ODP)", "OpenDocument presentations ({suffixes})",
           (Media("application/vnd.oasis.opendocument.presentation", (".odp",)),), ("odp",),
           "engine.extract.opendocument:extract_odp", binary=True, zip_mimetype=True),
    Format(DELIMITED, "CSV/TSV", "CSV/TSV",
           (Media("text/csv", (".csv",), ("csv",)), Media("text/tab-separated-values", (".tsv",), ("tsv",)))),
    Format(HTML, "an HTML page", "HTML/XHTML",
           (Media("text/html", (".html", ".htm")), Media("application/xhtml+xml", (".xhtml",))), ("html",),
           "engine.extract.html:extract_html"),
    Format(EPUB, "an EPUB book", "EPUB", (Media("application/epub+zip", (".epub",)),), ("epub",),
           "engine.extract.epub:extract_epub", binary=True, zip_mimetype=True),
    Format(MARKDOWN, "Markdown", "Markdown ({suffixes})",
           (Media("text/markdown", (".md", ".markdown")), Media("text/x-markdown")), ("md", "markdown")),
    Format(TEXT, "text", "UTF-8 text files ({suffixes}, other source code, ...), --text strings", _TEXTS,
           by_name=False),
    Format(RECORD, "a JSONL record", "JSONL records", (Media(RECORD_MEDIA_TYPE),), ("record", "jsonl"),
           by_name=False),
)}


def media_type(fmt: str) -> str:
    """The media type format `fmt`'s extractor stores."""
    return FORMATS[fmt].media_type


# a file name's ending -> the media type a file so named is given (engine/text/inputs.py from_file)
SUFFIX_MEDIA: dict[str, str] = {suffix: media.type for fmt in FORMATS.values() for media in fmt.media
                                for suffix in media.suffixes}

# `--where type:KIND` -> the media types it selects (engine/filters.py; the gateway's schema names the same)
TYPE_KINDS: dict[str, tuple[str, ...]] = {
    **{kind: fmt.media_types for fmt in FORMATS.values() for kind in fmt.kinds},
    **{kind: (media.type,) for fmt in FORMATS.values() for media in fmt.media for kind in media.kinds},
}


def _listed(fmt: Format) -> str:
    return fmt.listed.format(suffixes=", ".join(media.suffixes[0] for media in fmt.media if media.suffixes))


_SHOWN = [_listed(fmt) for fmt in FORMATS.values()]
# what kx reads, for a refusal that says so ("kx accepts PDF (scans read by OCR), images (...), ...")
ACCEPTED = ", ".join(_SHOWN[:-1]) + " and " + _SHOWN[-1]
