"""The chat brain against a real HTTP server on loopback that speaks chat-completions with tool calls.

The server (tests/chat_script.py) answers from a fixed script: this tests our
loop and its protocol handling — tool calls executed through the real engine
on the real handbook, bad calls answered with errors, the bounds, citation
checking, the no-dataset degradation — not a model. No chat model can be
installed on these machines (none ships on the package registries we reach),
so none was tried by hand either.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Engine, KxError, Status, load_settings

from .chat_script import ScriptedChat, first_seen_id, search, tool_results
from .helpers import run_cli

pytestmark = pytest.mark.slow


@pytest.fixture
def chat() -> ScriptedChat:
    server = ScriptedChat()
    yield server
    server.close()


@pytest.fixture
def engine(handbook_home: Path, real_embedder, chat: ScriptedChat, monkeypatch: pytest.MonkeyPatch) -> Engine:
    monkeypatch.setenv("KX_HOME", str(handbook_home))
    monkeypatch.setenv("KX_AGENT_CHAT_URL", chat.url)
    monkeypatch.setenv("KX_AGENT_CHAT_MODEL", "scripted")
    engine = Engine(load_settings({}), embedder=real_embedder)
    yield engine
    engine.close()


def _answer(text: str):
    return lambda _body: {"content": text}


def test_tool_calls_run_through_the_engine_and_invented_citations_are_stripped(engine, chat) -> None:
    chat.script = [
        lambda _body: search("refund within 30 days", k=4),
        lambda body: {"content": f"Customers have 30 days to ask [ref:{first_seen_id(body)}]. Engraved loggers "
                                 "are never refunded [ref:deadbeef0000]."},
    ]
    seen = []
    run = engine.run_agent("how long do customers have to ask for a refund?", "handbook", on_step=seen.append)

    assert run.brain == "chat" and run.stop_reason == "enough" and seen == run.steps
    [step] = run.steps
    direct = engine.query("handbook", "refund within 30 days", k=4)
    assert step.query == "refund within 30 days" and step.k == 4
    assert step.refs == [h.passage_ref for h in direct.hits]  # the real engine answered the tool

    shown = tool_results(chat.requests[1])[0]["passages"]
    assert [p["id"] for p in shown] == [r[:12] for r in step.refs] and "30 calendar days" in shown[0]["text"]
    first = run.citations[0]
    assert first.ref == step.refs[0] and first.label in run.answer and first.label.startswith("[refunds-and-returns")
    assert "deadbeef" not in run.answer and "[ref:" not in run.answer
    assert run.stripped_citations == ["deadbeef0000"] and any("stripped 1" in n for n in run.notes)

    tools = chat.requests[0]["tools"]
    assert [t["function"]["name"] for t in tools] == ["search_dataset"] and chat.requests[0]["model"] == "scripted"


def test_a_malformed_tool_call_gets_an_error_and_the_loop_goes_on(engine, chat) -> None:
    chat.script = [
        lambda _b: search(raw="{not json"),
        lambda _b: search("leave", name="delete_dataset"),
        lambda _b: search("leave", k="ten"),
        lambda _b: search("", mode="hybrid"),
        lambda _b: search("annual leave days", mode="sideways"),
        lambda _b: {"content": None, "tool_calls": "search_dataset please"},
        lambda _b: search("annual leave days", mode="sparse"),
        _answer("See the handbook."),
    ]
    run = engine.run_agent("how many days of annual leave?", "handbook")
    errors = [s.error for s in run.steps]
    assert all(errors[:6]) and errors[6] is None
    assert "not valid JSON" in errors[0] and "unknown tool" in errors[1] and "k must be" in errors[2]
    assert "query must be" in errors[3] and "mode must be" in errors[4] and "name a function" in errors[5]
    # each error went back to the model as the tool's answer, and the next turn came
    answers = tool_results(chat.requests[6])
    assert [("error" in a) for a in answers] == [True] * 6
    assert run.steps[6].mode == "sparse" and run.steps[6].refs and run.stop_reason == "enough"


def test_the_step_bound_is_enforced_and_the_model_asked_to_answer(engine, chat) -> None:
    chat.script = [lambda _b, i=i: search(f"leave question {i}") for i in range(3)]
    chat.script.append(lambda body: {"content": f"Done [ref:{first_seen_id(body)}]."})
    run = engine.run_agent("everything about leave", "handbook", max_steps=3)
    assert len(run.steps) == 3 and run.stop_reason == "budget: steps"
    final = chat.requests[-1]
    assert "tools" not in final and "budget is spent" in final["messages"][-1]["content"]
    assert run.citations and run.stripped_citations == []


def test_several_calls_in_one_turn_past_the_bound_are_not_run(engine, chat) -> None:
    turn = search("leave")
    turn["tool_calls"] += [{**turn["tool_calls"][0], "id": f"call-{i}"} for i in (2, 3)]
    chat.script = [lambda _b: turn, _answer("ok")]
    run = engine.run_agent("leave", "handbook", max_steps=2)
    assert len(run.steps) == 2 and run.stop_reason == "budget: steps"
    assert "budget spent" in tool_results(chat.requests[-1])[2]["error"]


def test_without_a_dataset_the_chat_brain_is_a_plain_agent_and_says_so(engine, chat) -> None:
    chat.script = [_answer("Paris is the capital of France [ref:abcdef123456].")]
    run = engine.run_agent("what is the capital of France?")
    assert run.dataset is None and run.steps == [] and run.stop_reason == "no dataset"
    assert run.answer == "Paris is the capital of France." and run.stripped_citations == ["abcdef123456"]
    assert "plain agent with no corpus" in run.notes[0] and "tools" not in chat.requests[0]

    chat.script = [_answer("Paris.")]
    result = run_cli("agent", "run", "--goal", "what is the capital of France?")
    assert result.code == 0 and "plain agent with no corpus" in result.stdout and "Paris." in result.stdout


def test_an_unknown_dataset_and_an_unreachable_model_are_clear_errors(engine, chat, monkeypatch) -> None:
    with pytest.raises(KxError) as caught:
        engine.run_agent("anything", "nope")
    assert caught.value.status is Status.NOT_FOUND and chat.requests == []
    url = chat.url
    chat.close()
    monkeypatch.setenv("KX_AGENT_CHAT_URL", url)
    result = run_cli("agent", "run", "--goal", "leave", "--dataset", "handbook")
    assert result.code == Status.UNAVAILABLE.exit_code and "cannot reach the chat endpoint" in result.stderr
