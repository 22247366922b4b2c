"""The end-to-end half of tests/unit/test_agent.py (a model, processes or servers there):
The agent's loop and its offline brain: the handbook with the real model, end to end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import Engine
from engine.agent.text import normalised
from engine.agent_run import AgentRun

from .helpers import run_cli
from .unit.test_agent import HANDBOOK, REFUNDS, handbook  # noqa: F401 - helpers and fixtures


def test_agent_help_stays_light_and_the_chat_key_is_masked(tmp_path: Path, monkeypatch) -> None:
    from .test_import_hygiene import _HEAVY, _loaded_after, _top

    assert sorted(_top(_loaded_after(["agent", "run", "--help"], tmp_path)) & _HEAVY) == []
    monkeypatch.setenv("KX_AGENT_CHAT_KEY", "sk-very-secret")
    shown = json.loads(run_cli("info", "--json").stdout)
    row = next(r for r in shown["settings"] if r["name"] == "agent_chat_key")
    assert row["value"] == "***" and "sk-very-secret" not in json.dumps(shown)


@pytest.mark.slow
def test_summarising_the_refund_policy_cites_the_refunds_document_and_covers_it(handbook: Engine) -> None:
    steps = []
    run = handbook.run_agent("summarise our refund policy", "handbook", on_step=steps.append)
    assert run.found and run.brain == "offline"
    assert run.stop_reason in ("enough", "no new passages")
    assert len(run.steps) < handbook.settings.agent_max_steps and len(run.read) < handbook.settings.agent_max_passages
    assert steps == run.steps and steps[0].query == "summarise our refund policy"
    assert any("feedback from" in s.why for s in run.steps)  # it re-queried from what it read

    # every citation is a passage of the refunds document that the run read
    assert run.citations and {c.document_name for c in run.citations} == {REFUNDS}
    assert all(c.ref in run.read for c in run.citations)
    answer = run.answer
    assert "30 calendar days" in answer or "30-day" in answer                 # the window
    assert "exception" in answer.lower() or "voucher" in answer or "engraved" in answer  # the exceptions
    assert "RMA-7" in answer                                                    # the returns process

    claims = [line for line in answer.splitlines() if line.startswith("- ")]
    assert claims and all(line.rstrip().endswith("]") and f"[{REFUNDS}, chunk " in line for line in claims)
    bare = [normalised(line[2:line.rindex(" [")]) for line in claims]
    assert len(bare) == len(set(bare))  # never a sentence twice
    document = (HANDBOOK / f"{REFUNDS}.md").read_text().replace("**", "")
    assert all(line[2:line.rindex(" [")] in " ".join(document.split()) for line in claims)  # quoted, not made up


@pytest.mark.slow
def test_a_goal_with_nothing_in_the_dataset_says_nothing_was_found(handbook: Engine) -> None:
    run = handbook.run_agent("what is the airspeed velocity of an unladen swallow", "handbook")
    assert not run.found and run.citations == []
    assert run.answer.startswith("Nothing found") and run.stop_reason == "no new passages"
    assert all(s.relevant_new == 0 for s in run.steps)


@pytest.mark.slow
def test_kx_agent_run_prints_steps_then_the_cited_answer(handbook: Engine) -> None:
    result = run_cli("agent", "run", "--goal", "how much may a hotel cost per night", "--dataset", "handbook",
                     "--max-steps", "2")
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("step 1: searched 'how much may a hotel cost per night' (hybrid, k=8): 8 passage(s)")
    assert lines[1].startswith("step 2: searched ")
    assert "From travel-and-expenses:" in result.stdout and "€160" in result.stdout
    assert lines[-1].startswith("stopped: ") and "2 step(s)" in lines[-1]

    as_json = run_cli("agent", "run", "--goal", "how much may a hotel cost per night", "-d", "handbook", "--json",
                      "--max-steps", "1")
    data = json.loads(as_json.stdout)
    run = AgentRun.from_dict(data)
    assert len(run.steps) == 1 and run.stop_reason == "budget: steps" and run.steps[0].refs
    assert set(data["read"]) == set(run.steps[0].refs) >= {c.ref for c in run.citations}
