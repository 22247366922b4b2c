"""`kx mcp`'s tools' bodies over one Backend: what each answers (text a model reads and `structuredContent`,
the records' own `to_dict()`), and each KxError as a tool error starting with its status (`NOT_FOUND: ...`).

engine/server/mcp_server.py registers them with the MCP SDK; nothing here imports the SDK's server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from mcp.types import CallToolResult, TextContent

from ..backend import MAX_DOCUMENTS_PAGE, Backend
from ..config import ENV
from ..errors import KxError, Status, invalid, not_found
from ..records import DocumentSummary, PassageSpan, QueryOptions, chunk_label, pages_label
from ..text.inputs import from_file, from_text
from ..text.markdown_plain import shown
from .mcp_policy import Policy

if TYPE_CHECKING:
    from typing_extensions import Unpack

MAX_READ_CHARS = 20_000      # most characters read_document hands back in one call
_FIND_PAGES = 100            # a document named (not by ref) is looked for in at most this many pages of 1000
def citation(document: str, page_start: int | None, page_end: int | None, chunk_index: int, chunk_count: int) -> str:
    """`[document p. 6, chunk 3/12]` (`p. 6–7` across pages; no page part for a format without pages)."""
    pages = pages_label(page_start, page_end)
    chunk = chunk_label(chunk_index, chunk_count)[1:-1]  # "chunk 3/12"
    return f"[{document}{' ' + pages if pages else ''}, {chunk}]"


def _error(exc: KxError) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=f"{exc.code}: {exc.message}")],
                          structured_content=exc.to_dict(), is_error=True)


def _answer(text: str, data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _guarded(call: Callable[[], CallToolResult]) -> CallToolResult:
    """The call's answer, or its KxError as a tool error; an unexpected failure is INTERNAL, never a crash."""
    try:
        return call()
    except KxError as exc:
        return _error(exc)
    except Exception as exc:  # a bug: the client hears one line, the server keeps serving
        import logging

        logging.getLogger("kx.mcp").exception("tool failed")
        return _error(KxError(Status.INTERNAL, f"unexpected {type(exc).__name__}: {exc}; see the server's stderr "
                                               "and report it"))


def _hit_lines(data: dict[str, Any]) -> str:
    """A query's answer as a model reads it: one block per hit, citation first."""
    hits = data["hits"]
    head = f"{len(hits)} passage(s) from dataset '{data['dataset']}' ({data['mode']}"
    head += f", k={data['k']}" + (f", asked {data['requested_k']}" if data.get("clamped") else "") + ")"
    lines = [head]
    lines += [f"note: {note}" for note in data.get("notes", [])]
    for hit in hits:
        where = " · ".join(p for p in (hit.get("document_title"), hit.get("section")) if p)
        ranks = ", ".join(f"{name} #{hit[key]}" for name, key in (("dense", "dense_rank"), ("sparse", "sparse_rank"),
                                                                  ("sentence", "sentence_rank"))
                          if hit.get(key) is not None)
        if hit.get("lead_ratio") is not None:
            ranks += f", sparse lead x{hit['lead_ratio']:.2f}"
        lines.append("")
        lines.append(f"{hit['rank']}. {hit['citation']}" + (f" {where}" if where else ""))
        lines.append(f"   document_ref={hit['document_ref']} passage_ref={hit['passage_ref']} "
                     f"chars {hit['char_start']}-{hit['char_end']}" + (f"; {ranks}" if ranks else ""))
        # Markdown as its text (structuredContent keeps the stored text)
        lines.append("   " + shown(hit.get("source_path"), hit["text"]).replace("\n", "\n   "))
    if not hits:
        lines.append("nothing matched; try other words, or mode=sparse for exact terms")
    return "\n".join(lines)


def _document_line(doc: DocumentSummary) -> str:
    extra = [f"{doc.passages} passages", doc.media_type]
    if doc.pages:
        extra.insert(0, f"{doc.pages} pages")
    title = f" \"{doc.title}\"" if doc.title and doc.title != doc.name else ""
    return f"- {doc.name}{title} ({', '.join(extra)}) ref={doc.ref}"


