"""A dataset remembers its index settings (engine/dataset_settings.py): a command that set none explicitly
uses the dataset's, through the one Engine the CLI, the gateway and the TUI all call; an explicit one that
differs is refused, naming where it came from and the command that works."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Engine, KxError, Status, load_settings
from engine.text.inputs import from_text

from .helpers import HashEmbedder

LONG = " ".join(f"Shelf {i} holds the binder of invoices for customer {i}." for i in range(60))


def test_a_plain_engine_ingests_and_queries_under_the_dataset_s_own_chunking(kx_home: Path) -> None:
    Engine(load_settings({"chunk_size": 300, "chunk_overlap": 40}), embedder=HashEmbedder()).ingest(
        "small", [from_text(LONG, name="first")])
    plain = Engine(load_settings(env={"KX_HOME": str(kx_home)}), embedder=HashEmbedder())
    assert plain.settings.chunk_size == 1000 and plain.settings.sources["chunk_size"] == "default"
    plain.ingest("small", [from_text(LONG + " And one more shelf.", name="second")])
    second = [d for d in plain.list_documents("small") if d.name == "second"][0]
    assert max(p.char_end - p.char_start for p in plain.document_passages("small", second.ref)) <= 300
    assert plain.query("small", "binder of invoices customer 7", mode="sparse").hits
    view = plain.for_dataset("small")
    assert view is not plain and view.settings.sources["chunk_size"] == "dataset small"
    assert plain.for_dataset("small") is view   # made once, kept
    plain.close()


def test_an_explicit_setting_that_differs_is_refused_naming_its_source_and_the_fix(kx_home: Path) -> None:
    Engine(load_settings({"chunk_size": 300, "chunk_overlap": 40}), embedder=HashEmbedder()).ingest(
        "small", [from_text(LONG)])
    told = Engine(load_settings(env={"KX_HOME": str(kx_home), "KX_CHUNK_SIZE": "500"}), embedder=HashEmbedder())
    with pytest.raises(KxError) as refused:
        told.query("small", "binder", mode="sparse")
    assert refused.value.status is Status.FAILED_PRECONDITION
    message = refused.value.message
    assert "chunk_size: 300 -> 500" in message and "chunk_size (env KX_CHUNK_SIZE)" in message
    assert "kx --set chunk_size=300 datasets query small" in message
    assert "kx datasets rebuild small --as NEW_NAME --set chunk_size=500" in message
