"""How kx datasets are laid out in Milvus: collection names, fields, indexes, the analyzer.

One dataset is three collections, never a shared one with a dataset field:

    kxp_<name>   passages: text (BM25 analyzer), provenance, the dense vector, the BM25 sparse vector
    kxd_<name>   documents: the catalogue row of each document (the commit point of an ingest)
    kxt_<name>   document texts, in pieces (what passages' character ranges index into)
    kxl_<name>   lineage events, append-only: which stored version of a lineage is current, or that it was
                 retired (engine/embedded/catalogue/lineage_log.py's `lineage_events`), made when a dataset
                 first records one

plus one registry `kx_datasets` (a row per dataset: its fingerprint and creation time).

Why a collection per dataset: a FLOAT_VECTOR field has one fixed dimension,
and datasets may hold vectors of different models (384 for the bundled model,
anything for pre-computed vectors), so they cannot share a vector field; a
collection is also the unit Milvus loads, releases, drops, shards and
replicates, so one busy dataset can be given more shards or replicas without
touching the others, and a search never filters other datasets' rows out.
The catalogue lives in Milvus too (not in a local SQLite file): the machines
answering queries for a cluster share no disk, and the document rows must be
as reachable as the passages. Milvus insists on a vector field in every
collection, so the catalogue collections carry a 2-dimensional placeholder.

The analyzer is the one that behaves the same on milvus-lite and a cluster
(measured: lite rejects the "english" analyzer and silently ignores a stemmer
filter): the standard tokenizer and lowercasing, no stemming, no stopwords.
Sparse results therefore differ from the embedded engine's (which stems and
drops stopwords); the fingerprint records the analyzer (analysis.MILVUS_ANALYZER_VERSION).
"""

from __future__ import annotations

import re
from typing import Any

from ..text.analysis import MILVUS_ANALYZER as ANALYZER

REGISTRY = "kx_datasets"
SCHEMA_VERSION = 1

# Milvus caps a VARCHAR at 65,535 bytes. Longer passage texts are stored cut
# at that many bytes (BM25 then sees only their head) and read back from the
# document's text; document texts are stored in pieces small enough for any
# UTF-8 (4 bytes a character at most).
VARCHAR_BYTES = 65_535
TEXT_PIECE_CHARS = 16_000
PLACEHOLDER = [1.0, 0.0]   # the catalogue collections' vector: Milvus requires one per collection

# The embedded engine's HNSW knobs, so both backends build comparable graphs.
HNSW_M = 12
HNSW_EF_CONSTRUCTION = 200


def encode_name(name: str) -> str:
    """A dataset name as it may appear in a collection name (letters, digits, '_').

    '_' becomes '__' and '-' becomes '_d', which no other name produces, so
    'a-b' and 'a_b' get different collections.
    """
    return re.sub(r"[_-]", lambda m: "__" if m.group() == "_" else "_d", name)


def collections_of(name: str) -> tuple[str, str, str]:
    """(passages, documents, texts) collection names of dataset `name`."""
    enc = encode_name(name)
    return f"kxp_{enc}", f"kxd_{enc}", f"kxt_{enc}"


def lineages_of(name: str) -> str:
    """The lineage events collection of dataset `name` (absent in datasets made before lineages)."""
    return f"kxl_{encode_name(name)}"


def _client_types():
    from pymilvus import (  # only reached once a backend connected
        DataType,
        Function,
        FunctionType,
    )

    return DataType, Function, FunctionType


def passages_schema(client: Any, dimension: int) -> tuple[Any, Any]:
    """The passages collection's schema and index parameters (dense HNSW COSINE, BM25 inverted index)."""
    DataType, Function, FunctionType = _client_types()
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("ref", DataType.VARCHAR, is_primary=True, max_length=64)
    schema.add_field("doc_ref", DataType.VARCHAR, max_length=64)
    for field in ("chunk_index", "chunk_count", "char_start", "char_end"):
        schema.add_field(field, DataType.INT64)
    schema.add_field("text", DataType.VARCHAR, max_length=VARCHAR_BYTES, enable_analyzer=True,
                     analyzer_params=ANALYZER)
    schema.add_field("text_cut", DataType.BOOL)   # True: `text` is a head; the whole is in the document's text
    schema.add_field("page_start", DataType.INT64, nullable=True)
    schema.add_field("page_end", DataType.INT64, nullable=True)
    schema.add_field("section", DataType.VARCHAR, max_length=VARCHAR_BYTES, nullable=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=int(dimension))
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["text"],
                                 output_field_names=["sparse"]))
    index = client.prepare_index_params()
    index.add_index("vector", index_type="HNSW", metric_type="COSINE",
                    params={"M": HNSW_M, "efConstruction": HNSW_EF_CONSTRUCTION})
    index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")  # AUTOINDEX is refused
    return schema, index


