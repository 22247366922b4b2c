"""A page's internal DTD subset, read the safe way: its inline entities expanded as text, nothing fetched.

An XHTML page may open with `<!DOCTYPE html ... [ <!ENTITY co "Acme"> ]>`
and write `&co;` in its text. lxml's HTML parser knows no internal subset:
it ends the doctype at the first `>`, so the page's text began with `]>`
and kept `&co;` as written. `expand_internal_subset` takes the subset out of
the doctype and puts each internal general entity's value where it is
referenced, before the page is parsed:

- A value is text, never markup: its `<` is escaped, so an entity cannot
  add elements (or scripts) to the page. Character references and the
  predefined entities in a value are left for the HTML parser to resolve.
- Entities may reference entities declared before them; expansion is
  bounded (`MAX_GROWTH` bytes more than the page in all), so a "billion
  laughs" page is refused instead of filling memory. A cycle is refused.
- External entities (SYSTEM/PUBLIC) are never fetched or opened: their
  references are dropped and a note says which ones were.
- Parameter entities and the other declarations only shape validation; they
  are dropped with the subset.

Pages without an internal subset come back unchanged (the same bytes).
Works on bytes of any ASCII-compatible encoding (the doctype is ASCII).
"""

from __future__ import annotations

import re

from ..errors import invalid

MAX_GROWTH = 16 * 2**20  # bytes the expansion may add to a page, in all
_MAX_DEPTH = 32          # entities referencing entities, at most this deep

# The prolog before the doctype: a byte-order mark, the XML declaration, comments, processing instructions.
_PROLOG = re.compile(rb"\A(?:\xef\xbb\xbf)?(?:\s+|<\?.*?\?>|<!--.*?-->)*", re.DOTALL)
_DOCTYPE_HEAD = re.compile(rb"<!DOCTYPE\b", re.IGNORECASE)
_NAME = rb"[A-Za-z_:\x80-\xff][\w.:\x80-\xff-]*"
_ENTITY = re.compile(rb"<!ENTITY\s+(%\s+)?(" + _NAME + rb")\s+(.*)>\Z", re.DOTALL)
_REFERENCE = re.compile(rb"&(" + _NAME + rb");")


def expand_internal_subset(data: bytes, label: str) -> tuple[bytes, tuple[str, ...]]:
    """(the page with its internal subset taken out and its entities expanded, notes); unchanged without one."""
    start = _PROLOG.match(data).end()  # type: ignore[union-attr]  # the pattern matches the empty string
    head = _DOCTYPE_HEAD.match(data, start)
    if head is None:
        return data, ()
    found = _split_doctype(data, head.end())
    if found is None:  # a doctype without a subset, or one we cannot read: the parser has it as before
        return data, ()
    public_part, declarations, end = found
    values, external = _entities(declarations, label)
    page = data[:start] + b"<!DOCTYPE" + public_part.rstrip() + b">" + _expanded(data[end:], values, external, label)
    notes: tuple[str, ...] = ()
    if external:
        notes = (f"{label}: its external entities ({', '.join(sorted(n.decode('utf-8', 'replace') for n in external))})"
                 " were not fetched; their references were left out",)
    return page, notes


def _split_doctype(data: bytes, at: int) -> tuple[bytes, list[bytes], int] | None:
    """(the doctype's words before `[`, the subset's declarations, the offset after the closing `]>`) or None."""
    # the words before the subset (a name, PUBLIC/SYSTEM and quoted literals) end at `[`; a `>` first: no subset
    position = _first_unquoted(data, at, b">[")
    if position < 0 or data[position:position + 1] == b">":
        return None
    public_part, position = data[at:position], position + 1
    declarations: list[bytes] = []
    while position < len(data):
        while position < len(data) and data[position:position + 1].isspace():
            position += 1
        if data.startswith(b"]", position):
            close = re.compile(rb"\]\s*>").match(data, position)
            return (public_part, declarations, close.end()) if close else None
        if data.startswith(b"<!--", position):
            ends = data.find(b"-->", position + 4)
            if ends < 0:
                return None
            position = ends + 3
        elif data.startswith(b"<", position):
            ends = _declaration_end(data, position)
            if ends < 0:
                return None
            declarations.append(data[position:ends])
            position = ends
        elif data.startswith(b"%", position):  # a parameter entity reference: shapes validation only
            ends = data.find(b";", position)
            if ends < 0:
                return None
            position = ends + 1
        else:
            return None
    return None


