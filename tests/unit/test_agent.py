"""The agent's loop and its offline brain: the handbook with the real model, end to end.

One handbook dataset (the shipped samples, the bundled all-MiniLM-L6-v2) is
built for the session (conftest's handbook_home); each test runs the loop through the in-process engine
or the CLI, as a user would.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Engine, KxError, Status, load_settings
from engine.agent import citation_label
from engine.agent.text import feedback_terms, normalised, sentences, sub_queries
from engine.text.inputs import from_file

from ..helpers import REPO, HashEmbedder, run_cli

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
