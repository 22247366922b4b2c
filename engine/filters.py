"""Query filters: which passages a query may answer with.

`--where` clauses narrow a query to some documents or pages:

    name:GLOB         the document's name or its source path matches GLOB (`name:guide/*`, `name:*.pdf`)
    type:KIND         media type: pdf, docx, pptx, xlsx, odt, odp, csv, tsv, html, epub, md, txt, rst, record
                      (JSONL), image (png, jpeg, tiff, webp, bmp), or a full type (text/csv); `type:ocr` is the
                      documents read by OCR. The kinds are the formats' (engine/formats.py TYPE_KINDS).
    ocr:yes|no        documents (partly) read by OCR (a scan, an image), or those not
    after:YYYY-MM-DD  ingested on or after that day (UTC)
    before:YYYY-MM-DD ingested before that day (UTC)
    pages:A-B         passages spanning any page from A to B (`pages:3` is one page); pageless formats never match
    ref:REF[,REF]     these documents (a ref or a unique prefix of at least 6 hex digits)

Clauses of different kinds must all hold; several clauses of one kind (two
`name:` globs) mean either. The filter is a set of passage seqs, applied
inside each retriever before fusion (engine/embedded/readers.py): a filtered query
still returns k hits whenever k passages match. The default "latest
versions only" view (engine/embedded/catalogue/lineage_log.py) is the same machinery: an
excluded set of the superseded and retired versions' passages.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Callable, Sequence

from .errors import invalid
from .formats import TYPE_KINDS

if TYPE_CHECKING:  # numpy loads where passages are filtered: `kx datasets list` never pays for it
    import numpy as np

EXAMPLE = "e.g. --where name:guide/* --where type:pdf --where after:2026-12-01 --where pages:1-10 --where ref:e535e0"

OCR_TYPE = "ocr"  # `type:ocr`: not a media type but how the text was read (the same as `ocr:yes`)
_KINDS = ("name", "type", "after", "before", "pages", "ref", "ocr")
MAX_PAGE = 999_999_999  # nine digits: what the gateway's schema (engine/server/schema.py WHERE_PATTERN) takes


@dataclass(frozen=True)
class Where:
    """Parsed `--where` clauses; an empty one lets everything through."""

    names: tuple[str, ...] = ()
    media_types: tuple[str, ...] = ()
    after: float | None = None      # epoch seconds, inclusive
    before: float | None = None     # epoch seconds, exclusive
    pages: tuple[int, int] | None = None
    refs: tuple[str, ...] = ()
    ocr: bool | None = None          # True: only documents read by OCR; False: only those not; None: either
    clauses: tuple[str, ...] = field(default=(), compare=False)

    def __bool__(self) -> bool:
        return bool(self.names or self.media_types or self.after is not None or self.before is not None
                    or self.pages is not None or self.refs or self.ocr is not None)

    def admits_document(self, name: str, source_path: str | None, media_type: str, ingested_at: float,
                        ref: str, ocr: bool = False) -> bool:
        """The document-level clauses (all but pages); `ocr`: whether the document was read by OCR."""
        if self.names and not self._names_match(name, source_path):
            return False
        if self.ocr is not None and ocr != self.ocr:
            return False
        if self.media_types and media_type not in self.media_types:
            return False
        if self.after is not None and ingested_at < self.after:
            return False
        if self.before is not None and ingested_at >= self.before:
            return False
        return not self.refs or any(ref.startswith(r) for r in self.refs)

    def name_test(self) -> Callable[[str, str | None], bool] | None:
        """The `name:` clauses as one test of (name, source path); None without `name:` clauses."""
        return self._names_match if self.names else None

    @cached_property
    def _names_match(self) -> Callable[[str, str | None], bool]:
        """The `name:` globs compiled into one pattern, once per filter: what `name_matches` answers glob by
        glob, ~10 x cheaper a document (a filter over 100,000 documents' names is resolved on each reader's
        first query with it)."""
        import fnmatch

        match = re.compile("|".join(f"(?:{fnmatch.translate(glob)})" for glob in self.names)).match
        return lambda name, path: match(name) is not None or (path is not None and match(path) is not None)


def _bad(clause: str, why: str) -> Exception:
    return invalid(f"bad filter {clause!r}: {why}; {EXAMPLE}")


def _day(clause: str, value: str) -> float:
    try:
        day = _dt.date.fromisoformat(value)
    except ValueError as exc:
        # Python's reason names what is wrong (the month, the day), but not the shape when it is no date at all
        why = f"{value!r} is not YYYY-MM-DD" if str(exc).startswith("Invalid isoformat") else str(exc)
        raise _bad(clause, f"the date is YYYY-MM-DD and must be a calendar day ({why})") from None
    return _dt.datetime(day.year, day.month, day.day, tzinfo=_dt.UTC).timestamp()


def name_matches(pattern: str, name: str, source_path: str | None) -> bool:
    """A `name:` glob against a document: its name, or the path of the file it was read from."""
    import fnmatch

    return fnmatch.fnmatchcase(name, pattern) or (source_path is not None and fnmatch.fnmatchcase(source_path, pattern))


def spelled(clause: str) -> str:
    """`clause` in the one spelling the gateway's schema takes (the kind and a type in lower case, no spaces
    around ':' or a page range's '-'); what the engine reads it as is unchanged. Anything else as given."""
    if not isinstance(clause, str):
        return clause
    kind, sep, value = clause.strip().partition(":")
    if not sep:
        return clause
    kind, value = kind.strip().lower(), value.strip()
    if kind in ("type", "ocr"):
        value = value.lower().lstrip(".")
    elif kind == "pages":
        value = re.sub(r"(?<!\d)0+(?=\d)", "", re.sub(r"\s*-\s*", "-", value))  # no spaces, no leading zeros
    return f"{kind}:{value}"


