"""The end-to-end half of tests/unit/test_expansion.py (a model, processes or servers there):
Query expansion (engine/expansion.py): RM3 weights and the Rocchio vector worked by hand, then
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import run_cli
from .unit.test_expansion import DOCS, ask, home  # noqa: F401 - helpers and fixtures


@pytest.mark.slow
def test_expand_finds_by_the_feedback_words_a_passage_the_query_words_miss(home: Path) -> None:
    plain = ask(home, "refund", "--mode", "sparse")
    assert [h["document_name"] for h in plain["hits"]] == ["refund-policy"]   # only it holds "refund"
    assert plain["expanded_terms"] is None

    expanded = ask(home, "refund", "--mode", "sparse", "--expand")
    names = [h["document_name"] for h in expanded["hits"]]
    assert names[0] == "refund-policy" and "returns-desk" in names   # found by "desk", "receipt", ...
    assert {"desk", "receipt"} <= set(expanded["expanded_terms"])  # stems, as the index holds them
    assert "refund" not in expanded["expanded_terms"]
    assert "expand" in expanded["timings_ms"]


@pytest.mark.slow
def test_expand_in_hybrid_moves_both_lists_and_says_what_it_added(home: Path) -> None:
    result = ask(home, "where does a refund request go?", "--expand", "--k", "4")
    assert result["expanded_terms"] and result["hits"][0]["document_name"] in {"refund-policy", "returns-desk"}
    again = ask(home, "where does a refund request go?", "--expand", "--k", "4")
    assert [h["passage_ref"] for h in again["hits"]] == [h["passage_ref"] for h in result["hits"]]  # deterministic
    human = run_cli("--home", str(home), "datasets", "query", "desk", "where does a refund request go?", "--expand")
    assert human.code == 0 and "expanded with: " in human.stdout


@pytest.mark.slow
def test_the_setting_turns_expansion_on_and_the_flag_off(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KX_QUERY_EXPANSION", "on")
    assert ask(home, "refund", "--mode", "sparse")["expanded_terms"]
    assert ask(home, "refund", "--mode", "sparse", "--no-expand")["expanded_terms"] is None


@pytest.mark.slow
def test_a_query_of_unknown_words_expanded_says_where_its_sparse_passages_came_from(home: Path) -> None:
    # no query word is indexed, so the first pass has no sparse list; the expansion's terms (from dense's
    # best passages) find some: the note must not still say the sparse list is empty, beside hits it ranked
    result = ask(home, "qwertyuiop zxcvbnm", "--expand")
    found = [h for h in result["hits"] if h["sparse_rank"] is not None]
    assert result["expanded_terms"] and found
    note = next(n for n in result["notes"] if "no query word is in the sparse index" in n)
    assert "the sparse list holds the passages the expansion's added terms (" in note and note.endswith(") found")
    assert all(term in note for term in result["expanded_terms"])
    plain = ask(home, "qwertyuiop zxcvbnm")
    assert all(h["sparse_rank"] is None for h in plain["hits"])
    assert any(n.startswith("no query word is in the sparse index (only") and "expansion" not in n
               for n in plain["notes"])
