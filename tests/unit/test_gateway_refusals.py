"""What the gateway says when a request is wrong: as clear as the in-process answer, with a next step.

The real gateway app under uvicorn on loopback (tests/helpers.py `serving`), over the hash-embedded engine,
reached by the CLI (`kx --gateway`) and by plain HTTP.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from engine import Engine
from engine.errors import KxError, Status
from engine.server.client import read_token
from engine.server.security import ensure_token
from engine.text.inputs import from_text

from ..helpers import run_cli, serving


@pytest.fixture
def notes(hash_engine: Engine) -> Engine:
    hash_engine.ingest("notes", [from_text("The parking garage opens at seven.", "parking")])
    return hash_engine


@pytest.mark.parametrize(("clause", "said"), [
    ("kind:pdf", "a filter is KIND:VALUE with KIND one of name, type, after, before, pages, ref"),
    ("pages:0-3", "pages are A-B with 1 <= A <= B"),
    ("name:", "the value after ':' is empty"),
    ("ref:xyz", "a ref is a document's sha256, or at least its first 6 hex digits"),
])
def test_a_bad_where_through_the_gateway_says_what_the_in_process_cli_says(notes: Engine, clause: str,
                                                                            said: str) -> None:
    here = run_cli("datasets", "query", "notes", "parking", "--mode", "sparse", "--where", clause)
    assert here.code == Status.INVALID_ARGUMENT.exit_code and said in here.stderr, here.stderr
    with serving(notes) as (url, token):
        there = run_cli("--gateway", url, "--token", token, "datasets", "query", "notes", "parking",
                        "--mode", "sparse", "--where", clause)
    assert there.code == Status.INVALID_ARGUMENT.exit_code, there.stderr
    assert "error: INVALID_ARGUMENT:" in there.stderr and said in there.stderr, there.stderr
    assert "e.g. --where name:guide/*" in there.stderr   # what to write instead
    assert "should match pattern" not in there.stderr and "^(name:" not in there.stderr


def test_a_where_the_engine_reads_but_the_schema_spells_otherwise_is_told_its_spelling(notes: Engine) -> None:
    with serving(notes) as (url, token):
        answer = httpx.post(f"{url}/v1/datasets/notes/query", timeout=30, headers={"Authorization": f"Bearer {token}"},
                            json={"text": "parking", "mode": "sparse", "where": ["type: PDF"]})
    assert answer.status_code == 400 and answer.json()["code"] == "INVALID_ARGUMENT"
    assert "write 'type: PDF' as 'type:pdf'" in answer.json()["message"], answer.text


def test_a_body_that_is_not_utf8_is_told_to_send_utf8_json(notes: Engine) -> None:
    with serving(notes) as (url, token):
        answer = httpx.post(f"{url}/v1/datasets/notes/query", timeout=30, content=b'{"text": "caf\xe9"}',
                            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        assert notes.query("notes", "parking", mode="sparse").hits  # nothing stored was touched
    assert answer.status_code == 400 and answer.json()["code"] == "INVALID_ARGUMENT"
    message = answer.json()["message"]
    assert "not UTF-8" in message and "offset 13" in message and "send it as UTF-8 JSON" in message, message


def test_a_token_file_that_is_a_folder_is_called_a_folder_not_a_permission_problem(kx_home: Path) -> None:
    kx_home.mkdir(parents=True, exist_ok=True)
    (kx_home / "gateway.token").mkdir()
    for mode in (0o755, 0o700):   # readable by others, as a folder usually is; and private
        (kx_home / "gateway.token").chmod(mode)
        for reading in (ensure_token, read_token):   # kx serve / kx mcp --http starting; a client on this machine
            with pytest.raises(KxError) as err:
                reading(kx_home)
            assert err.value.status is Status.FAILED_PRECONDITION
            message = err.value.message
            assert "gateway.token is a folder" in message and "move it out of the way" in message, message
            assert "chmod" not in message and "permission" not in message
    shown = run_cli("serve", "--port", "0")
    assert shown.code == Status.FAILED_PRECONDITION.exit_code and "is a folder" in shown.stderr, shown.stderr
    assert (kx_home / "gateway.token").is_dir()   # nothing was moved or removed on the user's behalf
