"""Query expansion (engine/expansion.py): RM3 weights and the Rocchio vector worked by hand, then
`kx datasets query --expand` end to end over the real bundled model.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from engine import expansion
from engine.expansion import rm3_weights, rocchio

from .helpers import run_cli


def test_rm3_mixes_the_query_with_the_feedback_terms_and_keeps_its_total_weight() -> None:
    query = {"refund": 2}
    feedback = [({"refund": 1, "desk": 1}, 3.0),   # share 0.75: refund 0.375, desk 0.375
                ({"desk": 1, "form": 3}, 1.0)]      # share 0.25: desk 0.0625, form 0.1875
    weights, added = rm3_weights(query, feedback, lambda term: 1)
    model = {"desk": 0.4375, "refund": 0.375, "form": 0.1875}   # best first: desk, refund, form
    total = sum(model.values())
    w = expansion.ORIGINAL_WEIGHT
    assert added == ["desk", "form"]                 # refund is the query's own: not "added"
    assert weights["refund"] == pytest.approx(w * 2 + (1 - w) * 2 * model["refund"] / total)
    assert weights["desk"] == pytest.approx((1 - w) * 2 * model["desk"] / total)
    assert sum(weights.values()) == pytest.approx(2.0)   # the query's total count: BM25 stays on its scale


def test_rm3_never_adds_a_term_the_index_lacks_and_breaks_ties_on_the_term() -> None:
    weights, added = rm3_weights({"a": 1}, [({"zeta": 1, "beta": 1, "ghost": 1}, 1.0)],
                                 lambda term: 0 if term == "ghost" else 5)
    assert added == ["beta", "zeta"] and "ghost" not in weights


def test_rm3_without_usable_feedback_keeps_the_query() -> None:
    weights, added = rm3_weights({"a": 3}, [({}, 1.0), ({"b": 2}, 0.0)], lambda term: 1)
    assert added == [] and weights == {"a": pytest.approx(3 * expansion.ORIGINAL_WEIGHT)}


def test_rocchio_moves_the_query_towards_the_feedback_and_stays_unit_length() -> None:
    q = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    fb = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32)
    moved = rocchio(q, fb)
    b = expansion.ROCCHIO_BETA
    expected = np.array([1.0, b / 2, b / 2]) / np.linalg.norm([1.0, b / 2, b / 2])
    assert np.allclose(moved, expected, atol=1e-6) and moved.dtype == np.float32


DOCS = {
    "refund-policy": "Refunds are paid within 30 days. A refund request goes to the returns desk with the receipt.",
    "returns-desk": "The returns desk checks the receipt and the parcel, then closes the request within 30 days.",
    "parking": "The parking garage opens at seven and closes at ten in the evening.",
    "canteen": "The canteen serves soup, salads and a warm dish every weekday from noon.",
}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> Path:
    home = tmp_path_factory.mktemp("kx-expand-home")
    folder = tmp_path_factory.mktemp("kx-expand-docs")
    for name, text in DOCS.items():
        (folder / f"{name}.md").write_text(text, encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            if key.startswith("KX_"):
                mp.delenv(key)
        mp.setenv("KX_MODEL_CACHE", str(model_cache))
        result = run_cli("--home", str(home), "datasets", "ingest", "desk",
                         *[a for name in DOCS for a in ("--file", str(folder / f"{name}.md"))], "--json")
    assert result.code == 0, result.stderr
    return home


def ask(home: Path, *args: str) -> dict:
    result = run_cli("--home", str(home), "datasets", "query", "desk", *args, "--json")
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


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
