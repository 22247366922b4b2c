"""Every query option reaches every door with the same effect (issue 42): for each QueryOptions field, a
value that changes the answer on one small dataset (tests/query_doors.py), asked through the CLI, the Python
SDK against the real gateway on loopback, the gateway's HTTP API itself and MCP's `search` through the real
`mcp` client, each answering exactly what the in-process engine answers. The TypeScript SDK asks the same
cases in sdk/typescript/test/doors.test.mjs. A field added to QueryOptions fails here until it has a case.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from engine import Engine, KxClient, load_settings
from engine.records import QueryOptions, described
from engine.server.mcp_server import build_server

from . import query_doors as doors
from .helpers import run_cli, serving

pytestmark = pytest.mark.slow  # the real model, a gateway and the CLI


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, real_embedder) -> Any:
    """(home, engine, cases): the dataset built once, with the real model, and each option's case."""
    home = tmp_path_factory.mktemp("doors-home")
    engine = Engine(load_settings({"home": str(home)}, env={}), embedder=real_embedder)
    doors.build(engine)
    yield home, engine, doors.cases(engine)
    engine.close()


def _typed(name: str) -> bool:
    """Whether a person or a model types this option (the CLI and MCP offer it), not only a program."""
    doc = described(QueryOptions)[name][1]
    return doc is not None and not doc.programs_only


def _expected(engine: Engine, options: dict[str, Any]) -> dict[str, Any]:
    return doors.shape(json.loads(json.dumps(engine.query(doors.DATASET, doors.QUESTION, **options).to_dict())))


def test_every_option_has_a_case_that_changes_the_answer(built) -> None:
    _, engine, cases = built
    assert set(cases) == set(QueryOptions.__annotations__)
    plain = _expected(engine, {})
    for name, options in cases.items():
        assert _expected(engine, options) != plain, f"{name}={options[name]!r} does not change the answer"


def test_the_cli_answers_as_the_engine(built) -> None:
    home, engine, cases = built
    for name, options in cases.items():
        if not _typed(name):
            continue
        flags: list[str] = []
        for key, value in options.items():
            flag = f"--{key.replace('_', '-')}"
            if isinstance(value, bool):
                flags += [flag, "on" if value else "off"] if key == "rerank" else [flag if value else f"--no-{key}"]
            elif isinstance(value, list):
                flags += [part for clause in value for part in (flag, clause)]
            else:
                flags += [flag, str(value)]
        shown = run_cli("--home", str(home), "datasets", "query", doors.DATASET, doors.QUESTION, *flags, "--json")
        assert shown.code == 0, shown.stderr
        assert doors.shape(json.loads(shown.stdout)) == _expected(engine, options), name


def test_the_python_sdk_and_the_gateways_http_answer_as_the_engine(built) -> None:
    _, engine, cases = built
    with serving(engine) as (url, token), KxClient(url, token) as client:
        for name, options in cases.items():
            expected = _expected(engine, options)
            sdk = client.query(doors.DATASET, doors.QUESTION, **options)   # type: ignore[misc]
            assert doors.shape(json.loads(json.dumps(sdk.to_dict()))) == expected, name
            answer = httpx.post(f"{url}/v1/datasets/{doors.DATASET}/query", json={"text": doors.QUESTION, **options},
                                headers={"Authorization": f"Bearer {token}"}, timeout=60)
            assert answer.status_code == 200, answer.text
            assert doors.shape(answer.json()) == expected, name


def test_mcp_search_answers_as_the_engine(built) -> None:
    _, engine, cases = built

    async def ask_all() -> dict[str, Any]:
        async with Client(build_server(engine)) as client:
            return {name: await client.call_tool("search", {"dataset": doors.DATASET, "query": doors.QUESTION,
                                                            **options})
                    for name, options in cases.items() if _typed(name)}

    for name, result in anyio.run(ask_all).items():
        assert not result.is_error, result.content
        assert doors.shape(result.structured_content) == _expected(engine, cases[name]), name


def test_the_typescript_door_reads_the_same_cases() -> None:
    """The TypeScript SDK's half (run by `npm test`) asks every case the module above builds."""
    test = (Path(__file__).resolve().parents[1] / "sdk" / "typescript" / "test" / "doors.test.mjs").read_text()
    assert '"tests.query_doors"' in test and "queryDataset" in test
