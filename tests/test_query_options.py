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


def test_every_option_a_person_types_is_a_cli_option_with_the_declarations_help() -> None:
    """kx datasets query's options are derived from QueryOptions (kx_tui/cli/query_options.py): each field but
    a pre-computed vector is one, described by its one Doc, and reaches the engine by its own name."""
    import click

    from engine.config import option_help
    from engine.records import described
    from kx_tui.cli.query_options import _from_type, engine_options
    from kx_tui.cli.root import query

    options = {p.name: p for p in query.params if isinstance(p, click.Option)}
    for name, (_, doc) in described(QueryOptions).items():
        assert doc is not None, f"QueryOptions.{name} has no Doc"
        if doc.programs_only:
            assert name not in options
            continue
        assert options[name].help == option_help(doc) and options[name].default is None
    assert engine_options({"k": 3, "mode": "SPARSE", "rerank": "Off", "where": ("type:pdf",), "versions": "all",
                           "expand": False, "raw": True}) == {
        "k": 3, "mode": "sparse", "rerank": False, "where": ["type:pdf"], "versions": "all", "expand": False}
    assert engine_options({"k": None, "where": ()}) == {}  # unset: the settings decide
    # a field added to QueryOptions becomes an option from its type alone
    assert _from_type("min_score", float | None) == (("--min-score",), {"type": float})
    assert _from_type("exact", bool | None) == (("--exact/--no-exact",), {})


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


def test_query_text_too_long_or_not_text_is_invalid_everywhere(hash_engine: Engine) -> None:
    """A pasted book or bytes that were not UTF-8 (a lone surrogate) are refused before any work, with the
    limit or the character named, in-process and on the command line; the gateway's schema refuses JSON's
    own "\\ud800" escape, naming the field."""
    import httpx

    from engine import KxError, Status
    from engine.query import MAX_QUERY_CHARS
    from engine.text.inputs import from_text

    from .helpers import run_cli, serving

    hash_engine.ingest("yaks", [from_text("yaks graze on the high plateau", "yaks")])
    for text, said in (("yaks " * (MAX_QUERY_CHARS // 5 + 1), "at most 100,000"),
                       ("yaks \udcff", "\\xff at character 6"), ("yaks \ud800 graze", "\\ud800 at character 6")):
        with pytest.raises(KxError) as err:
            hash_engine.query("yaks", text, mode="sparse")
        assert err.value.status is Status.INVALID_ARGUMENT and said in err.value.message
    shown = run_cli("datasets", "query", "yaks", "yaks \udcff", "--mode", "sparse")
    assert shown.code != 0 and "INVALID_ARGUMENT" in shown.stderr and "not valid text" in shown.stderr
    assert [h.document_name for h in hash_engine.query("yaks", "yaks " * 20_000, mode="sparse").hits] == ["yaks"]
    with serving(hash_engine) as (url, token):
        answer = httpx.post(f"{url}/v1/datasets/yaks/query", timeout=30, content=b'{"text": "yaks \\ud800"}',
                            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    assert answer.status_code == 400 and answer.json()["code"] == "INVALID_ARGUMENT", answer.text
    assert answer.json()["message"].startswith("text:")   # the gateway's schema names the field


def test_a_unit_query_vector_is_searched_as_given_and_any_other_is_scaled_to_unit_length() -> None:
    # the model's own vector sent with its words must search exactly as the words alone do: scaled once more
    # it would differ in the last bits (and a dense score in its 6th decimal)
    import numpy as np

    from engine.errors import KxError
    from engine.vectors import checked_vectors

    def _given_query_vector(vector):  # as run_query takes a caller's vector
        return checked_vectors([vector], 1, "the query vector")[0]

    rng = np.random.default_rng(5)
    for _ in range(200):
        raw = rng.standard_normal(384).astype(np.float32)
        unit = (raw / np.linalg.norm(raw)).astype(np.float32)   # as a model normalises: in float32
        assert _given_query_vector(unit).tobytes() == unit.tobytes()
        assert _given_query_vector(unit.tolist()).tobytes() == unit.tobytes()
        scaled = _given_query_vector(raw * 3.0)
        assert abs(float(np.linalg.norm(scaled.astype(np.float64))) - 1.0) < 1e-6
        assert np.allclose(scaled, unit, atol=1e-6)
    with pytest.raises(KxError, match="all zeros"):
        _given_query_vector([0.0] * 8)
    with pytest.raises(KxError, match="NaN or infinite"):
        _given_query_vector([1.0, float("nan")])