def documents_schema(client: Any) -> tuple[Any, Any]:
    DataType, _, _ = _client_types()
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("ref", DataType.VARCHAR, is_primary=True, max_length=64)
    schema.add_field("name", DataType.VARCHAR, max_length=VARCHAR_BYTES)
    schema.add_field("source_path", DataType.VARCHAR, max_length=VARCHAR_BYTES, nullable=True)
    schema.add_field("size", DataType.INT64)
    schema.add_field("media_type", DataType.VARCHAR, max_length=256)
    schema.add_field("ingested_at", DataType.DOUBLE)
    schema.add_field("text_length", DataType.INT64)
    schema.add_field("passage_count", DataType.INT64)
    schema.add_field("text_pieces", DataType.INT64)
    schema.add_field("title", DataType.VARCHAR, max_length=VARCHAR_BYTES, nullable=True)
    schema.add_field("page_count", DataType.INT64, nullable=True)
    schema.add_field("extractor", DataType.VARCHAR, max_length=256, nullable=True)
    schema.add_field("notes", DataType.VARCHAR, max_length=VARCHAR_BYTES, nullable=True)  # JSON list
    schema.add_field("_v", DataType.FLOAT_VECTOR, dim=len(PLACEHOLDER))
    return schema, _placeholder_index(client)


def texts_schema(client: Any) -> tuple[Any, Any]:
    DataType, _, _ = _client_types()
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("key", DataType.VARCHAR, is_primary=True, max_length=80)   # "<doc ref>:<piece>"
    schema.add_field("doc_ref", DataType.VARCHAR, max_length=64)
    schema.add_field("piece", DataType.INT64)
    schema.add_field("text", DataType.VARCHAR, max_length=VARCHAR_BYTES)
    schema.add_field("_v", DataType.FLOAT_VECTOR, dim=len(PLACEHOLDER))
    return schema, _placeholder_index(client)


def lineages_schema(client: Any) -> tuple[Any, Any]:
    """One row per lineage event; `seq` orders them (nanoseconds since the epoch, unique per writer)."""
    DataType, _, _ = _client_types()
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("seq", DataType.INT64, is_primary=True)
    schema.add_field("lineage", DataType.VARCHAR, max_length=VARCHAR_BYTES)
    schema.add_field("doc_ref", DataType.VARCHAR, max_length=64, nullable=True)   # NULL: the lineage was retired
    schema.add_field("at", DataType.DOUBLE)
    # a rename: lineage `moved_from` continues as `lineage`, its file now at `source_path`
    schema.add_field("moved_from", DataType.VARCHAR, max_length=VARCHAR_BYTES, nullable=True)
    schema.add_field("source_path", DataType.VARCHAR, max_length=VARCHAR_BYTES, nullable=True)
    schema.add_field("_v", DataType.FLOAT_VECTOR, dim=len(PLACEHOLDER))
    return schema, _placeholder_index(client)


def registry_schema(client: Any) -> tuple[Any, Any]:
    DataType, _, _ = _client_types()
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("name", DataType.VARCHAR, is_primary=True, max_length=64)
    schema.add_field("fingerprint", DataType.VARCHAR, max_length=4096)   # JSON
    schema.add_field("created_at", DataType.DOUBLE)
    schema.add_field("schema_version", DataType.INT64)
    schema.add_field("_v", DataType.FLOAT_VECTOR, dim=len(PLACEHOLDER))
    return schema, _placeholder_index(client)


def _placeholder_index(client: Any) -> Any:
    index = client.prepare_index_params()
    index.add_index("_v", index_type="FLAT", metric_type="L2")
    return index


def cut_to_bytes(text: str, limit: int = VARCHAR_BYTES) -> tuple[str, bool]:
    """`text`, or its longest head that fits in `limit` UTF-8 bytes; and whether it was cut."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text, False
    return data[:limit].decode("utf-8", errors="ignore"), True
