"""Text in: turning files, strings and JSONL records into documents.

A document is its original bytes (its ref is their sha256) plus how to get
text out of them. Anything we cannot read becomes a refused input carrying its
reason, so one bad file never stops the rest of a command.
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

from ..errors import KxError, Status, invalid

# what kx reads (the accepted list in refusals), a file's media type by its name's ending, a JSONL record's
# media type: all from the one table of formats
from ..formats import ACCEPTED, RECORD_MEDIA_TYPE, SUFFIX_MEDIA
from .safe_read import Vet, open_regular_binary, read_regular_file


@dataclass(frozen=True)
class DocumentInput:
    """One thing to ingest, already read; `error` set when it cannot be."""

    name: str
    data: bytes = b""
    source_path: str | None = None
    media_type: str = "text/plain"
    error: KxError | None = None

    @property
    def ref(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Also refused in a document name: C1 controls (U+009B is an 8-bit escape to a terminal) and the bidirectional
# overrides and isolates, which make a name read other than it is ("invoice\u202etxt.exe").
# (A regex character class's body: the gateway's schema, engine/server/schema.py, states the same rule with it.)
UNSHOWABLE_CLASS = r"\x80-\x9f\u202a-\u202e\u2066-\u2069"
_UNSHOWABLE = re.compile(f"[{UNSHOWABLE_CLASS}]")
# the longest document name (the gateway's schema states it too, engine/server/schema.py): a name is a
# file's path in its folder, and one longer than this is no name a person reads
MAX_NAME_CHARS = 1024
CLIENT_PREFIX = "client:"  # marks a source path a network client sent: never a path on this machine


def check_document_name(name: str, label: str = "the document name") -> str:
    """INVALID_ARGUMENT for a name with control characters (NUL included), a '.' / '..' path segment, or
    over MAX_NAME_CHARS."""
    if not name:
        raise invalid(f"{label}: a document name cannot be empty")
    if len(name) > MAX_NAME_CHARS:
        raise invalid(f"{label}: the document name is {len(name):,} characters long ({name[:40]!r}...); kx takes "
                      f"at most {MAX_NAME_CHARS:,}: shorten it (a file's path in its folder: its folders' names)")
    bad = _CONTROL.search(name) or _UNSHOWABLE.search(name)
    if bad:
        raise invalid(f"{label}: the document name {name[:60]!r} holds the control character "
                      f"{bad.group()!r}; names are printable text: rename it without that character")
    parts = re.split(r"[/\\]", name)
    if any(part in (".", "..") for part in parts):
        raise invalid(f"{label}: the document name {name[:60]!r} has a '.' or '..' segment; a name may hold "
                      "folders (guide/index) but never climbs out of them")
    if "" in parts:
        raise invalid(f"{label}: the document name {name[:60]!r} has an empty segment (a leading, trailing or "
                      "doubled '/'); write it as folder/name, e.g. guide/index")
    return name


def check_source_path(path: str, label: str = "source_path") -> str:
    """INVALID_ARGUMENT for a source path with control characters (NUL included)."""
    bad = _CONTROL.search(path)
    if bad:
        raise invalid(f"{label}: the source path {path[:60]!r} holds the control character {bad.group()!r}; "
                      "rename the file or folder without that character")
    return path


def with_a_storable_name(doc: DocumentInput) -> DocumentInput:
    """`doc`, or `doc` refused when its name, source path or media type cannot be a document's: the gateway's
    name rule (check_document_name) for every way in (the CLI's files and --text, MCP, the watcher, and
    the SDK before it sends a document, so one bad name does not fail the gateway's whole request); text
    at all (a file name whose bytes are not UTF-8 comes as lone surrogates, which SQLite and JSON cannot
    hold: shown with U+FFFD instead); a media type that is type/subtype."""
    from dataclasses import replace

    name, path = doc.name, doc.source_path
    shown = printable(name)
    shown_path = printable(path) if path else path
    if doc.error is not None:
        return doc if (shown, shown_path) == (name, path) else replace(doc, name=shown, source_path=shown_path)
    try:
        if shown != name or shown_path != path:
            raise invalid(f"the name of {shown_path or shown!r} is not valid UTF-8 text (\ufffd marks its bad "
                          "bytes); rename it in UTF-8 and add it again")
        check_document_name(name, f"the file {path}" if path else "the document name")
        if path is not None:
            check_source_path(path)
        if not _MEDIA_TYPE.fullmatch(doc.media_type):
            raise invalid(f"the media type {doc.media_type[:60]!r} of {name!r} is not one (type/subtype, e.g. "
                          "text/plain or application/pdf); leave it out and kx reads the format from the bytes")
    except KxError as exc:
        return replace(doc, name=shown, source_path=shown_path, error=exc)
    return doc


# type/subtype with optional parameters, printable ASCII (RFC 6838's characters): what a media type can be
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9][\w!#$&^.+-]*/[A-Za-z0-9][\w!#$&^.+-]*(\s*;[ -~]*)?", re.ASCII)


def refuse_name_clashes(docs: list[DocumentInput]) -> list[DocumentInput]:
    """`docs` (one command's inputs, in order) with each document refused whose name an earlier one holds
    with other bytes: two folders given together may each hold an `index.md`, and one name is one
    document, so the second would silently become the first's new version and hide it. The same bytes
    under one name (a file given twice) are one document, not a clash. (Not for a rebuild, which hands
    every stored version of a name over in one go on purpose.)"""
    from dataclasses import replace

    first: dict[str, DocumentInput] = {}
    out = []
    for doc in docs:
        if doc.error is None:
            earlier = first.setdefault(doc.name, doc)
            if earlier is not doc and earlier.data != doc.data:
                doc = replace(doc, error=invalid(
                    f"{doc.source_path or doc.name} would be named {doc.name!r}, as "
                    f"{earlier.source_path or earlier.name} in the same command is, and one name is one document "
                    "(the later would hide the earlier); give the folder holding both, where their paths differ, "
                    "or ingest them into different datasets"))
        out.append(doc)
    return out


def client_supplied(path: str | None) -> str | None:
    """A source path sent over the network, kept but marked: 'client:' + what the client said."""
    if path is None or path.startswith(CLIENT_PREFIX):
        return path
    return CLIENT_PREFIX + path


def from_text(text: str, name: str | None = None) -> DocumentInput:
    """A document from text; refused (its error set) when the text is not Unicode text: a lone surrogate,
    which is how Python hands over command-line bytes that were not UTF-8."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        return DocumentInput(name=name or f"text-{digest}", error=invalid(
            f"the text holds {shown_surrogates(text[exc.start:exc.end])} at character {exc.start + 1}, which is not "
            "valid text (bytes that are not UTF-8, or an unpaired surrogate); send it as UTF-8"))
    return DocumentInput(name=name or f"text-{hashlib.sha256(data).hexdigest()[:12]}", data=data)


