"""MMR's near-duplicate demotion end to end: the real `kx datasets query` over the real model.

Two corpora a user would try: 76 one-passage documents of which three are the
same shipping note under a different number (tests/data/near_duplicates.py),
and the shipped handbook, whose refunds document is cut into same-topic
passages that MMR must leave together.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .data.near_duplicates import documents
from .helpers import REPO, run_cli

pytestmark = pytest.mark.slow

NOTES = {"shipping-note-1", "shipping-note-2", "shipping-note-3"}
PARCELS = "when do parcels ship from the warehouse"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`shipping` (the 76 documents) and `handbook` (samples/handbook), ingested once."""
    home = tmp_path_factory.mktemp("kx-mmr-home")
    folder = tmp_path_factory.mktemp("kx-mmr-docs")
    files = []
    for name, text in documents():
        files.append(folder / f"{name}.md")
        files[-1].write_text(text, encoding="utf-8")
    handbook = sorted(str(p) for p in (REPO / "samples" / "handbook").glob("*.md"))
    with pytest.MonkeyPatch.context() as mp:  # runs before the per-test fixture clears KX_*
        for key in list(os.environ):
            if key.startswith("KX_"):
                mp.delenv(key)
        for dataset, paths in (("shipping", [str(f) for f in files]), ("handbook", handbook)):
            result = run_cli("--home", str(home), "datasets", "ingest", dataset, *paths, "--json")
            assert result.code == 0, result.stderr
            assert json.loads(result.stdout)["added"] == len(paths)
    return home


def ask(home: Path, dataset: str, text: str, *args: str) -> dict:
    result = run_cli("--home", str(home), "datasets", "query", dataset, "--text", text, *args, "--json")
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


def names(answer: dict) -> list[str]:
    return [hit["document_name"] for hit in answer["hits"]]


def test_near_identical_notes_give_up_their_slots_and_say_whose_copies_they_are(home: Path) -> None:
    plain = ask(home, "shipping", PARCELS, "--rerank", "off", "--k", "30")
    assert set(names(plain)[:3]) == NOTES  # they lead both retrievers' lists
    assert all(hit["duplicate_of"] is None for hit in plain["hits"])

    diverse = ask(home, "shipping", PARCELS, "--k", "30")  # MMR on at the default lambda
    top = names(diverse)[:3]
    assert len(NOTES & set(top)) == 1 and top[0] in NOTES  # the best copy stays first
    kept = diverse["hits"][0]
    copies = [hit for hit in diverse["hits"] if hit["document_name"] in NOTES and hit is not kept]
    assert len(copies) == 2  # demoted, not dropped: k 30 covers MMR's head
    for hit in copies:
        assert hit["duplicate_of"] == kept["passage_ref"]
        assert hit["mmr_moved"] < 0
    # the slots went to the next most relevant documents (shipping ones), not to noise
    distinct = [name for name in names(plain) if name not in NOTES]
    assert set(top[1:]) <= set(distinct[:3])
    others = [hit for hit in diverse["hits"] if hit["document_name"] not in NOTES]
    assert all(hit["duplicate_of"] is None for hit in others)


def test_at_k_10_the_copies_are_demoted_but_stay_in_sight(home: Path) -> None:
    # the issue-24 case: k 10, MMR on. A copy gives up its slot (<= 1 note in the top 3) to relevant
    # distinct passages, never to noise, and a bounded number of places: all three notes in the top 10.
    diverse = ask(home, "shipping", PARCELS, "--k", "10")
    top = names(diverse)
    assert len(NOTES & set(top[:3])) == 1 and top[0] in NOTES
    assert NOTES <= set(top)
    marked = [hit for hit in diverse["hits"] if hit["duplicate_of"] is not None]
    assert len(marked) == 2 and all(hit["document_name"] in NOTES for hit in marked)
    assert all(hit["duplicate_of"] == diverse["hits"][0]["passage_ref"] for hit in marked)


def test_the_human_output_marks_a_demoted_copy(home: Path) -> None:
    result = run_cli("--home", str(home), "datasets", "query", "shipping", "--text", PARCELS, "--k", "30")
    assert result.code == 0, result.stderr
    marked = [line for line in result.stdout.splitlines() if "≈ near-duplicate of #1" in line]
    assert len(marked) == 2 and all("shipping-note" in line for line in marked)


def test_same_topic_passages_of_one_document_stay_together(home: Path) -> None:
    query = "refund for a damaged logger"
    plain = ask(home, "handbook", query, "--rerank", "off")
    diverse = ask(home, "handbook", query)
    assert names(plain)[:3] == ["refunds-and-returns"] * 3
    assert names(diverse)[:3] == ["refunds-and-returns"] * 3
    assert diverse["hits"][0]["passage_ref"] == plain["hits"][0]["passage_ref"]
    assert all(hit["duplicate_of"] is None for hit in diverse["hits"])
