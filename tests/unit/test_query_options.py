"""The query's options are written once (engine/records.py QueryOptions): every backend's `query` takes
them as keywords, and `run_query` (engine/query.py) is their one definition. This holds the two together."""

from __future__ import annotations

import inspect

import pytest

from engine import Engine, KxClient, load_settings
from engine.milvus.backend import MilvusBackend
from engine.query import run_query
from engine.records import QueryOptions


def test_query_options_are_run_querys_keywords() -> None:
    keywords = {name for name, p in inspect.signature(run_query).parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert keywords == set(QueryOptions.__annotations__)


@pytest.mark.parametrize("backend", [Engine, MilvusBackend, KxClient])
def test_every_backend_takes_the_options_and_nothing_else(backend: type) -> None:
    parameters = inspect.signature(backend.query).parameters
    assert list(parameters)[:3] == ["self", "name", "text"]
    assert parameters["options"].kind is inspect.Parameter.VAR_KEYWORD


def test_a_wrong_option_is_refused_before_anything_is_sent(kx_home) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        Engine(load_settings()).query("notes", "text", top_k=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument.*top_k"):
        KxClient("http://127.0.0.1:9", token="t").query("notes", "text", top_k=3)  # type: ignore[call-arg]
