"""The `outputSchema` each `kx mcp` tool declares: what its `structuredContent` holds on success.

A client validates a tool's structured content against it (the official
`mcp` client does, on every successful call). Each schema requires the fields
kx's tools always send, with their JSON types, and allows more: the content is
the records' own `to_dict()`, so a field a record gains reaches clients
without a change here (and without breaking a client that validates). search's is the gateway's own
answer schema, derived from the records (`search_schema`). A tool
error carries `{code, message}` instead; clients validate successes only.
"""

from __future__ import annotations

from typing import Any

_INT = {"type": "integer"}
_STR = {"type": "string"}
_NUM = {"type": "number"}


def _opt(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _object(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "object", "required": sorted(required), "properties": {**required, **(optional or {})}}


_DOCUMENT = _object(
    {"name": _STR, "ref": _STR, "media_type": _STR, "passages": _INT, "ingested_at": _NUM, "size": _INT},
    {"pages": _opt(_INT), "title": _opt(_STR), "source_path": _opt(_STR), "version": _opt(_INT),
     "notes": {"type": "array", "items": _STR}})

_INGEST = _object(
    {"dataset": _STR, "added": _INT, "unchanged": _INT, "refused": _INT, "documents": _INT, "passages": _INT,
     "results": {"type": "array", "items": _object({"name": _STR, "status": {"enum": ["added", "unchanged",
                                                                                       "refused"]}},
                                                   {"ref": _opt(_STR), "passages": _opt(_INT), "code": _opt(_STR),
                                                    "reason": _opt(_STR)})}})

OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "list_datasets": _object({"datasets": {"type": "array", "items": _object(
        {"name": _STR, "documents": _INT, "passages": _INT}, {"embed_model": _opt(_STR)})}}),
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


def search_schema() -> dict[str, Any]:
    """search's structured content: the gateway's QueryOut (engine/server/schema.py: every field a
    QueryResult's to_dict sends, derived from the record), each hit with its citation and pages label too."""
    from .schema import QueryOut

    schema = QueryOut.model_json_schema()
    hit = schema["$defs"]["HitOut"]
    hit["properties"] = {**hit["properties"], "citation": _STR, "pages": _opt(_STR)}
    hit["required"] = [*hit["required"], "citation", "pages"]
    return schema


def declare_output_schemas(tool_manager: Any) -> None:
    """Give each registered kx tool its output schema (the SDK derives one only from a return annotation,
    and kx's tools return a CallToolResult, which carries both the text and the structured content)."""
    schemas = {**OUTPUT_SCHEMAS, "search": search_schema()}
    for tool in tool_manager.list_tools():
        schema = schemas.get(tool.name)
        if schema is not None:
            tool.fn_metadata.output_schema = schema
