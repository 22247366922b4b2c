"""The `outputSchema` each `kx mcp` tool declares: what its `structuredContent` holds on success.

A client validates a tool's structured content against it (the official
`mcp` client does, on every successful call). Each schema requires the fields
kx's tools always send, with their JSON types, and allows more: the content is
the records' own `to_dict()`, so a field a record gains reaches clients
without a change here (and without breaking a client that validates). A tool
error carries `{code, message}` instead; clients validate successes only.
"""

from __future__ import annotations

from typing import Any

_INT = {"type": "integer"}
_STR = {"type": "string"}
_NUM = {"type": "number"}
_BOOL = {"type": "boolean"}


def _opt(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _object(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "object", "required": sorted(required), "properties": {**required, **(optional or {})}}


_DOCUMENT = _object(
    {"name": _STR, "ref": _STR, "media_type": _STR, "passages": _INT, "ingested_at": _NUM, "size": _INT},
    {"pages": _opt(_INT), "title": _opt(_STR), "source_path": _opt(_STR), "version": _opt(_INT),
     "notes": {"type": "array", "items": _STR}})

_HIT = _object(
    {"rank": _INT, "score": _NUM, "text": _STR, "citation": _STR, "passage_ref": _STR, "document_ref": _STR,
     "document_name": _STR, "chunk_index": _INT, "chunk_count": _INT, "char_start": _INT, "char_end": _INT},
    {"pages": _opt(_STR), "page_start": _opt(_INT), "page_end": _opt(_INT), "section": _opt(_STR),
     "document_title": _opt(_STR), "dense_rank": _opt(_INT), "sparse_rank": _opt(_INT),
     "dense_score": _opt(_NUM), "sparse_score": _opt(_NUM), "version": _opt(_INT)})

_INGEST = _object(
    {"dataset": _STR, "added": _INT, "unchanged": _INT, "refused": _INT, "documents": _INT, "passages": _INT,
     "results": {"type": "array", "items": _object({"name": _STR, "status": {"enum": ["added", "unchanged",
                                                                                       "refused"]}},
                                                   {"ref": _opt(_STR), "passages": _opt(_INT), "code": _opt(_STR),
                                                    "reason": _opt(_STR)})}})

OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "list_datasets": _object({"datasets": {"type": "array", "items": _object(
        {"name": _STR, "documents": _INT, "passages": _INT}, {"embed_model": _opt(_STR)})}}),
    "search": _object({"dataset": _STR, "query": _STR, "mode": {"enum": ["hybrid", "dense", "sparse"]}, "k": _INT,
                       "requested_k": _INT, "clamped": _BOOL, "notes": {"type": "array", "items": _STR},
                       "hits": {"type": "array", "items": _HIT}}),
    "read_document": _object(
        {"dataset": _STR, "document_ref": _STR, "document_name": _STR, "char_start": _INT, "char_end": _INT,
         "total_chars": _INT, "text": _STR, "previous_offset": _opt(_INT), "next_offset": _opt(_INT),
         "page_start": _opt(_INT), "page_end": _opt(_INT), "document_title": _opt(_STR),
         "passages": {"type": "array", "items": _object({"ref": _STR, "char_start": _INT, "char_end": _INT,
                                                         "chunk": _STR})}}),
    "list_documents": _object({"dataset": _STR, "offset": _INT, "limit": _INT, "total": _INT,
                               "next_offset": _opt(_INT), "documents": {"type": "array", "items": _DOCUMENT}}),
    "ingest_text": _INGEST,
    "ingest_file": _INGEST,
}


def declare_output_schemas(tool_manager: Any) -> None:
    """Give each registered kx tool its output schema (the SDK derives one only from a return annotation,
    and kx's tools return a CallToolResult, which carries both the text and the structured content)."""
    for tool in tool_manager.list_tools():
        schema = OUTPUT_SCHEMAS.get(tool.name)
        if schema is not None:
            tool.fn_metadata.output_schema = schema
