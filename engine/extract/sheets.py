"""Spreadsheets (Excel .xlsx) and delimited text (.csv, .tsv): rows as records that keep their column names.

A row read on its own ("1999, 42.5, Lyon") means little once cut into a
passage, so each row becomes one line naming its columns from the header
row: "Year: 1999; Revenue: 42.5; City: Lyon". The header is the first row
with a value in it; a column without a header is named by its letter (C).

- XLSX: each sheet a section (its name), in the workbook's order; cells read
  from the sheet XML with lxml's streaming parser straight from the
  bomb-checked ZIP (engine/extract/zipsafe.py), so a sheet of a million rows
  is never held as a tree and empty rows cost only their parsing; a formula
  cell gives its cached value (what Excel last computed and saved); shared
  and inline strings, booleans and errors as written. Numbers are shown as
  stored (a date is a serial number: the sheet's styles are not read).
- CSV/TSV (read in-process, like plain text): the delimiter by extension, else
  sniffed from the first lines; quoted fields as the csv module reads them.

Runs in an extraction worker process (XLSX) or in-process (CSV/TSV).
"""

from __future__ import annotations

import io
import re

from ..errors import invalid
from ..formats import SUFFIX_MEDIA, XLSX, media_type
from .base import Extracted, Limits, Section
from .ooxml import Package

EXTRACTOR_VERSION = 1
_S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_COLUMN = re.compile(r"[A-Z]+")
_MAX_COLUMNS = 16_384  # Excel's own: XFD


def extractor_id() -> str:
    from lxml import etree

    return f"xlsx/lxml-{'.'.join(map(str, etree.LXML_VERSION[:3]))}/{EXTRACTOR_VERSION}"


def records(rows: list[list[str]]) -> list[str]:
    """Rows -> lines "Header: value; ..." (the first non-empty row is the header; empty rows dropped)."""
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    if not rows:
        return []
    header = [cell.strip() for cell in rows[0]]
    lines = ["; ".join(h for h in header if h)]
    for row in rows[1:]:
        pairs = []
        for index, cell in enumerate(row):
            cell = " ".join(cell.split())
            if cell:
                name = header[index] if index < len(header) and header[index] else _letters(index)
                pairs.append(f"{name}: {cell}")
        lines.append("; ".join(pairs))
    return lines


def _letters(index: int) -> str:
    name = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        name = chr(65 + rest) + name
    return name


def _index(reference: str) -> int:
    found = _COLUMN.match(reference or "")
    if not found:
        return -1
    value = 0
    for ch in found.group():
        value = value * 26 + ord(ch) - 64
    return value - 1


def extract_xlsx(data: bytes, label: str, limits: Limits) -> Extracted:
    package = Package(data, label, "Excel workbook", limits)
    try:
        workbook = package.main_part("xl/workbook.xml", "Excel")
        rels = package.relations("xl/workbook.xml")
        strings = _shared_strings(package)
        pieces, sections, offset = [], [], 0
        for sheet in workbook.iter(f"{_S}sheet"):
            rel = rels.get(sheet.get(f"{_R}id", ""))
            if rel is None or rel[2]:
                continue
            lines = records(_rows(package, rel[1], strings))
            if not lines:
                continue
            name = sheet.get("name") or rel[1]
            text = "\n".join([name, *lines])
            sections.append(Section(offset, 1, name))
            pieces.append(text)
            offset += len(text) + 2
    finally:
        package.close()
    if not pieces:
        raise invalid(f"{label} is a workbook with no values in its sheets; there is nothing to index")
    return Extracted(text="\n\n".join(pieces), media_type=media_type(XLSX), sections=tuple(sections),
                     extractor=extractor_id(), metadata={"sheets": str(len(pieces))})


def _shared_strings(package) -> list[str]:
    root = package.xml("xl/sharedStrings.xml")
    if root is None:
        return []
    return ["".join(t.text or "" for t in item.iter(f"{_S}t")) for item in root.iter(f"{_S}si")]


def _rows(package, path: str, strings: list[str]) -> list[list[str]]:
    """A sheet's rows of cell texts, streamed: each row element is cleared once read."""
    from lxml import etree

    raw = package.archive.read(path)
    if raw is None:
        return []
    rows: list[list[str]] = []
    try:
        for _event, row in etree.iterparse(io.BytesIO(raw), tag=f"{_S}row", resolve_entities=False,
                                           no_network=True, huge_tree=False):
            cells: dict[int, str] = {}
            for position, cell in enumerate(row.iter(f"{_S}c")):
                index = _index(cell.get("r", "")) if cell.get("r") else position
                if 0 <= index < _MAX_COLUMNS:
                    value = _value(cell, strings)
                    if value:
                        cells[index] = value
            if cells:
                rows.append([cells.get(i, "") for i in range(max(cells) + 1)])
            row.clear()
            while row.getprevious() is not None:  # drop the rows already read, so memory stays flat
                del row.getparent()[0]
    except etree.XMLSyntaxError as exc:
        raise invalid(f"{package.label} is not a readable Excel workbook: {path} is not well-formed XML ({exc}); "
                      "re-save it from Excel or LibreOffice") from None
    return rows


def _value(cell, strings: list[str]) -> str:
    kind = cell.get("t", "n")
    if kind == "inlineStr":
        return "".join(t.text or "" for t in cell.iter(f"{_S}t"))
    found = cell.find(f"{_S}v")
    value = found.text if found is not None and found.text else ""
    if kind == "s":
        try:
            return strings[int(value)]
        except (ValueError, IndexError):
            return ""
    if kind == "b":
        return {"1": "TRUE", "0": "FALSE"}.get(value, value)
    return value


def extract_delimited(data: bytes, label: str, name: str) -> Extracted:
    """CSV or TSV text as records; raises INVALID_ARGUMENT for text that is not UTF-8 or holds nothing."""
    import csv

    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise invalid(f"{label} is not valid UTF-8 (bad byte at offset {exc.start}); save it as UTF-8 CSV") from None
    lowered = name.lower()
    if lowered.endswith(".tsv") or lowered.endswith(".tab"):
        delimiter = "\t"
    elif lowered.endswith(".csv"):
        delimiter = ","
    else:
        try:
            delimiter = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|").delimiter
        except csv.Error:
            delimiter = ","
    csv.field_size_limit(len(data) + 1)
    rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
    lines = records(rows)
    if not lines:
        raise invalid(f"{label} is empty or only whitespace; there is nothing to index")
    media = SUFFIX_MEDIA[".tsv" if delimiter == "\t" else ".csv"]
    return Extracted(text="\n".join(lines), media_type=media, extractor=f"delimited/csv/{EXTRACTOR_VERSION}")