def printable(text: str) -> str:
    """`text` with each character UTF-8 cannot hold shown as U+FFFD.

    Python hands a file name's bytes that are not UTF-8 over as lone surrogates
    (U+DC80-U+DCFF), and JSON's unpaired "\\ud800" escape arrives as one; SQLite,
    JSON output and a terminal all fail on those.
    """
    return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)


def shown_surrogates(chars: str) -> str:
    """Lone surrogates as a user can recognise them: a byte Python escaped (\\xe9), else the code (\\ud800)."""
    return "".join(f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else f"\\u{ord(c):04x}"
                   for c in chars[:4])


def from_bytes(data: bytes, name: str | None = None, media_type: str = "text/plain") -> DocumentInput:
    return DocumentInput(name=name or f"bytes-{hashlib.sha256(data).hexdigest()[:12]}", data=data,
                         media_type=media_type)


def from_file(path: Path | str, max_bytes: int, *, follow_symlinks: bool = True,
              vet: Vet | None = None) -> DocumentInput:
    """The file at `path` as a document, or refused with its reason; see `read_regular_file` for the rest."""
    path = Path(path)
    name = path.stem or path.name
    shown = printable(str(path))
    if shown != str(path):
        # bytes that are not UTF-8 in the name (Python's surrogate escapes): SQLite and JSON cannot hold them
        return DocumentInput(Path(shown).stem or Path(shown).name, source_path=shown, error=invalid(
            f"the name of {shown} is not valid UTF-8 (\ufffd marks its bad bytes); rename the file (or its "
            "folder) in UTF-8 and add it again"))
    try:
        if path.is_dir():
            return DocumentInput(name, source_path=str(path), error=invalid(
                f"{path} is a directory; pass the files inside it (kx accepts {ACCEPTED})"))
        # regular files only, never more than the limit
        data = read_regular_file(path, max_bytes, follow_symlinks=follow_symlinks, vet=vet)
    except KxError as exc:
        return DocumentInput(name, source_path=str(path), error=exc)
    except FileNotFoundError:
        return DocumentInput(name, source_path=str(path), error=KxError(
            Status.NOT_FOUND, f"{path} does not exist; check the path"))
    except PermissionError:
        return DocumentInput(name, source_path=str(path), error=invalid(
            f"{path} cannot be read (permission denied); fix its permissions"))
    except OSError as exc:
        return DocumentInput(name, source_path=str(path), error=invalid(
            f"{path} cannot be read ({exc.strerror}); check the file"))
    except ValueError:  # a NUL byte in the path: no file can have that name
        return DocumentInput(name, source_path=repr(str(path)), error=invalid(
            f"the path {str(path)!r} holds a NUL byte; no file has that name"))
    media = SUFFIX_MEDIA.get(path.suffix.lower()) or mimetypes.guess_type(path.name)[0] or "text/plain"
    return DocumentInput(name, data=data, source_path=str(path.resolve()), media_type=media)


