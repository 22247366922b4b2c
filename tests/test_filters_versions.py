"""Filters (`--where`) and versions: narrowed inside both retrievers, the latest version of each lineage by default.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import engine.embedded.readers as search_module
from engine import Engine, KxError, Status
from engine.filters import parse_where
from engine.records import DocumentStatus
from engine.text.inputs import DocumentInput, from_text

TOPICS = ["invoices are paid within thirty days of receipt by the finance team",
          "the finance team pays invoices after approval by a manager",
          "late invoices incur a fee and the finance team sends a reminder"]


def _corpus(hash_engine: Engine, plain: int = 200, special: int = 6) -> None:
    docs = [DocumentInput(f"plain/{i:03d}", f"{TOPICS[i % 3]} case {i}".encode(), media_type="text/plain")
            for i in range(plain)]
    docs += [DocumentInput(f"special/{i}", f"travel expenses handbook chapter {i} with invoices".encode(),
                           source_path=f"/docs/special/{i}.md", media_type="text/markdown") for i in range(special)]
    hash_engine.ingest("corp", docs)


def test_where_syntax_is_checked_with_an_example() -> None:
    where = parse_where(["name:guide/*", "type:pdf", "after:2026-12-01", "pages:1-10", "ref:e535e0,abcdef12"])
    assert where.names == ("guide/*",) and where.media_types == ("application/pdf",) and where.pages == (1, 10)
    assert not parse_where([]) and not parse_where(None)
    for bad in ["colour:red", "type:", "after:yesterday", "pages:9-2", "ref:xyz", "name"]:
        with pytest.raises(KxError) as caught:
            parse_where([bad])
        assert caught.value.status is Status.INVALID_ARGUMENT and "--where type:pdf" in caught.value.message


@pytest.mark.parametrize("day, why", [("2026-02-30", "day is out of range"), ("2026-13-01", "month must be"),
                                      ("yesterday", "'yesterday' is not YYYY-MM-DD")])
def test_a_date_that_is_not_a_day_says_what_is_wrong_with_it(day: str, why: str) -> None:
    with pytest.raises(KxError) as caught:
        parse_where([f"after:{day}"])
    assert why in caught.value.message and "(not a calendar day)" not in caught.value.message


@pytest.mark.parametrize("mode", ["hybrid", "dense", "sparse"])
def test_a_filter_matching_under_5_percent_still_returns_k_hits(hash_engine: Engine, mode: str) -> None:
    _corpus(hash_engine)
    assert len(hash_engine.query("corp", "finance team invoices", k=5, mode=mode)) == 5
    for clause in ("type:md", "name:special/*", "name:/docs/special/*"):
        hits = hash_engine.query("corp", "finance team invoices", k=5, mode=mode, where=[clause])
        assert len(hits) == 5 and all(h.document_name.startswith("special/") for h in hits), clause
    assert len(hash_engine.query("corp", "finance", k=5, mode=mode, where=["pages:1-3"])) == 0  # no pages in text


def test_a_large_allowed_set_searches_the_graph_widened(hash_engine: Engine, monkeypatch) -> None:
    _corpus(hash_engine)
    exact = hash_engine.query("corp", "finance team invoices", k=5, mode="dense", where=["name:special/*"])
    monkeypatch.setattr(search_module, "EXACT_FILTER_BYTES", 0)
    hash_engine.close()  # fresh readers: no cached exact pass
    widened = hash_engine.query("corp", "finance team invoices", k=5, mode="dense", where=["name:special/*"])
    assert [h.passage_ref for h in widened] == [h.passage_ref for h in exact]
    refs = {h.document_ref for h in exact}
    by_ref = hash_engine.query("corp", "invoices", k=10, where=[f"ref:{','.join(r[:8] for r in refs)}"])
    assert {h.document_ref for h in by_ref} == refs


def _versions(hash_engine: Engine) -> list[str]:
    refs = []
    for text in ("The office opens at eight.", "The office opens at nine.", "The office opens at ten."):
        report = hash_engine.ingest("ver", [from_text(text, name="guide/hours")])
        refs.append(report.results[0].ref)
    hash_engine.ingest("ver", [from_text("Parking is free for staff.", name="parking")])
    return refs


def test_only_the_latest_version_answers_by_default_and_all_with_versions_all(hash_engine: Engine) -> None:
    v1, v2, v3 = _versions(hash_engine)
    latest = hash_engine.query("ver", "office opens", k=10)
    assert [h.document_ref for h in latest if h.document_name == "guide/hours"] == [v3]
    assert all(h.version == 3 and h.superseded_by is None for h in latest if h.document_ref == v3)
    every = hash_engine.query("ver", "office opens", k=10, versions="all")
    assert {h.document_ref for h in every if h.document_name == "guide/hours"} == {v1, v2, v3}
    old = next(h for h in every if h.document_ref == v1)
    assert (old.version, old.superseded_by) == (1, v3)

    assert [(d.name, d.version) for d in hash_engine.list_documents("ver")] == [("guide/hours", 3), ("parking", 1)]
    listed = hash_engine.list_documents("ver", versions="all")
    assert [(d.version, d.superseded_by) for d in listed[:3]] == [(1, v3), (2, v3), (3, None)]
    summary = hash_engine.dataset_summary("ver")
    assert (summary.documents, summary.versions) == (2, 4)

    # old bytes again: unchanged (content-addressed), and current again
    again = hash_engine.ingest("ver", [from_text("The office opens at eight.", name="guide/hours")])
    assert again.results[0].status == DocumentStatus.UNCHANGED
    assert [h.document_ref for h in hash_engine.query("ver", "office opens", k=10)
            if h.document_name == "guide/hours"] == [v1]


def test_a_retired_lineage_stops_answering_and_comes_back(hash_engine: Engine) -> None:
    _v1, v2, v3 = _versions(hash_engine)
    assert hash_engine.retire("ver", ["guide/hours", "no-such-name"]) == ["guide/hours"]
    assert hash_engine.retire("ver", ["guide/hours"]) == []  # already retired
    assert all(h.document_name != "guide/hours" for h in hash_engine.query("ver", "office opens", k=10))
    assert [d.name for d in hash_engine.list_documents("ver")] == ["parking"]
    assert all(d.retired for d in hash_engine.list_documents("ver", versions="all") if d.name == "guide/hours")
    assert (hash_engine.dataset_summary("ver").documents, hash_engine.dataset_summary("ver").retired) == (1, 1)
    hash_engine.ingest("ver", [from_text("The office opens at nine.", name="guide/hours")])  # put back
    assert [h.document_ref for h in hash_engine.query("ver", "office opens", k=10)
            if h.document_name == "guide/hours"] == [v2]


def test_a_schema_3_catalogue_reads_as_before_and_migrates_in_place(hash_engine: Engine, kx_home: Path) -> None:
    _v1, _v2, v3 = _versions(hash_engine)
    hash_engine.close()
    path = kx_home / "datasets" / "ver" / "catalog.sqlite"
    db = sqlite3.connect(path)
    db.execute("DROP TABLE lineage_events")
    db.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    assert [d.ref for d in hash_engine.list_documents("ver") if d.name == "guide/hours"] == [v3]  # newest wins
    hits = hash_engine.query("ver", "office opens", k=10)
    assert [h.document_ref for h in hits if h.document_name == "guide/hours"] == [v3]
    hash_engine.ingest("ver", [from_text("Bikes go in the yard.", name="bikes")])  # a writer migrates
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "5"
    db.close()
    assert hash_engine.dataset_summary("ver").documents == 3


def test_a_schema_4_catalogue_reads_as_before_and_takes_renames_after_migrating(hash_engine: Engine,
                                                                                 kx_home: Path) -> None:
    _v1, _v2, v3 = _versions(hash_engine)
    hash_engine.close()
    path = kx_home / "datasets" / "ver" / "catalog.sqlite"
    db = sqlite3.connect(path)   # what schema 4 wrote: lineage events without the rename columns
    db.execute("ALTER TABLE lineage_events DROP COLUMN moved_from")
    db.execute("ALTER TABLE lineage_events DROP COLUMN source_path")
    db.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    reader = Engine(hash_engine.settings, embedder=hash_engine.embedder())
    assert [(d.name, d.version) for d in reader.list_documents("ver", versions="all")
            if d.name == "guide/hours"] == [("guide/hours", 1), ("guide/hours", 2), ("guide/hours", 3)]
    assert hash_engine.rename("ver", [("guide/hours", "guide/opening-hours", "/docs/guide/opening-hours.md")]) \
        == ["guide/hours"]   # a writer migrated the file first
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "5"
    db.close()
    shown = [(d.name, d.version, d.source_path) for d in hash_engine.list_documents("ver", versions="all")
             if d.name.startswith("guide/")]
    assert shown == [("guide/opening-hours", n, "/docs/guide/opening-hours.md") for n in (1, 2, 3)]
    [hit] = [h for h in hash_engine.query("ver", "office opens", k=10) if h.document_name.startswith("guide/")]
    assert (hit.document_ref, hit.document_name, hit.version) == (v3, "guide/opening-hours", 3)
    assert hash_engine.rename("ver", [("guide/hours", "elsewhere", None)]) == []   # nothing left to carry


def test_many_superseded_versions_still_leave_a_full_pool(hash_engine: Engine) -> None:
    from engine.filters import Where

    for i in range(30):  # 29 superseded versions: more than 4 x the pool (5 here) are kept out
        hash_engine.ingest("many", [from_text(f"finance invoices paid version {i}", name="churn")])
    hash_engine.ingest("many", [from_text(f"finance note {i} about invoices", name=f"note{i}") for i in range(8)])
    vector = hash_engine.embedder().encode(["finance invoices paid version"])[0]
    with hash_engine.reading("many") as searcher:
        only = searcher.passage_filter(Where(), "latest")
        assert only is not None and only.excluded is not None and only.excluded.size == 29
        for found in (searcher.dense_candidates(vector, 5, only), searcher.sparse_candidates("finance paid", 5, only)):
            assert len(found.keys) == 5
            assert not set(found.keys) & set(only.excluded.tolist())


def test_where_and_versions_over_http(hash_engine: Engine) -> None:
    from fastapi.testclient import TestClient

    from engine.server.gateway import create_app

    _corpus(hash_engine)
    _versions(hash_engine)
    headers = {"Authorization": "Bearer t0ken"}
    with TestClient(create_app(hash_engine, "t0ken", allowed_hosts=["testserver"])) as client:
        narrowed = client.post("/v1/datasets/corp/query", headers=headers,
                               json={"text": "finance invoices", "k": 5, "where": ["type:md"]}).json()
        assert len(narrowed["hits"]) == 5 and all(h["document_name"].startswith("special/")
                                                  for h in narrowed["hits"])
        for bad in (["colour:red"], ["after:2026-02-30"], ["pages:9-2"]):
            refused = client.post("/v1/datasets/corp/query", headers=headers, json={"text": "x", "where": bad})
            assert refused.status_code == 400 and refused.json()["code"] == "INVALID_ARGUMENT", bad
        every = client.post("/v1/datasets/ver/query", headers=headers,
                            json={"text": "office opens", "k": 10, "versions": "all"}).json()
        assert sorted(h["version"] for h in every["hits"] if h["document_name"] == "guide/hours") == [1, 2, 3]
        listed = client.get("/v1/datasets/ver/documents?versions=all", headers=headers).json()
        assert listed["total"] == 4 and [d["version"] for d in listed["documents"]][:3] == [1, 2, 3]
        assert client.get("/v1/datasets/ver/documents", headers=headers).json()["total"] == 2


def test_a_lineage_state_follows_renames_and_a_name_used_again() -> None:
    from engine.lineage import LineageState

    documents = [("r1", "a"), ("r2", "a"), ("r3", "a"), ("r4", "old")]   # r4: written before lineages
    events = [("a", "r1", None, None), ("a", "r2", None, None),
              ("b", "r2", "a", "/d/b.md"),            # a renamed to b: r1, r2 go along
              ("a", "r3", None, None)]                # a new file under the old name: a lineage of its own
    state = LineageState.from_history(documents, events)
    assert state.versions == {"old": ["r4"], "b": ["r1", "r2"], "a": ["r3"]}
    assert state.current == {"old": "r4", "b": "r2", "a": "r3"}
    assert state.describe("r1", "a") == (1, "r2", False) and state.describe("r2", "a") == (2, None, False)
    assert state.shown("r1", "a", "/d/a.md") == ("b", "/d/b.md") and state.shown("r3", "a", "/d/a.md") == \
        ("a", "/d/a.md")
    assert state.renamed == {"r1": ("b", "/d/b.md"), "r2": ("b", "/d/b.md")}
    assert state.hidden() == {"r1"} and state.live_count() == 3
    retired = LineageState.from_history(documents, [*events, ("b", None, None, None)])
    assert retired.current["b"] is None and retired.describe("r2", "a") == (2, None, True)


@pytest.mark.slow
def test_cli_versions_and_where_through_the_real_model(tmp_path: Path) -> None:
    import json

    from .helpers import run_cli

    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "other.md").write_text("The canteen serves soup on Mondays.")
    for hour in ("eight", "nine", "ten"):  # a file edited twice, the folder ingested after each edit
        (docs / "guide" / "hours.md").write_text(f"The office opens at {hour} in the morning.")
        assert run_cli("datasets", "ingest", "hb", str(docs)).code == 0
    latest = json.loads(run_cli("datasets", "query", "hb", "when does the office open", "--json").stdout)
    assert [h["text"] for h in latest["hits"] if h["document_name"] == "guide/hours"] == [
        "The office opens at ten in the morning."]
    every = json.loads(run_cli("datasets", "query", "hb", "when does the office open", "--versions", "all",
                               "--json").stdout)
    assert sorted(h["version"] for h in every["hits"] if h["document_name"] == "guide/hours") == [1, 2, 3]
    narrowed = json.loads(run_cli("datasets", "query", "hb", "soup", "--where", "name:guide/*", "--versions", "all",
                                  "--json", "-k", "3").stdout)
    assert len(narrowed["hits"]) == 3 and {h["document_name"] for h in narrowed["hits"]} == {"guide/hours"}
    bad = run_cli("datasets", "query", "hb", "soup", "--where", "colour:red")
    assert bad.code == Status.INVALID_ARGUMENT.exit_code and "--where type:pdf" in bad.stderr
    listed = json.loads(run_cli("datasets", "list", "--json").stdout)[0]
    assert (listed["documents"], listed["versions"]) == (2, 4)
