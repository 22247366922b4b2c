"""A reader reopened after a commit advances its lineage state by the new rows only (LineageState.advanced,
Catalogue.lineage_state_after): that must be the state the whole history gives, on every output."""

from __future__ import annotations

import random

from engine.lineage import LineageState


def _outputs(state: LineageState) -> dict:
    refs = sorted(state.names)
    return {
        "versions": state.versions, "events": state.events, "paths": state.paths, "names": state.names,
        "current": state.current, "current_order": list(state.current), "hidden": state.hidden(),
        "live": state.live_count(), "renamed": state.renamed,
        "describe": {ref: state.describe(ref, state.names[ref]) for ref in refs},
        "lineage_of": {ref: state.lineage_of(ref, state.names[ref]) for ref in refs},
        "shown": {ref: state.shown(ref, state.names[ref], None) for ref in refs},
    }


def _by_definition(state: LineageState) -> tuple[set[str], dict]:
    """hidden() and renamed as #22 first wrote them: a walk over every version and every document."""
    shown = {head for head in state.current.values() if head is not None}
    hidden = {ref for refs in state.versions.values() for ref in refs if ref not in shown}
    renamed = {}
    for ref, name in state.names.items():
        lineage = state.lineage_of(ref, name)
        if lineage != name:
            renamed[ref] = (lineage, state.paths.get(lineage))
    return hidden, renamed


def _history(rng: random.Random, steps: int, legacy: int) -> tuple[list, list, list[int]]:
    """Documents (ref, name) and events as the catalogue appends them, and after which step each commit
    ended (documents count, events count), for splitting the history where a reader could have read it."""
    names = [f"n{i}" for i in range(6)]
    documents: list[tuple[str, str]] = [(f"old{i}", rng.choice(names)) for i in range(legacy)]
    events: list[tuple[str, str | None, str | None, str | None]] = []
    cuts = []
    for step in range(steps):
        kind = rng.random()
        name = rng.choice(names)
        stored = [ref for ref, _ in documents]
        if kind < 0.55 or not stored:          # a new version (its event in the same commit)
            ref = f"r{step}"
            documents.append((ref, name))
            events.append((name, ref, None, None))
        elif kind < 0.70:                      # old bytes offered again, maybe under another name (a copy)
            events.append((name, rng.choice(stored), None, None))
        elif kind < 0.85:                      # retired
            events.append((name, None, None, None))
        elif kind < 0.92:                      # renamed: the lineage's history moves along
            other = rng.choice(names)
            if other != name:
                events.append((other, rng.choice(stored), name, f"/d/{other}.md"))
        else:                                  # several versions in one commit
            for i in range(rng.randint(2, 4)):
                ref = f"r{step}x{i}"
                documents.append((ref, name if i % 2 else rng.choice(names)))
                events.append((documents[-1][1], ref, None, None))
        cuts.append((len(documents), len(events)))
    return documents, events, cuts


def _advance_through(seed: int) -> int:
    """Read one random history commit by commit, comparing each advanced state with the whole history's;
    how many commits advanced (the rest were rebuilt)."""
    rng = random.Random(seed)
    documents, events, cuts = _history(rng, steps=rng.randint(5, 40), legacy=rng.choice([0, 0, 3]))
    advanced = 0
    state = LineageState.from_history(documents[:cuts[0][0]], events[:cuts[0][1]])
    at = cuts[0]
    for cut in cuts[1:]:
        if rng.random() < 0.4:
            continue  # a reader that slept through a few commits reads several at once
        whole = LineageState.from_history(documents[:cut[0]], events[:cut[1]])
        step = state.advanced(documents[at[0]:cut[0]], events[at[1]:cut[1]])
        if step is not None:
            advanced += 1
            assert _outputs(step) == _outputs(whole), f"seed {seed}, commit {cut}"
        state, at = (step if step is not None else whole), cut
        assert (state.hidden(), state.renamed) == _by_definition(state)
    return advanced


def test_an_advanced_state_is_the_whole_historys() -> None:
    advanced = sum(_advance_through(seed) for seed in range(150))
    assert advanced > 300  # most commits take the short path (else this would test nothing)


def test_plain_commits_advance_and_a_rename_or_a_copy_rebuilds() -> None:
    documents = [("r1", "a"), ("r2", "b")]
    events = [("a", "r1", None, None), ("b", "r2", None, None)]
    state = LineageState.from_history(documents, events)
    newer = state.advanced([("r3", "a")], [("a", "r3", None, None)])
    assert newer is not None and newer.current == {"a": "r3", "b": "r2"} and newer.hidden() == {"r1"}
    assert state.current == {"a": "r1", "b": "r2"} and state.hidden() == set()  # the old state is untouched
    retired = newer.advanced([], [("b", None, None, None)])
    assert retired is not None and retired.current["b"] is None and retired.describe("r2", "b") == (1, None, True)
    back = retired.advanced([], [("a", "r1", None, None)])  # old bytes offered again under their own name
    assert back is not None and back.current["a"] == "r1" and back.describe("r3", "a") == (2, "r1", False)
    assert newer.advanced([], [("c", "r2", "b", "/d/c.md")]) is None      # a rename: rebuilt in full
    assert newer.advanced([], [("c", "r2", None, None)]) is None          # r2's bytes under a second name


def test_a_catalogue_reads_on_from_its_marks(tmp_path) -> None:
    import numpy as np

    from engine.embedded.store import Catalogue
    from engine.fingerprint import Fingerprint
    from engine.rows import NewDocument, NewPassage

    catalogue = Catalogue(tmp_path / "catalog.sqlite")
    fingerprint = Fingerprint("m", "mean", 4, "c1", 100, 10, "t1", True)

    def add(ref: str, name: str) -> None:
        passage = NewPassage(ref=f"p-{ref}", chunk_index=0, chunk_count=1, char_start=0, char_end=4, text="text")
        doc = NewDocument(ref=ref, name=name, source_path=None, media_type="text/plain", data=ref.encode(),
                          text_length=4, passages=[passage])
        catalogue.commit_documents([doc], np.ones((1, 4), dtype=np.float32), fingerprint)

    add("d1", "a")
    add("d2", "b")
    known = catalogue.lineage_state_after(None)
    add("d3", "a")
    catalogue.retire(["b"])
    later = catalogue.lineage_state_after(known)
    assert (later.documents, later.events) == (3, 4)
    assert _outputs(later.state) == _outputs(catalogue.lineage_state())
    assert later.state.current == {"a": "d3", "b": None}
    catalogue.rename([("a", "c", "/d/c.md")])   # a rename: read again from the start, still exact
    renamed = catalogue.lineage_state_after(later)
    assert _outputs(renamed.state) == _outputs(catalogue.lineage_state()) and renamed.events == 5
    assert renamed.state.renamed == {"d1": ("c", "/d/c.md"), "d3": ("c", "/d/c.md")}
    catalogue.close()