def from_jsonl(path: Path | str, max_bytes: int) -> Iterator[DocumentInput]:
    """One document per line: {"_id" or "id", optional "title", "text"} (BEIR's corpus layout).

    The stored bytes are the record in a canonical JSON form, so the same
    record always has the same ref, and two records with the same text but
    different ids stay two documents.
    """
    path = Path(path)
    handle = _open_jsonl(path)
    if isinstance(handle, DocumentInput):
        yield handle
        return
    source = str(path.resolve())
    first_line: dict[str, int] = {}  # id -> the line that first used it
    longest = JSONL_LINE_FACTOR * max_bytes + 65536
    with handle:
        for number, raw in _lines(handle, longest):
            where = f"{path.name}:{number}"
            if raw is None:  # refused unread, so one huge line costs no memory and the next lines still go in
                yield DocumentInput(where, source_path=source, error=invalid(
                    f"{where} is over {longest:,} bytes, more than any record within the {max_bytes:,}-byte "
                    "limit (KX_MAX_DOCUMENT_BYTES) needs; split that record"))
                continue
            if not raw.strip():
                continue
            parsed = _record_fields(raw, where, source)
            if isinstance(parsed, DocumentInput):
                yield parsed
                continue
            doc_id, title, text = parsed
            try:
                check_document_name(str(doc_id), where)
            except KxError as exc:
                yield DocumentInput(where, source_path=source, error=invalid(f"{exc.message} (its \"_id\")"))
                continue
            if str(doc_id) in first_line:
                yield DocumentInput(str(doc_id), source_path=source, error=invalid(
                    f"record {str(doc_id)[:60]!r} on line {number} repeats the id of line {first_line[str(doc_id)]} "
                    f"of {path.name}; ids are unique within a file (the first one is kept)"))
                continue
            first_line[str(doc_id)] = number
            canonical = {"id": str(doc_id), "title": title, "text": text}
            try:
                data = json.dumps(canonical, ensure_ascii=False, sort_keys=True,
                                  separators=(",", ":")).encode("utf-8")
            except UnicodeEncodeError as exc:  # JSON's "\\ud800" escape, unpaired: not text
                bad = shown_surrogates(exc.object[exc.start:exc.end])
                yield DocumentInput(printable(str(doc_id)), source_path=source,
                                    error=invalid(f"record {where} holds {bad}, an unpaired surrogate escape, "
                                                  "which is not text; fix that line"))
                continue
            if len(data) > max_bytes:
                yield DocumentInput(str(doc_id), source_path=source, error=invalid(
                    f"record {doc_id} ({where}) is over the {max_bytes:,}-byte limit (KX_MAX_DOCUMENT_BYTES)"))
                continue
            yield DocumentInput(str(doc_id), data=data, source_path=source, media_type=RECORD_MEDIA_TYPE)


def _open_jsonl(path: Path) -> BinaryIO | DocumentInput:
    """The JSONL file open for reading, or one refused input saying why it cannot be."""
    try:
        return open_regular_binary(path)  # a FIFO or device given as --jsonl must not hang the command
    except KxError as exc:
        return DocumentInput(path.name, source_path=str(path), error=exc)
    except FileNotFoundError:
        return DocumentInput(path.name, source_path=str(path), error=KxError(
            Status.NOT_FOUND, f"{path} does not exist; check the path"))
    except OSError as exc:
        return DocumentInput(path.name, source_path=str(path), error=invalid(
            f"{path} cannot be read ({exc.strerror}); check the file"))
    except ValueError:
        return DocumentInput(path.name, source_path=repr(str(path)), error=invalid(
            f"the path {str(path)!r} holds a NUL byte; no file has that name"))


