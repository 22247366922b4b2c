"""The gateway's JSON schema: the request bodies it validates before the engine sees them, and the answers
it documents (pydantic models; the OpenAPI document and the TypeScript SDK's types are generated from them).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import Path as PathParam
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from ..backend import MAX_OFFSET, MAX_QUERY_CHARS
from ..filters import OCR_TYPE
from ..formats import TYPE_KINDS
from ..names import NAME_PATTERN, NAME_RULE
from ..records import RetrievalMode, VersionView
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


class QueryIn(_Body):
    """Text, or a vector (which searches dense: not with mode sparse), or both."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"anyOf": [
        {"required": ["text"], "properties": {"text": {"type": "string"}}},
        {"required": ["vector"], "properties": {"vector": {"type": "array"}, "text": {"type": "null"},
                                                "mode": {"enum": ["dense", "hybrid", None]}}},
    ]})

    text: str | None = Field(None, max_length=MAX_QUERY_CHARS, pattern=_NOT_BLANK,
                             description="The question or words to search for (not blank).")
    vector: list[Number] | None = Field(None, min_length=1, json_schema_extra=_SOME_NONZERO,
                                        description="A pre-computed query embedding (searches dense).")
    # lax, so 10.0 (an integer to JSON Schema) is taken; a string or a boolean is not a number at all
    k: Annotated[int | None, BeforeValidator(_json_number)] = Field(
        None, ge=1, le=MAX_OFFSET, strict=False, description="Hits wanted (clamped to the operator's KX_MAX_K).")
    mode: RetrievalMode | None = Field(None, strict=False,  # strict bodies would want an enum object, not "dense"
                                       description="hybrid, dense or sparse (default KX_DEFAULT_MODE).")
    rerank: bool | None = Field(None, description="Apply the MMR pass (default KX_RERANK).")
    expand: bool | None = Field(None, description="Expand the query from a first pass's top passages: RM3 terms "
                                                  "for the sparse list, a Rocchio-moved vector for the dense "
                                                  "list (default KX_QUERY_EXPANSION).")
    where: list[Annotated[str, Field(max_length=1000, pattern=WHERE_PATTERN)]] | None = Field(
        None, max_length=64,
        description="Filters, all of which must hold (two of one kind: either): name:GLOB (document name or "
                    "source path), type:pdf, after:YYYY-MM-DD, before:YYYY-MM-DD (a calendar day), pages:A-B "
                    "(1 <= A <= B), ref:REF[,REF] (6 to 64 hex digits). Applied inside both retrievers, before "
                    "fusion.")
    versions: VersionView | None = Field(None, strict=False,
                                         description="latest (default): each lineage's current version only; "
                                                     "all: every stored version.")


class AgentRunIn(_Body):
    goal: str = Field(..., min_length=1, max_length=4000, pattern=_NOT_BLANK,
                      description="What the agent should find out (not blank).")
    dataset: str | None = Field(None, pattern=f"^{NAME_PATTERN}$",
                                description="The dataset to research; none: a plain chat agent, if the "
                                            "gateway has a chat model (KX_AGENT_CHAT_URL).")
    max_steps: int | None = Field(None, ge=1, le=MAX_OFFSET, strict=False,
                                  description="Most searches (never above the gateway's KX_AGENT_MAX_STEPS).")


class ErrorOut(BaseModel):
    code: str
    message: str
    results: list[dict[str, Any]] | None = Field(
        None, description="Only when an ingest stored nothing because every document was refused: each "
                          "document's result (name, status 'refused', code, reason), as a 200's results.")


class HitOut(BaseModel):
    """One passage of an answer: where it lies (chunk, characters, pages, section) and why it ranks where it does."""

    rank: int
    score: float = Field(description="The mode's relevance: fused RRF (hybrid), cosine (dense) or BM25 (sparse).")
    text: str
    passage_ref: str
    document_ref: str
    document_name: str = Field(description="A watched folder's documents are named by their path in it "
                                           "(guide/index); a file's by its name without extension.")
    document_title: str | None = Field(description="The document's own title (metadata, front matter), if any.")
    source_path: str | None = Field(description="The file the document was read from, if it came from one.")
    chunk: str = Field(description='"[chunk i/N]"')
    chunk_index: int
    chunk_count: int
    char_start: int = Field(description="Where the passage begins in the document's stored text.")
    char_end: int
    page_start: int | None = Field(description="First page of the passage (1-based); null without pages.")
    page_end: int | None = Field(description="Last page of the passage; null without pages.")
    section: str | None = Field(description='Heading path at the passage\'s start, e.g. "3 Model › 3.1 LRS '
                                            'model"; null when no heading precedes it.')
    dense_rank: int | None
    dense_score: float | None
    sparse_rank: int | None
    sparse_score: float | None
    fused_score: float
    fused_rank: int
    mmr_moved: int
    duplicate_of: str | None = Field(
        default=None, description="MMR: the passage ref of a higher hit this one nearly repeats, else null.")
    answer_span: tuple[int, int] | None = Field(
        default=None, description="[start, end) in the document's text of the sentence or two of the passage "
                                  "that best answer the query; null without query text.")
    version: int | None = Field(default=None, description="Which version of its lineage (1 = first ingested).")
    superseded_by: str | None = Field(default=None, description="The ref of the lineage's current version when "
                                                                "this hit is from an older one (versions=all).")
    sentence_rank: int | None = Field(
        default=None, description="Hybrid: the passage's rank among the best fused passages by its best sentence "
                                  "(the third RRF list); null outside that head or in a single-retriever mode.")
    sentence_score: float | None = Field(default=None, description="Hybrid: that best sentence's score.")
    lead_ratio: float | None = Field(
        default=None, description="Hybrid: set on sparse's best passage when its BM25 score is at least 1.4 times "
                                  "the runner-up's (this ratio); RRF then counts it once more, at rank 1.")
    ocr: bool = Field(default=False, description="The passage's document was (partly) read by OCR (a scan or an "
                                                 "image): its text may hold misread words.")
    ocr_confidence: float | None = Field(default=None, description="That OCR's mean confidence (0-1); null when "
                                                                   "the document was not read by OCR.")


class QueryOut(BaseModel):
    dataset: str
    query: str | None
    mode: str
    rerank: bool
    k: int
    requested_k: int
    clamped: bool
    notes: list[str]
    timings_ms: dict[str, float]
    dense_coverage: float = Field(
        default=1.0, ge=0.0, le=1.0,
        description="Share of the dataset's passages dense search covered: below 1 while an ingest's embedding "
                    "stage is still working through its backlog (sparse covers every committed passage).")
    expanded_terms: list[str] | None = Field(
        default=None, description="With expand: the terms the first pass's top passages added to the sparse "
                                  "query, best first; null when the query was not expanded.")
    hits: list[HitOut]


class DocumentTextOut(BaseModel):
    ref: str
    text: str = Field(description="The text passages' character ranges index into, as stored at ingest.")


_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut} for code in (400, 401, 403, 404, 412, 413, 500)
}


# -- the guard: token and size, before the body ----------------------------------------