def parse_where(clauses: Sequence[str] | str | None) -> Where:
    """`--where` clauses -> a `Where`; INVALID_ARGUMENT (with an example) for bad syntax."""
    if clauses is None:
        return Where()
    if isinstance(clauses, str):
        clauses = [clauses]
    names: list[str] = []
    media: list[str] = []
    refs: list[str] = []
    after = before = None
    pages = None
    ocr: bool | None = None
    for clause in clauses:
        if not isinstance(clause, str):
            raise invalid(f"a filter is text like 'type:pdf', got {clause!r}; {EXAMPLE}")
        kind, sep, value = clause.strip().partition(":")
        kind, value = kind.strip().lower(), value.strip()
        if not sep or kind not in _KINDS:
            raise _bad(clause, f"a filter is KIND:VALUE with KIND one of {', '.join(_KINDS)}")
        if not value:
            raise _bad(clause, "the value after ':' is empty")
        if kind == "name":
            names.append(value)
        elif kind == "ocr" or (kind == "type" and value.lower() == OCR_TYPE):
            wanted = {"yes": True, "true": True, OCR_TYPE: True, "no": False, "false": False}.get(value.lower())
            if wanted is None:
                raise _bad(clause, "ocr is yes or no")
            if ocr is not None and ocr != wanted:
                raise _bad(clause, "a document cannot be both read by OCR and not")
            ocr = wanted
        elif kind == "type":
            found = TYPE_KINDS.get(value.lower().lstrip("."))
            if found is None and "/" not in value:
                raise _bad(clause, f"type is one of {', '.join(sorted([*TYPE_KINDS, OCR_TYPE]))} or a media type like "
                           "text/csv")
            media.extend(found or (value.lower(),))
        elif kind == "after":
            after = max(after or 0.0, _day(clause, value))
        elif kind == "before":
            day = _day(clause, value)
            before = day if before is None else min(before, day)
        elif kind == "pages":
            match = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", value)
            if match is None:
                raise _bad(clause, "pages are A-B or one page number, counted from 1")
            first = int(match.group(1))
            last = int(match.group(2) or first)
            if first < 1 or last < first:
                raise _bad(clause, "pages are A-B with 1 <= A <= B")
            if last > MAX_PAGE:  # the gateway's schema states the same bound
                raise _bad(clause, f"a page number is at most {MAX_PAGE:,}")
            pages = (first, last) if pages is None else (max(pages[0], first), min(pages[1], last))
        else:
            for part in value.split(","):
                part = part.strip().lower()
                if not re.fullmatch(r"[0-9a-f]{6,64}", part):
                    raise _bad(clause, "a ref is a document's sha256, or at least its first 6 hex digits")
                refs.append(part)
    return Where(tuple(names), tuple(dict.fromkeys(media)), after, before, pages, tuple(refs), ocr, tuple(clauses))


@dataclass(frozen=True)
class PassageFilter:
    """The passages a query may see: `allowed` (sorted seqs) when set, else all but `excluded`.

    `expression`: the same thing in a backend's own filter language (Milvus: a boolean expression over
    the passages' fields, applied inside its searches); that backend's searcher alone reads it, and
    `nothing` says no passage matches at all (Milvus has no literal for an empty match)."""

    allowed: np.ndarray | None = None
    excluded: np.ndarray | None = None
    expression: str | None = None
    nothing: bool = False

    def admits(self, seqs: np.ndarray) -> np.ndarray:
        """A mask over `seqs`: which are let through."""
        import numpy as np

        seqs = np.asarray(seqs, dtype=np.int64)
        if self.allowed is not None:
            return np.isin(seqs, self.allowed, assume_unique=False)
        if self.excluded is not None and self.excluded.size:
            return ~np.isin(seqs, self.excluded)
        return np.ones(seqs.shape, dtype=bool)

    def hidden(self, total: int) -> int:
        """How many of `total` passages it keeps out (an upper bound with `allowed`)."""
        if self.allowed is not None:
            return max(total - int(self.allowed.size), 0)
        return 0 if self.excluded is None else int(self.excluded.size)
