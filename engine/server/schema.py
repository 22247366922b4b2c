"""The gateway's JSON schema: the request bodies it validates before the engine sees them, and the answers
it documents (pydantic models; the OpenAPI document and the TypeScript SDK's types are generated from them).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Path as PathParam
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model, model_validator

from ..backend import MAX_OFFSET, MAX_QUERY_CHARS
from ..config import ENV, option_help
from ..filters import OCR_TYPE
from ..formats import TYPE_KINDS
from ..names import NAME_PATTERN, NAME_RULE
from ..records import Hit, QueryOptions, QueryResult, RetrievalMode, VersionView, described
from ..text.inputs import MAX_NAME_CHARS, UNSHOWABLE_CLASS

_NO_CONTROL = r"^[^\x00-\x1f\x7f]*$"
_NOT_BLANK = r"[^\s\x1c-\x1f]"  # a character Python's strip() keeps (it also strips \x1c-\x1f)
# engine/text/inputs.py's check_document_name: no C0 or C1 control, no bidirectional override or isolate, and
# '/'- or '\\'-separated segments that are neither empty nor . or ..
_UNNAMEABLE = rf"/\\\x00-\x1f\x7f{UNSHOWABLE_CLASS}"
_SEGMENT_CHAR, _NOT_DOT = rf"[^{_UNNAMEABLE}]", rf"[^{_UNNAMEABLE}.]"
_SEGMENT = rf"(?:{_NOT_DOT}{_SEGMENT_CHAR}*|\.{_NOT_DOT}{_SEGMENT_CHAR}*|\.\.{_SEGMENT_CHAR}+)"  # never . or ..
_DOCUMENT_NAME = rf"^{_SEGMENT}(?:[/\\]{_SEGMENT})*$"
_BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
Name = Annotated[str, PathParam(pattern=f"^{NAME_PATTERN}$", description=f"A dataset name: {NAME_RULE}.")]


class _Body(BaseModel):
    """Unknown fields and loose types are refused (400), not guessed at."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="after")
    def _encodable(self) -> _Body:
        # JSON may carry lone surrogates ("\\ud800"); no store or index can take them
        for field_name, value in self:
            if isinstance(value, str):
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    raise ValueError(f"{field_name} holds a lone surrogate; send valid Unicode text") from None
        return self


# A vector's numbers: finite in float32 (what the indexes store), and not all zero (no direction).
_FLOAT32_MAX = 3.4028234663852886e38
_FLOAT32_TINY = 1.2e-38  # below float32's smallest normal number a value may round to zero
Number = Annotated[float, Field(ge=-_FLOAT32_MAX, le=_FLOAT32_MAX, allow_inf_nan=False, json_schema_extra={"anyOf": [
    {"const": 0}, {"minimum": _FLOAT32_TINY}, {"maximum": -_FLOAT32_TINY}]})]
_SOME_NONZERO: dict[str, Any] = {"contains": {"not": {"const": 0}}}