@dataclass
class KxTools:
    """The tools' bodies, over one backend. Each returns a CallToolResult (errors included)."""

    backend: Backend
    policy: Policy = field(default_factory=Policy)

    def list_datasets(self) -> CallToolResult:
        def run() -> CallToolResult:
            datasets = [s.to_dict() for s in self.backend.list_datasets()]
            lines = [f"{len(datasets)} dataset(s)"] + [
                f"- {d['name']}: {d['documents']} documents, {d['passages']} passages, model "
                f"{d.get('embed_model') or 'none'}" for d in datasets]
            if not datasets:
                lines.append("none yet" + ("; add one with ingest_text" if self.policy.allow_ingest else
                                           "; the user adds documents with `kx datasets ingest NAME FILES`"))
            return _answer("\n".join(lines), {"datasets": datasets})
        return _guarded(run)

    def search(self, dataset: str, query: str, **options: Unpack[QueryOptions]) -> CallToolResult:
        def run() -> CallToolResult:
            if not query.strip():
                raise invalid("query is empty; give the question or the words to look for")
            result = self.backend.query(dataset, query, **options)
            data = result.to_dict()
            for hit, record in zip(data["hits"], result.hits):
                hit["citation"] = citation(record.document_name, record.page_start, record.page_end,
                                           record.chunk_index, record.chunk_count)
                hit["pages"] = pages_label(record.page_start, record.page_end)
            data["mode"] = str(data["mode"])
            return _answer(_hit_lines(data), data)
        return _guarded(run)

    def list_documents(self, dataset: str, offset: int = 0, limit: int = 50) -> CallToolResult:
        def run() -> CallToolResult:
            docs = self.backend.list_documents(dataset, offset, limit)
            total = self.backend.dataset_summary(dataset).documents
            following = offset + len(docs)
            data = {"dataset": dataset, "offset": offset, "limit": limit, "total": total,
                    "next_offset": following if following < total else None,
                    "documents": [d.to_dict() for d in docs]}
            if docs:
                lines = [f"documents {offset + 1}-{following} of {total} in '{dataset}'"]
            else:
                lines = [f"no documents from offset {offset}: '{dataset}' holds {total}"
                         + ("; list_documents with offset=0 starts from the first" if total else "")]
            lines += [_document_line(d) for d in docs]
            if data["next_offset"] is not None:
                lines.append(f"more: call list_documents with offset={following}")
            return _answer("\n".join(lines), data)
        return _guarded(run)

    def read_document(self, dataset: str, document: str, passage_ref: str | None = None,
                      chunk: int | None = None, page_start: int | None = None, page_end: int | None = None,
                      offset: int | None = None, context_chars: int = 1000,
                      max_chars: int = 6000) -> CallToolResult:
        def run() -> CallToolResult:
            chosen = [n for n, v in (("passage_ref", passage_ref), ("chunk", chunk), ("page_start", page_start),
                                     ("offset", offset)) if v is not None]
            if len(chosen) > 1:
                raise invalid(f"give one of passage_ref, chunk, page_start or offset, not {' and '.join(chosen)}")
            if page_end is not None and page_start is None:
                raise invalid("page_end needs page_start")
            summary = self._find_document(dataset, document)
            ref = summary.ref if summary else document
            text = self.backend.document_text(dataset, ref)
            spans = self.backend.document_passages(dataset, ref)
            start, end = self._window(text, spans, passage_ref, chunk, page_start, page_end, offset, context_chars)
            focus = self._focus(spans, passage_ref, chunk)
            start, end = _within(start, min(end, len(text)), focus, max_chars)
            covered = [s for s in spans if s.char_start < end and s.char_end > start]
            name = summary.name if summary else ref[:12]
            pages = [p for s in covered for p in (s.page_start, s.page_end) if p is not None]
            first_page, last_page = (min(pages), max(pages)) if pages else (None, None)
            data = {
                "dataset": dataset, "document_ref": ref, "document_name": name,
                "document_title": summary.title if summary else None,
                "char_start": start, "char_end": end, "total_chars": len(text),
                "page_start": first_page, "page_end": last_page,
                "passages": [{**s.to_dict(), "chunk": s.label} for s in covered],
                "previous_offset": max(0, start - max_chars) if start > 0 else None,
                "next_offset": end if end < len(text) else None,
                "text": text[start:end],
            }
            where = pages_label(first_page, last_page)
            head = (f"{name}{' ' + where if where else ''}, characters {start}-{end} of {len(text)}"
                    + (f", {covered[0].label}" if len(covered) == 1 else
                       f", chunks {covered[0].chunk_index + 1}-{covered[-1].chunk_index + 1}/{covered[0].chunk_count}"
                       if covered else ""))
            tail = f"\n[more: read_document with offset={end}]" if end < len(text) else "\n[end of document]"
            return _answer(f"{head}\n\n{text[start:end]}{tail}", data)
        return _guarded(run)

    def ingest_text(self, dataset: str, text: str, name: str | None = None) -> CallToolResult:
        def run() -> CallToolResult:
            self._require_ingest()
            if not text.strip():
                raise invalid("text is empty; give the document's text")
            data = text.encode("utf-8", errors="strict")
            if len(data) > self.policy.max_document_bytes:
                raise invalid(f"text is {len(data):,} bytes, over the {self.policy.max_document_bytes:,}-byte "
                              f"limit ({ENV.max_document_bytes}); split it")
            return self._ingest(dataset, [from_text(text, name)])
        return _guarded(run)

    def ingest_file(self, dataset: str, path: str) -> CallToolResult:
        def run() -> CallToolResult:
            self._require_ingest()
            resolved = self.policy.confine(path)  # then opened without following a link, and checked again
            doc = from_file(resolved, self.policy.max_document_bytes, follow_symlinks=False,
                            vet=self.policy.vet(path))
            return self._ingest(dataset, [doc])
        return _guarded(run)

    # -- helpers ------------------------------------------------------------------------

    def _require_ingest(self) -> None:
        if not self.policy.allow_ingest:
            raise KxError(Status.PERMISSION_DENIED, "this server is read-only; the user can restart it with "
                                                     "`kx mcp --allow-ingest` to let you add documents")

    def _ingest(self, dataset: str, docs: list[Any]) -> CallToolResult:
        report = self.backend.ingest(dataset, docs)
        data = report.to_dict()
        refused = [r for r in report.results if r.status == "refused"]
        if refused and len(refused) == len(report.results):
            first = refused[0]
            raise KxError(Status[first.code or "INVALID_ARGUMENT"], first.reason or f"{first.name} was refused")
        lines = [f"'{dataset}': {data['added']} added, {data['unchanged']} unchanged, {data['refused']} refused; "
                 f"it now holds {data['documents']} stored documents (versions included), {data['passages']} passages"]
        lines += [f"- {r.name}: {r.status}" + (f", {r.passages} passages, ref={r.ref}" if r.ref else "")
                  + (f" ({r.code}: {r.reason})" if r.reason else "") for r in report.results]
        return _answer("\n".join(lines), data)

    def _find_document(self, dataset: str, document: str) -> DocumentSummary | None:
        """The document whose ref, ref prefix (8+ characters) or name is `document`; NOT_FOUND if none."""
        wanted = document.strip()
        if not wanted:
            raise invalid("document is empty; give a document_ref from search or list_documents, or its name")
        lowered = wanted.lower()
        by_prefix = len(lowered) >= 8 and all(c in "0123456789abcdef" for c in lowered)
        named: list[DocumentSummary] = []
        prefixed: list[DocumentSummary] = []
        for page in range(_FIND_PAGES):
            docs = self.backend.list_documents(dataset, page * MAX_DOCUMENTS_PAGE, MAX_DOCUMENTS_PAGE)
            for doc in docs:
                if doc.ref == lowered:
                    return doc
                if by_prefix and doc.ref.startswith(lowered):
                    prefixed.append(doc)
                if doc.name == wanted:
                    named.append(doc)
            if len(docs) < MAX_DOCUMENTS_PAGE:
                break
        else:
            if len(lowered) == 64 and by_prefix:
                return None  # a full ref past the pages searched: read it by ref without its name
        if len(prefixed) > 1:  # a short prefix two refs share: reading either would be a guess
            raise invalid(f"{len(prefixed)} documents in '{dataset}' have refs starting {lowered!r}; give more of "
                          f"the ref ({', '.join(d.ref[:16] for d in prefixed[:5])})")
        if prefixed:
            return prefixed[0]
        if len(named) > 1:
            raise invalid(f"{len(named)} documents in '{dataset}' are named {wanted!r}; give the document_ref "
                          f"instead ({', '.join(d.ref[:12] for d in named[:5])})")
        if named:
            return named[0]
        raise not_found(f"no document {wanted!r} in dataset '{dataset}' (by ref or name); list_documents shows "
                        "what is there")

    @staticmethod
    def _focus(spans: list[PassageSpan], passage_ref: str | None, chunk: int | None) -> tuple[int, int] | None:
        """The character range of the passage or chunk read around (`_window` has checked it exists)."""
        span = (next((s for s in spans if s.ref == passage_ref), None) if passage_ref is not None
                else spans[chunk - 1] if chunk is not None else None)
        return (span.char_start, span.char_end) if span is not None else None

    @staticmethod
    def _window(text: str, spans: list[PassageSpan], passage_ref: str | None, chunk: int | None,
                page_start: int | None, page_end: int | None, offset: int | None,
                context: int) -> tuple[int, int]:
        if passage_ref is not None:
            span = next((s for s in spans if s.ref == passage_ref), None)
            if span is None:
                raise not_found(f"passage {passage_ref[:16]!r} is not in this document; use a passage_ref from a "
                                "search hit of the same document")
            return max(0, span.char_start - context), min(len(text), span.char_end + context)
        if chunk is not None:
            if not spans or not 1 <= chunk <= len(spans):
                raise invalid(f"chunk must be from 1 to {len(spans)} for this document, got {chunk}")
            span = spans[chunk - 1]
            return max(0, span.char_start - context), min(len(text), span.char_end + context)
        if page_start is not None:
            last = page_end if page_end is not None else page_start
            if last < page_start:
                raise invalid(f"page_end ({last}) is before page_start ({page_start})")
            inside = [s for s in spans if s.page_start is not None
                      and s.page_start <= last and (s.page_end or s.page_start) >= page_start]
            if not inside:
                pages = [p for s in spans for p in (s.page_start, s.page_end) if p is not None]
                if not pages:
                    raise invalid("this document has no pages (not a paged format); read it by offset or chunk")
                raise invalid(f"no passage lies on pages {page_start}-{last}; the document spans pages "
                              f"{min(pages)}-{max(pages)}")
            return min(s.char_start for s in inside), max(s.char_end for s in inside)
        start = offset or 0
        if start > len(text):
            raise invalid(f"offset {start} is past the document's end ({len(text)} characters)")
        return start, len(text)


def _within(start: int, end: int, focus: tuple[int, int] | None, max_chars: int) -> tuple[int, int]:
    """[start, end) cut to `max_chars`, keeping `focus` (a passage read around) in it, its context split either
    side: cut from the end, a passage after more than max_chars of context was not in what came back at all."""
    if end - start <= max_chars:
        return start, end
    if focus is None:
        return start, start + max_chars
    first, last = focus
    if last - first >= max_chars:
        return first, first + max_chars
    spare = max_chars - (last - first)
    after = min(end - last, spare - min(first - start, spare // 2))
    before = min(first - start, spare - after)
    return first - before, last + after


