"""POST /v1/agent/runs and KxClient.run_agent: a real uvicorn server on loopback over the real handbook.

The gateway runs in a thread of this process (so the real model, loaded once
for the session, serves it); the client and the CLI reach it over TCP with
the bearer token, as they would a `kx serve` on another terminal.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from engine import Engine, KxClient, KxError, Status, load_settings
from engine.agent import run_agent
from engine.records import Hit

from .chat_script import ScriptedChat, first_seen_id, search
from .helpers import run_cli, serving

pytestmark = pytest.mark.slow
TOKEN = "agent-test-token"


@pytest.fixture
def gateway(handbook_home: Path, real_embedder, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KX_HOME", str(handbook_home))
    engine = Engine(load_settings({"agent_max_steps": 6}), embedder=real_embedder)
    with serving(engine, TOKEN) as (url, _token):
        yield url
    engine.close()


def test_the_sdk_runs_the_offline_agent_on_the_gateway(gateway: str) -> None:
    heard = []
    with KxClient(gateway, token=TOKEN) as kx:
        run = kx.run_agent("summarise our refund policy", dataset="handbook", max_steps=50, on_step=heard.append)
    assert run.brain == "offline" and run.found and len(run.steps) <= 6  # the gateway's bound, not the caller's
    assert heard == run.steps  # the Backend's on_step: told each step once the gateway answers
    assert run.citations and {c.document_name for c in run.citations} == {"refunds-and-returns"}
    assert all(c.ref in run.read and c.label in run.answer for c in run.citations)
    assert all(isinstance(hit, Hit) and hit.passage_ref == ref for ref, hit in run.read.items())  # Hits, not dicts


def test_the_route_refuses_what_the_engine_would(gateway: str) -> None:
    with KxClient(gateway, token=TOKEN) as kx:
        with pytest.raises(KxError) as caught:
            kx.run_agent("anything", dataset="nope")
        assert caught.value.status is Status.NOT_FOUND
        with pytest.raises(KxError) as caught:
            kx.run_agent("summarise our refund policy")
        assert caught.value.status is Status.FAILED_PRECONDITION and "--dataset" in caught.value.message
    bad = httpx.post(f"{gateway}/v1/agent/runs", json={"goal": "x", "max_steps": 0},
                     headers={"Authorization": f"Bearer {TOKEN}"})
    assert bad.status_code == 400 and bad.json()["code"] == "INVALID_ARGUMENT"
    assert httpx.post(f"{gateway}/v1/agent/runs", json={"goal": "x"}).status_code == 401


def test_kx_agent_run_through_the_gateway_prints_the_same(gateway: str) -> None:
    result = run_cli("--gateway", gateway, "--token", TOKEN, "agent", "run", "--goal",
                     "how much may a hotel cost per night", "--dataset", "handbook", "--max-steps", "2")
    assert result.code == 0, result.stderr
    assert result.stdout.startswith("step 1: searched 'how much may a hotel cost per night'")
    assert "€160" in result.stdout and "stopped: " in result.stdout


def test_the_chat_loop_runs_client_side_over_the_gateway_backend(gateway: str, kx_home: Path) -> None:
    """The loop only needs a Backend: here the SDK is one, so each tool call is a gateway query."""
    chat = ScriptedChat()
    try:
        chat.script = [lambda _b: search("hotel per night"), lambda b: {"content": f"€160 [ref:{first_seen_id(b)}]"}]
        settings = load_settings({"agent_chat_url": chat.url})
        with KxClient(gateway, token=TOKEN) as kx:
            run = run_agent(kx, settings, "hotel limit?", "handbook")
            direct = kx.query("handbook", "hotel per night", k=settings.agent_k)
    finally:
        chat.close()
    assert run.steps[0].refs == [h.passage_ref for h in direct.hits]
    assert run.citations[0].ref == direct.hits[0].passage_ref and run.citations[0].label in run.answer