def _record_fields(raw: bytes, where: str, source: str) -> tuple[str | int, str, str] | DocumentInput:
    """One JSONL line's (id, title, text), or the line refused with why (not JSON, not an object, an id of the
    wrong kind, no string text)."""
    try:
        record = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return DocumentInput(where, source_path=source, error=invalid(
            f"{where} is not a JSON object; each line needs {{\"_id\", \"title\", \"text\"}}"))
    except RecursionError:  # nested deeper than Python's parser goes (thousands of brackets)
        return DocumentInput(where, source_path=source, error=invalid(
            f"{where} nests its JSON too deep to read; each line needs a flat object "
            "{\"_id\", \"title\", \"text\"}"))
    if not isinstance(record, dict):
        return DocumentInput(where, source_path=source, error=invalid(
            f"{where} is not a JSON object; each line needs {{\"_id\", \"title\", \"text\"}}"))
    doc_id = record.get("_id", record.get("id"))
    text, title = record.get("text"), record.get("title") or ""
    if doc_id is not None and (isinstance(doc_id, bool) or not isinstance(doc_id, (str, int))):
        return DocumentInput(where, source_path=source, error=invalid(
            f"{where} needs an \"_id\" (or \"id\") that is a string or a whole number, not "
            f"{_json_kind(doc_id)}"))
    if doc_id is None or not isinstance(text, str) or not isinstance(title, str):
        return DocumentInput(where, source_path=source, error=invalid(
            f"{where} needs an \"_id\" (or \"id\") and a string \"text\" (\"title\" optional)"))
    return doc_id, title, text


# A JSONL line longer than this many times KX_MAX_DOCUMENT_BYTES (plus 64 KiB) is refused unread: a record's
# stored form is rarely a sixth of its line (a \\u escape is six bytes for one character)
JSONL_LINE_FACTOR = 6


def _lines(handle: BinaryIO, longest: int) -> Iterator[tuple[int, bytes | None]]:
    """(line number, the line's bytes) for each line of `handle`; None for a line over `longest` bytes, which is
    skipped unread, a megabyte at a time."""
    number = 0
    while True:
        raw = handle.readline(longest + 1)
        if not raw:
            return
        number += 1
        if len(raw) > longest and not raw.endswith(b"\n"):
            while (rest := handle.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            yield number, None
            continue
        yield number, raw


def _json_kind(value: object) -> str:
    """What a JSON value is, in JSON's words (an id of the wrong kind is named by its kind, not shown)."""
    for kind, words in ((bool, "true/false"), (float, "a fraction"), (dict, "an object"), (list, "an array")):
        if isinstance(value, kind):
            return words
    return type(value).__name__


def _utf16(data: bytes) -> bool:
    """Whether `data` looks like UTF-16 text (what Windows tools write as 'Unicode'): a byte-order mark, or
    Latin text whose every other byte is NUL."""
    head = data[:512]
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return True
    low, high = head[0::2], head[1::2]
    return len(head) >= 8 and (high.count(0) == len(high) or low.count(0) == len(low))


def extract_text(doc: DocumentInput) -> str:
    """The text passages are cut from; character ranges refer to it.

    Raises INVALID_ARGUMENT naming the document when it is binary, not UTF-8,
    or holds no text.
    """
    label = doc.source_path or doc.name
    if doc.media_type == RECORD_MEDIA_TYPE:
        label = f"record {doc.name!r} of {doc.source_path}" if doc.source_path else f"record {doc.name!r}"
        record = json.loads(doc.data)
        text = f"{record['title']}\n\n{record['text']}" if record["title"].strip() else record["text"]
    else:
        if b"\x00" in doc.data[:8192]:
            if _utf16(doc.data):
                raise invalid(f"{label} is UTF-16 text; convert it to UTF-8 (e.g. iconv -f UTF-16 -t UTF-8, or "
                              "save it as UTF-8) and add it again")
            raise invalid(f"{label} looks binary (it holds NUL bytes); kx accepts {ACCEPTED}")
        try:
            text = doc.data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise invalid(
                f"{label} is not valid UTF-8 (bad byte at offset {exc.start}); convert it to UTF-8 "
                f"(kx accepts {ACCEPTED})"
            ) from None
    if not text.strip():
        raise invalid(f"{label} is empty or only whitespace; there is nothing to index")
    return text
