"""The agent's loop and its offline brain: the handbook with the real model, end to end.

One handbook dataset (the shipped samples, the bundled all-MiniLM-L6-v2) is
built for the session (conftest's handbook_home); each test runs the loop through the in-process engine
or the CLI, as a user would.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import Engine, KxError, Status, load_settings
from engine.agent import citation_label
from engine.agent.text import feedback_terms, normalised, sentences, sub_queries
from engine.agent_run import AgentRun
from engine.text.inputs import from_file

from .helpers import REPO, HashEmbedder, run_cli

HANDBOOK = REPO / "samples" / "handbook"


REFUNDS = "refunds-and-returns"


@pytest.fixture
def handbook(handbook_home: Path, real_embedder, monkeypatch: pytest.MonkeyPatch) -> Engine:
    monkeypatch.setenv("KX_HOME", str(handbook_home))
    engine = Engine(load_settings({}), embedder=real_embedder)
    yield engine
    engine.close()


def test_a_goal_breaks_into_its_clauses_and_key_phrases() -> None:
    assert sub_queries("summarise our refund policy") == ["summarise our refund policy", "refund policy"]
    queries = sub_queries("How many days of annual leave do I get, and who approves sick leave?")
    assert queries[0].startswith("How many days")
    assert "days annual leave" in queries and "approves sick leave" in queries


def test_feedback_terms_mark_the_best_passage_against_the_others() -> None:
    best = ["File form RMA-7 for every return; the warehouse refuses boxes without RMA-7."]
    others = ["Refunds are paid within 30 days.", "The warehouse opens at nine."]
    terms = feedback_terms(best, others, exclude={"refund"})
    assert terms[0] == "rma-7"  # twice in the best passage, nowhere else
    assert "boxes" in terms and "warehouse" not in terms[:2]  # also in another passage: it marks less


def test_sentences_skip_headings_and_strip_list_marks_and_emphasis() -> None:
    text = ("## Exceptions\n\nSome are not covered. Others are covered in part:\n"
            "- **Custom** loggers cannot be refunded.\n")
    found = sentences(text)
    assert [s for _o, s in found] == ["Some are not covered.", "Others are covered in part:",
                                      "Custom loggers cannot be refunded."]
    for offset, sentence in found:  # offsets point at the sentence in the passage
        assert text[offset:offset + 4] in (sentence[:4], "**Cu")
    assert normalised("A  full Refund.") == normalised("a full refund")


def test_a_citation_names_the_page_only_where_the_document_has_pages() -> None:
    hit = {"document_name": "manual.pdf", "chunk_index": 2, "chunk_count": 12}
    assert citation_label(hit) == "[manual.pdf, chunk 3/12]"
    assert citation_label({**hit, "page_start": 6, "page_end": 6}) == "[manual.pdf p. 6, chunk 3/12]"
    assert citation_label({**hit, "page_start": 6, "page_end": 7}) == "[manual.pdf pp. 6–7, chunk 3/12]"


def test_the_offline_brain_without_a_dataset_is_a_failed_precondition(hash_engine: Engine) -> None:
    with pytest.raises(KxError) as caught:
        hash_engine.run_agent("summarise our refund policy")
    assert caught.value.status is Status.FAILED_PRECONDITION
    assert "--dataset" in caught.value.message and "KX_AGENT_CHAT_URL" in caught.value.message
    result = run_cli("agent", "run", "--goal", "summarise our refund policy")
    assert result.code == Status.FAILED_PRECONDITION.exit_code and "FAILED_PRECONDITION" in result.stderr


def test_an_unknown_dataset_is_not_found_and_an_empty_goal_is_refused(hash_engine: Engine) -> None:
    with pytest.raises(KxError) as caught:
        hash_engine.run_agent("anything", "nope")
    assert caught.value.status is Status.NOT_FOUND
    with pytest.raises(KxError) as caught:
        hash_engine.run_agent("   ", "nope")
    assert caught.value.status is Status.INVALID_ARGUMENT


def test_the_step_bound_holds_whatever_the_brain_wants(kx_home: Path) -> None:
    engine = Engine(load_settings({"agent_max_steps": 2}), embedder=HashEmbedder())
    engine.ingest("notes", [from_file(p, 10**7) for p in sorted(HANDBOOK.glob("*.md"))])
    seen = []
    run = engine.run_agent("how many days of annual leave and who approves sick leave and expenses", "notes",
                       on_step=seen.append)
    assert run.stop_reason == "budget: steps" and len(run.steps) == 2 and seen == run.steps
    # a caller may tighten the bound but never loosen it
    assert len(engine.run_agent("annual leave days and sick leave", "notes", max_steps=1).steps) == 1
    assert len(engine.run_agent("annual leave days and sick leave", "notes", max_steps=50).steps) <= 2


def test_the_passage_bound_holds(kx_home: Path) -> None:
    engine = Engine(load_settings({"agent_max_passages": 5}), embedder=HashEmbedder())
    engine.ingest("notes", [from_file(p, 10**7) for p in sorted(HANDBOOK.glob("*.md"))])
    run = engine.run_agent("annual leave days and sick leave approval", "notes")
    assert run.stop_reason == "budget: passages" and len(run.read) == 5
    assert sum(len(s.new_refs) for s in run.steps) == 5


def test_a_multi_sentence_goal_is_searched_whole_then_sentence_by_sentence() -> None:
    from engine.agent.text import goal_parts

    parts = goal_parts("Where do I file expenses? Who approves sick leave?")
    assert parts[0] == ("Where do I file expenses? Who approves sick leave?", "goal")
    assert ("Where do I file expenses?", "sentence") in parts and ("Who approves sick leave?", "sentence") in parts


def test_the_first_step_is_the_goal_and_the_loop_reads_what_one_query_of_it_misses(kx_home: Path) -> None:
    """Deterministic embedder, handbook: equal passage budget, the loop's reading covers more documents."""
    engine = Engine(load_settings({"agent_max_steps": 4}), embedder=HashEmbedder())
    engine.ingest("notes", [from_file(p, 10**7) for p in sorted(HANDBOOK.glob("*.md"))])
    goal = "How much may a hotel cost per night? How many days of annual leave do I get?"
    run = engine.run_agent(goal, "notes")
    assert run.steps[0].query == goal and run.steps[0].ranked >= len(run.steps[0].refs)
    single = engine.query("notes", goal, k=len(run.steps[0].refs))
    assert run.steps[0].refs == [h.passage_ref for h in single.hits]  # step 1 reads what one query would
    assert any(s.why.startswith("feedback from") for s in run.steps)
    assert any(s.why == "a sentence of the goal" for s in run.steps)
    assert len(set(run.read)) == sum(len(s.new_refs) for s in run.steps)  # nothing read twice


def test_agent_help_stays_light_and_the_chat_key_is_masked(tmp_path: Path, monkeypatch) -> None:
    from .import_probe import HEAVY, loaded_after, top

    assert sorted(top(loaded_after(["agent", "run", "--help"], tmp_path)) & HEAVY) == []
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