class DocumentIn(_Body):
    """One document: exactly one of `text` or `data_base64`; `vector` for all documents or none."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"oneOf": [
        {"required": ["text"], "properties": {"text": {"type": "string"}, "data_base64": {"type": "null"}}},
        {"required": ["data_base64"], "properties": {"data_base64": {"type": "string"}, "text": {"type": "null"}}},
    ]})

    text: str | None = Field(None, description="The document as a string (stored as its UTF-8 bytes).")
    data_base64: str | None = Field(None, pattern=_BASE64, description="The document's raw bytes, base64 "
                                                                       "(standard alphabet, padded).")
    name: str | None = Field(None, min_length=1, max_length=MAX_NAME_CHARS, pattern=_DOCUMENT_NAME,
                             description="Display name; default derived from the bytes. No control characters "
                                         "(C1 and bidirectional overrides included), no empty, '.' or '..' "
                                         "path segments.")
    media_type: str | None = Field(None, max_length=200, description="How to read the bytes (application/pdf, "
                                   "text/markdown, ...); default text/plain.")
    source_path: str | None = Field(None, max_length=4096, pattern=_NO_CONTROL,
                                    description="Where the client read it from; no control characters. Stored "
                                                "marked as client-supplied (prefixed 'client:'), never taken for "
                                                "a path on the gateway's machine.")
    vector: list[Number] | None = Field(None, min_length=1, json_schema_extra=_SOME_NONZERO,
                                        description="A pre-computed embedding: the document becomes one "
                                                    "passage with this vector (no model needed).")


class IngestIn(_Body):
    documents: list[DocumentIn] = Field(..., min_length=1, max_length=100_000, json_schema_extra={"anyOf": [
        {"items": {"required": ["vector"], "properties": {"vector": {"type": "array"}}}},  # a vector for every one
        {"items": {"properties": {"vector": {"type": "null"}}}},                            # or for none
    ]}, description="The documents; give a vector for every one of them (all of one length: the dataset's "
                    "dimension) or for none.")


# The shape of one --where clause (engine/filters.py); a date that is no calendar day, or pages B < A, are
# refused by the engine with INVALID_ARGUMENT (rules a pattern cannot state). The `type:` kinds are the
# formats' own (engine/formats.py TYPE_KINDS), so a format added there is taken here too.
_TYPE_KINDS = "|".join(re.escape(kind) for kind in sorted([*TYPE_KINDS, OCR_TYPE]))
WHERE_PATTERN = (rf"^(name:.*\S.*|type:({_TYPE_KINDS}"
                 r"|[A-Za-z0-9.+-]+/[A-Za-z0-9.+-]+)|(after|before):[0-9]{4}-[0-9]{2}-[0-9]{2}|ocr:(yes|no|true|false)"
                 r"|pages:[1-9][0-9]{0,8}(-[1-9][0-9]{0,8})?|ref:[0-9a-fA-F]{6,64}(,[0-9a-fA-F]{6,64})*)$")


def _json_number(value: Any) -> Any:
    """Refuse "5" and true where the schema says integer: lax validation would turn them into 5 and 1."""
    if isinstance(value, (str, bool)):
        raise ValueError("must be a JSON number, not a string or a boolean")
    return value


class _QueryText(_Body):
    """Text, or a vector (which searches dense: not with mode sparse), or both."""

    # oneOf, not anyOf: the two never both hold (the second wants no text), and openapi-typescript writes
    # oneOf as `fields & (A | B)`, so the TypeScript SDK's QueryOptions is this type as it stands
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"oneOf": [
        {"required": ["text"], "properties": {"text": {"type": "string"}}},
        {"required": ["vector"], "properties": {"vector": {"type": "array"}, "text": {"type": "null"},
                                                "mode": {"enum": ["dense", "hybrid", None]}}},
    ]})

    text: str | None = Field(None, max_length=MAX_QUERY_CHARS, pattern=_NOT_BLANK,
                             description="The question or words to search for (not blank).")


# How the JSON body narrows an option's Python type (engine/records.py QueryOptions): a vector is a list of
# finite float32 numbers, a mode or a view one of its enum's values, a filter one clause of the form the
# engine reads. An option not named here goes on the wire as its Python type, so a field added to
# QueryOptions reaches the gateway (its OpenAPI, the TypeScript SDK's types) without a line here.
_WIRE_FORMS: dict[str, tuple[Any, dict[str, Any]]] = {
    "vector": (list[Number] | None, {"min_length": 1, "json_schema_extra": _SOME_NONZERO}),
    # lax, so 10.0 (an integer to JSON Schema) is taken; a string or a boolean is not a number at all
    "k": (Annotated[int | None, BeforeValidator(_json_number)], {"ge": 1, "le": MAX_OFFSET, "strict": False}),
    # strict bodies would want an enum object, not "dense"
    "mode": (RetrievalMode | None, {"strict": False}),
    "where": (list[Annotated[str, Field(max_length=1000, pattern=WHERE_PATTERN)]] | None, {"max_length": 64}),
    "versions": (VersionView | None, {"strict": False}),
}


def _option_fields() -> dict[str, Any]:
    """QueryIn's fields: every QueryOptions field, in its wire form, described by its one Doc."""
    fields: dict[str, Any] = {}
    for name, (kind, doc) in described(QueryOptions).items():
        wire, constraints = _WIRE_FORMS.get(name, (kind, {}))
        fields[name] = (wire, Field(None, description=option_help(doc), **constraints))
    return fields


def _answer_fields(record: type, added: dict[str, Any]) -> dict[str, Any]:
    """An answer's fields: every field of `record` (a dataclass) as its `to_dict()` sends it (always: each is
    required), described by its Doc, and `added`, what to_dict adds or sends in another form."""
    fields: dict[str, Any] = {name: (kind, Field(description=doc.text if doc else None))
                              for name, (kind, doc) in described(record).items()}
    return {**fields, **added}


if TYPE_CHECKING:  # the fields below are made at run time; to a type checker, the bodies as declared
    QueryIn = _QueryText
    HitOut = QueryOut = BaseModel
else:
    QueryIn = create_model("QueryIn", __base__=_QueryText, __doc__=_QueryText.__doc__, **_option_fields())
    HitOut = create_model("HitOut", __doc__=Hit.__doc__.split("\n")[0], **_answer_fields(Hit, {
        "chunk": (str, Field(description='"[chunk i/N]"'))}))
    QueryOut = create_model("QueryOut", __doc__="A query's answer: its hits, and how it was asked and answered.",
                            **_answer_fields(QueryResult, {
                                "clamped": (bool, Field(description="Whether k was clamped (k < requested_k).")),
                                "hits": (list[HitOut], ...)}))


class AgentRunIn(_Body):
    goal: str = Field(..., min_length=1, max_length=4000, pattern=_NOT_BLANK,
                      description="What the agent should find out (not blank).")
    dataset: str | None = Field(None, pattern=f"^{NAME_PATTERN}$",
                                description="The dataset to research; none: a plain chat agent, if the "
                                            f"gateway has a chat model ({ENV.agent_chat_url}).")
    max_steps: int | None = Field(None, ge=1, le=MAX_OFFSET, strict=False,
                                  description=f"Most searches (never above the gateway's {ENV.agent_max_steps}).")


class ErrorOut(BaseModel):
    code: str
    message: str
    results: list[dict[str, Any]] | None = Field(
        None, description="Only when an ingest stored nothing because every document was refused: each "
                          "document's result (name, status 'refused', code, reason), as a 200's results.")


class DocumentTextOut(BaseModel):
    ref: str
    text: str = Field(description="The text passages' character ranges index into, as stored at ingest.")


_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut} for code in (400, 401, 403, 404, 412, 413, 500)
}


# -- the guard: token and size, before the body ----------------------------------------