def _declaration_end(data: bytes, position: int) -> int:
    """The offset after the `>` closing the declaration at `position` (quoted `>`s skipped), or -1."""
    end = _first_unquoted(data, position + 1, b">")
    return end + 1 if end >= 0 else -1


def _first_unquoted(data: bytes, start: int, stops: bytes) -> int:
    """The offset of the first byte of `stops` at or after `start` outside a quoted literal, or -1."""
    quote = None
    for offset in range(start, len(data)):
        ch = data[offset:offset + 1]
        if quote:
            quote = None if ch == quote else quote
        elif ch in (b'"', b"'"):
            quote = ch
        elif ch in stops:
            return offset
    return -1


def _entities(declarations: list[bytes], label: str) -> tuple[dict[bytes, bytes], set[bytes]]:
    """The internal general entities' literal values, and the names of the external ones."""
    values: dict[bytes, bytes] = {}
    external: set[bytes] = set()
    for declaration in declarations:
        match = _ENTITY.match(declaration)
        if match is None or match.group(1):  # ELEMENT/ATTLIST/NOTATION, or a parameter entity
            continue
        name, body = match.group(2), match.group(3).strip()
        if name in values or name in external:  # XML: the first declaration binds
            continue
        if body[:1] in (b'"', b"'") and body.endswith(body[:1]) and len(body) >= 2:
            values[name] = body[1:-1]
        else:  # SYSTEM "..." or PUBLIC "..." "...": never fetched
            external.add(name)
    return values, external


def _expanded(text: bytes, values: dict[bytes, bytes], external: set[bytes], label: str) -> bytes:
    """`text` with every reference to a declared entity replaced by its expanded value (as text)."""
    memo: dict[bytes, bytes] = {}
    grown = held = 0  # bytes added to the page; bytes of expanded values held (both bounded by MAX_GROWTH)

    def refuse(why: str) -> Exception:
        return invalid(f"{label} declares entities that {why}; it is not read (re-save the page without its "
                       "internal DTD)")

    def value_of(name: bytes, depth: int, seen: tuple[bytes, ...]) -> bytes:
        if name in memo:
            return memo[name]
        if name in seen or depth > _MAX_DEPTH:
            raise refuse("reference themselves or nest too deep")
        raw = values[name].replace(b"<", b"&lt;")  # text, never markup
        expanded = _REFERENCE.sub(lambda m: substitute(m, depth + 1, seen + (name,)), raw)
        nonlocal held
        held += len(expanded)
        if held > MAX_GROWTH:
            raise refuse(f"expand beyond {MAX_GROWTH // 2**20} MB")
        memo[name] = expanded
        return expanded

    def substitute(match: re.Match[bytes], depth: int, seen: tuple[bytes, ...]) -> bytes:
        name = match.group(1)
        if name in external:
            return b""
        if name not in values:
            return match.group(0)  # &amp;, &#160;, or a name the HTML parser knows
        return value_of(name, depth, seen)

    def top(match: re.Match[bytes]) -> bytes:
        nonlocal grown
        value = substitute(match, 0, ())
        grown += len(value) - len(match.group(0))
        if grown > MAX_GROWTH:
            raise refuse(f"expand the page by more than {MAX_GROWTH // 2**20} MB")
        return value

    if not values and not external:
        return text
    return _REFERENCE.sub(top, text)
