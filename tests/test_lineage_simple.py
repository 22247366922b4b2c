"""A simple lineage history (every document its name's one version, nothing retired or renamed) is known
from the catalogue's log in SQL, without building a lineage per document (engine/lineage.py SimpleLineage):
it must answer what the whole state answers, be refused for every history that is not simple, and follow a
reader through reopens (simple while it stays simple, the whole state from the first edit on)."""

from __future__ import annotations

import random
from pathlib import Path

from engine import Engine
from engine.embedded.store import Catalogue
from engine.lineage import LineageState, SimpleLineage
from engine.text.inputs import from_text


def _write(catalogue: Catalogue, documents: list[tuple[str, str]], events: list[tuple]) -> None:
    """Rows as the catalogue stores them: documents (ref, name) and events (lineage, ref, moved_from, path)."""
    db = catalogue._db
    db.execute("BEGIN")
    for ref, name in documents:
        db.execute("INSERT OR IGNORE INTO blobs VALUES (?, x'')", (ref,))
        db.execute("INSERT INTO documents (ref, name, size, media_type, ingested_at, text_length, passage_count) "
                   "VALUES (?, ?, 0, 'text/plain', 0, 0, 1)", (ref, name))
    for lineage, ref, moved_from, path in events:
        db.execute("INSERT INTO lineage_events (lineage, doc_ref, at, moved_from, source_path) VALUES (?, ?, 0, ?, ?)",
                   (lineage, ref, moved_from, path))
    db.execute("COMMIT")


def _answers(view, names: dict[str, str]) -> dict:
    return {"hidden": view.hidden(), "live": view.live_count(), "retired": view.retired_count(),
            "renamed": view.renamed,
            "describe": {ref: view.describe(ref, name) for ref, name in names.items()},
            "shown": {ref: view.shown(ref, name, f"/p/{ref}") for ref, name in names.items()}}


def _history(rng: random.Random, steps: int, odd: float) -> tuple[list[tuple[list, list]], bool]:
    """Commits of (documents, events); mostly a new document under a new name, and with chance `odd` a step
    that is not simple. Returns the commits and whether every step was simple."""
    commits: list[tuple[list, list]] = []
    names: list[str] = []
    refs: list[str] = []
    simple = True
    for step in range(steps):
        documents: list[tuple[str, str]] = []
        events: list[tuple] = []
        kind = rng.random()
        if kind >= odd or not names:
            for i in range(rng.randint(1, 3)):  # new documents, each under a name of its own
                ref, name = f"r{step}.{i}", f"n{step}.{i}"
                documents.append((ref, name))
                events.append((name, ref, None, None))
                names.append(name)
                refs.append(ref)
        else:
            simple = False
            what = rng.randrange(6)
            name = rng.choice(names)
            if what == 0:    # a second version of a lineage
                documents.append((f"v{step}", name))
                events.append((name, f"v{step}", None, None))
            elif what == 1:  # retired
                events.append((name, None, None, None))
            elif what == 2:  # renamed
                events.append((f"moved{step}", rng.choice(refs), name, f"/d/moved{step}"))
            elif what == 3:  # old bytes under another name (a copy)
                events.append((f"copy{step}", rng.choice(refs), None, None))
            elif what == 4:  # a document written without its event (before lineages)
                documents.append((f"legacy{step}", f"legacy{step}"))
            else:            # a new document under a name already used
                documents.append((f"same{step}", name))
                events.append((name, f"same{step}", None, None))
        commits.append((documents, events))
    return commits, simple


def test_a_simple_history_answers_as_the_whole_state_and_any_other_is_refused(tmp_path: Path) -> None:
    rng = random.Random(24)
    refused = 0
    for case in range(120):
        catalogue = Catalogue(tmp_path / f"c{case}.sqlite")
        commits, simple = _history(rng, rng.randint(1, 12), odd=rng.choice([0.0, 0.05, 0.2, 0.5]))
        known: SimpleLineage | None = None
        followed = True   # the reader's path: each commit's rows on top of the simple state read before
        for documents, events in commits:
            _write(catalogue, documents, events)
            if followed:
                known = catalogue.simple_lineage_after(known)
                followed = known is not None
        whole = catalogue.simple_lineage_after(None)
        assert (whole is not None) == simple
        assert (known is not None) == simple   # a reopen's check sees what the cold check sees
        if whole is None:
            refused += 1
            continue
        assert known == whole
        names = dict(catalogue._db.execute("SELECT ref, name FROM documents").fetchall())
        assert _answers(whole, names) == _answers(catalogue.lineage_state(), names)
        catalogue.close()
    assert 20 < refused < 100   # both kinds of history were met


def test_a_reader_keeps_the_simple_state_until_the_first_edit(hash_engine: Engine) -> None:
    engine = hash_engine
    engine.ingest("notes", [from_text(f"note {i} about parcels and the warehouse", f"note-{i}") for i in range(5)])
    engine.query("notes", "parcels", mode="sparse")
    searcher = engine.searcher("notes")
    assert isinstance(searcher._lineages(), SimpleLineage)
    summary = engine.dataset_summary("notes")
    assert (summary.documents, summary.versions, summary.retired) == (5, 5, 0)
    assert [d.version for d in engine.list_documents("notes")] == [1] * 5

    # more new documents: a reopened reader checks only the new rows and stays simple
    engine.ingest("notes", [from_text(f"note {i} about refunds", f"note-{i}") for i in range(5, 7)])
    hits = engine.query("notes", "refunds", mode="sparse").hits
    assert {h.version for h in hits} == {1}
    state = engine.searcher("notes")._lineages()
    assert isinstance(state, SimpleLineage) and state.documents == 7

    # an edit: the next reader builds the whole state, and the old version no longer answers
    engine.ingest("notes", [from_text("note 0 rewritten: parcels ship on mondays", "note-0")])
    hits = engine.query("notes", "parcels", mode="sparse", k=10).hits
    assert isinstance(engine.searcher("notes")._lineages(), LineageState)
    assert [h.version for h in hits if h.document_name == "note-0"] == [2]
    assert not any("note 0 about" in h.text for h in hits)
    summary = engine.dataset_summary("notes")
    assert (summary.documents, summary.versions) == (7, 8)
    assert sorted(d.version for d in engine.list_documents("notes", versions="all"))[-1] == 2
