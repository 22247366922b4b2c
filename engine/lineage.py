"""Lineages: which stored version of each source is current, moved along an append-only event log.

Both backends' catalogues (engine/embedded/store.py, engine/milvus/store.py)
keep the same log: every added document, old bytes offered again, a
retirement (the file left its watched folder) or a rename appends an event,
and the latest event decides. `LineageState` is the picture read from the
log (kept up to date by the events after a mark, `LineageState.advanced`);
`LineageWrites` the rules for appending to it, over either catalogue. The
schema notes are in engine/embedded/catalogue/lineage_log.py's head (schemas 4 and 5).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Protocol, Sequence


class LineageWrites:
    """Moving lineages along their append-only event log: the same rules over both backends' catalogues.

    A catalogue (engine/embedded/store.py's, engine/milvus/store.py's) gives the log's
    current state, which refs it stores, and how it appends events.
    """

    def lineage_state(self) -> LineageState:
        raise NotImplementedError

    def known_refs(self, refs: Sequence[str]) -> set[str]:
        raise NotImplementedError

    def _append_events(self, events: Sequence[tuple[str, str | None] | tuple[str, str | None, str | None, str | None]]
                       ) -> int:
        raise NotImplementedError

    def record_current(self, pairs: Sequence[tuple[str, str, str | None]]) -> int:
        """Make each stored `ref` current for `lineage` where it is not (old bytes offered again, or stored
        bytes offered under a new name: a renamed or copied file); how many moved. Each pair carries the
        path of the file that offered it (or None): bytes new to the lineage keep it with the event, since
        their stored row names another file (the one first stored with them), and a copy must be told
        apart from that file, on screen and when its own file goes (engine/watch/reconcile.py)."""
        if not pairs:
            return 0
        state = self.lineage_state()
        stored = self.known_refs([ref for _lineage, ref, _path in pairs])
        events: list[tuple[str, str | None] | tuple[str, str | None, str | None, str | None]] = []
        for lineage, ref, path in dict.fromkeys(pairs):
            if ref not in stored or state.current.get(lineage) == ref:
                continue
            taken_on = path is not None and ref not in state.versions.get(lineage, ())
            events.append((lineage, ref, None, path) if taken_on else (lineage, ref))
        return self._append_events(events)

    def retire(self, lineages: Sequence[str]) -> list[str]:
        """Retire lineages whose source is gone (a file left its watched folder); those that were live."""
        state = self.lineage_state()
        live = [name for name in dict.fromkeys(lineages) if state.current.get(name) is not None]
        self._append_events([(name, None) for name in live])
        return live

    def rename(self, moves: Sequence[tuple[str, str, str | None]]) -> list[str]:
        """Carry live lineages to new names: (old name, new name, the file's new path or None), in order;
        the old names that moved (a retired or unknown one has nothing to carry)."""
        moved = []
        for old, new, path in moves:
            head = self.lineage_state().current.get(old) if old != new else None
            if head is not None:
                self._append_events([(new, head, old, path)])
                moved.append(old)
        return moved


@dataclass(frozen=True)
class LineageMarks:
    """A lineage state and the last document and event seqs it was read up to (for reading on from there)."""

    state: LineageState
    documents: int
    events: int


@dataclass(frozen=True)
class LineageState:
    """Each lineage's stored versions (refs, oldest first) and its latest event (None: retired).

    `paths`: where a renamed lineage's file is now; `names`: each document's stored name."""

    versions: dict[str, list[str]]
    events: dict[str, str | None]
    paths: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_history(cls, documents: Iterable[tuple[str, str]],
                     events: Iterable[tuple[str, str | None, str | None, str | None]]) -> LineageState:
        """The state from documents (ref, name) in ingest order and events (lineage, ref or None, moved_from,
        source_path) in the order they were appended.

        A document that has events takes its place in its lineage from them (so one stored under a name
        after that name moved away starts a lineage of its own); one without (written before lineages)
        takes it from its name, first. An event naming a ref that is not stored is skipped (a backend
        without transactions may have written it without its document: engine/milvus/store.py).
        """
        documents = list(documents)
        events = list(events)
        names = {ref: name for ref, name in documents}
        evented = {event[1] for event in events if event[1] is not None}
        versions: dict[str, list[str]] = {}
        members: dict[str, set[str]] = {}   # versions' refs as sets: a lineage edited often stays linear
        by_name: set[str] = set()
        for doc_ref, name in documents:
            if doc_ref not in evented:
                versions.setdefault(name, []).append(doc_ref)
                members.setdefault(name, set()).add(doc_ref)
                by_name.add(doc_ref)
        last: dict[str, str | None] = {}
        paths: dict[str, str] = {}
        skipped = False
        for lineage, head, moved_from, path in events:
            if head is not None and head not in names:
                skipped = True
                continue
            if moved_from is not None:   # the old name's history continues under the new one, oldest first
                history = versions.pop(moved_from, [])
                moved = members.pop(moved_from, set())
                last.pop(moved_from, None)
                paths.pop(moved_from, None)
                versions[lineage] = history + [ref for ref in versions.get(lineage, []) if ref not in moved]
                members[lineage] = moved | members.get(lineage, set())
            if path:   # a renamed file's new place, or the file of a copy that took on stored bytes
                paths[lineage] = path
            last[lineage] = head
            if head is not None and head not in members.setdefault(lineage, set()):
                versions.setdefault(lineage, []).append(head)
                members[lineage].add(head)
        state = cls(versions, last, paths, names)
        state.__dict__["_members"] = members
        state.__dict__["_by_name"] = frozenset(by_name)
        state.__dict__["_skipped"] = skipped
        return state

    def advanced(self, documents: Sequence[tuple[str, str]],
                 events: Sequence[tuple[str, str | None, str | None, str | None]]) -> LineageState | None:
        """The state of this history with `documents` and `events` appended (both newer than any this state
        was built from), worked out from the new rows only; None where only `from_history` over the whole
        history gives it exactly (a rename, stored bytes taking on a second name, a document without its
        event, an event this state skipped): rare events, rebuilt in full.

        A reader reopened after a small commit takes this path: at 100k documents the whole rebuild and the
        maps derived from it cost a second, and they would grow with the corpus. The result is the state
        `from_history` gives (tests/test_lineage_incremental.py checks them equal on random histories);
        this state is left as it was (a reader may still be answering from it).
        """
        if self._skipped or (not events and not documents):
            return None if self._skipped else self
        names_before = self.names
        new_names = {ref: name for ref, name in documents}
        if any(ref in names_before for ref in new_names):
            return None
        evented = {event[1] for event in events if event[1] is not None}
        placed_by_name = [(ref, name) for ref, name in documents if ref not in evented]
        if placed_by_name and (events or self.events):
            return None  # ordered before every event in the full rebuild
        home = self._home
        current = self.current
        shared = self._shared
        versions = dict(self.versions)
        members = dict(self._members)
        last = dict(self.events)
        names = {**names_before, **new_names}
        positions = dict(self._positions)
        home = dict(home)
        current = dict(current)
        current_home = dict(self._current_home)
        shown, hidden = set(self._shown), set(self._hidden)
        strays = self._strays
        added_strays: list[str] = []
        touched: dict[str, None] = {}

        def append(lineage: str, ref: str) -> None:
            refs = versions[lineage] = [*versions.get(lineage, []), ref]
            members[lineage] = {*members.get(lineage, ()), ref}
            positions[ref] = len(refs)
            home[ref] = lineage
            if names[ref] != lineage:
                added_strays.append(ref)

        for ref, name in placed_by_name:  # no events anywhere: each name's newest document is current
            append(name, ref)
            touched[name] = None
        for lineage, head, moved_from, path in events:
            if moved_from is not None or path is not None or (head is not None and head not in names) \
                    or head in self._by_name:
                return None
            if head is not None and head not in members.get(lineage, ()):
                if head in home:
                    return None  # bytes stored under another lineage too: which map entry wins is order's
                append(lineage, head)
            last[lineage] = head
            touched[lineage] = None
        if not self._moved_current(versions, members, last, touched, current, current_home, shown, hidden):
            return None
        state = LineageState(versions, last, dict(self.paths), names)
        state.__dict__.update(_members=members, _by_name=self._by_name, _skipped=False, current=current,
                              _positions=positions, _home=home, _current_home=current_home, _shared=shared,
                              _shown=shown, _hidden=frozenset(hidden),
                              _strays=strays | set(added_strays) if added_strays else strays)
        return state

    def _moved_current(self, versions: dict[str, list[str]], members: dict[str, set[str]],
                       last: dict[str, str | None], touched: dict[str, None], current: dict[str, str | None],
                       current_home: dict[str, str], shown: set[str], hidden: set[str]) -> bool:
        """`advanced`'s second half: each touched or new lineage's current version moved in the copied maps
        (`current`, `current_home`, `shown`, `hidden`, updated in place); False where a ref shared by two
        lineages is involved, which only the full rebuild gets right."""
        # lineages new to `versions` were appended at its end, in the order current() lists them too
        new = len(versions) - len(self.versions)
        appended = list(itertools.islice(reversed(versions), new))[::-1]
        for lineage in [*(t for t in touched if t in self.versions), *appended]:
            before = self.current.get(lineage)
            refs = versions[lineage]
            head = last[lineage] if lineage in last else refs[-1]
            after = head if head is None or head in members[lineage] else refs[-1]
            if before in self._shared or after in self._shared:
                return False
            current[lineage] = after
            if before is not None and current_home.get(before) == lineage:
                del current_home[before]
            if after is not None:
                current_home[after] = lineage
            # no ref here is in a second lineage (else rebuilt in full): shown means current in this one
            if before is not None:
                shown.discard(before)
                hidden.add(before)
            hidden.update(ref for ref in versions[lineage][len(self.versions.get(lineage, ())):])
            if after is not None:
                shown.add(after)
                hidden.discard(after)
        return True

    @cached_property  # computed once: callers ask it per document (an O(n) walk each time would be O(n^2))
    def current(self) -> dict[str, str | None]:
        """lineage -> its current version's ref; None for a retired lineage."""
        out: dict[str, str | None] = {}
        for lineage, refs in self.versions.items():
            if lineage in self.events:
                head = self.events[lineage]
                out[lineage] = head if head is None or head in refs else refs[-1]
            else:
                out[lineage] = refs[-1]
        return out

    def hidden(self) -> set[str]:
        """Refs of every stored version that is not current (superseded, or of a retired lineage)."""
        return set(self._hidden)

    @cached_property
    def _hidden(self) -> frozenset[str]:
        return frozenset(self._home.keys() - self._shown)   # every stored version is in a lineage: in _home

    def live_count(self) -> int:
        """Documents shown by default: the distinct current versions (two names may share one's bytes)."""
        return len(self._shown)

    def retired_count(self) -> int:
        """Lineages retired (their file left a watched folder)."""
        return sum(1 for head in self.current.values() if head is None)

    @cached_property
    def _shown(self) -> set[str]:
        return {head for head in self.current.values() if head is not None}

    @cached_property
    def _positions(self) -> dict[str, int]:
        return {ref: i + 1 for refs in self.versions.values() for i, ref in enumerate(refs)}

    @cached_property
    def _members(self) -> dict[str, set[str]]:
        return {lineage: set(refs) for lineage, refs in self.versions.items()}

    @cached_property
    def _by_name(self) -> frozenset[str]:
        """Documents placed in a lineage by their name (stored before lineage events): none in a new catalogue."""
        return frozenset()

    @cached_property
    def _skipped(self) -> bool:
        return False

    @cached_property
    def _shared(self) -> frozenset[str]:
        """Refs stored in more than one lineage (bytes a copied or renamed file took on): rare."""
        if sum(map(len, self.versions.values())) == len(self._home):
            return frozenset()   # each ref in one lineage: the usual case, seen without a walk
        seen: set[str] = set()
        shared: set[str] = set()
        for refs in self.versions.values():
            for ref in refs:
                (shared if ref in seen else seen).add(ref)
        return frozenset(shared)

    @cached_property
    def _strays(self) -> frozenset[str]:
        """Refs in a lineage other than the name they were stored under: only these can be shown renamed."""
        names = self.names
        return frozenset(ref for lineage, refs in self.versions.items() for ref in refs if names.get(ref) != lineage)

    @cached_property
    def _home(self) -> dict[str, str]:
        return {ref: lineage for lineage, refs in self.versions.items() for ref in refs}

    @cached_property
    def _current_home(self) -> dict[str, str]:
        return {head: lineage for lineage, head in self.current.items() if head is not None}

    def copies(self) -> dict[str, tuple[str, str | None]]:
        """Live lineages listed under another name: a copy's name, whose current bytes are another file's
        (listed, and shown by a query, under that file's name). lineage -> (its current ref, its file's path
        where the event kept it). A watched folder's reconcile must see them: a copy's file deleted unseen
        would otherwise leave it current, to answer again once the other file moves on."""
        if not self._shared:
            return {}
        return {lineage: (head, self.paths.get(lineage)) for lineage, head in self.current.items()
                if head in self._shared and self.lineage_of(head, self.names.get(head, lineage)) != lineage}

    def lineage_of(self, ref: str, name: str) -> str:
        """The lineage document `ref` (stored as `name`) belongs to now: `name`, unless that moved on (a
        rename), or it is current only under another name (bytes a renamed or copied file took on)."""
        if ref in self._members.get(name, ()) and (self.current.get(name) == ref or ref not in self._shown):
            return name
        return self._current_home.get(ref) or self._home.get(ref, name)

    @cached_property
    def renamed(self) -> dict[str, tuple[str, str | None]]:
        """Documents whose lineage was renamed: ref -> (the name, and where known the path, shown now)."""
        # A document in its own name's lineage is shown under another only when it is current there (a
        # stray: a copy's bytes); one in another lineage is a stray too. So only strays need looking at.
        out: dict[str, tuple[str, str | None]] = {}
        for ref in sorted(self._strays):
            name = self.names.get(ref)
            if name is None:
                continue
            lineage = self.lineage_of(ref, name)
            if lineage != name:
                out[ref] = (lineage, self.paths.get(lineage))
        return out

    def shown(self, ref: str, name: str, source_path: str | None) -> tuple[str, str | None]:
        """(name, source path) a document is shown under: its lineage's, after a rename."""
        return shown_as(self.renamed, ref, name, source_path)

    def describe(self, ref: str, lineage: str) -> tuple[int, str | None, bool]:
        """(version number from 1, the ref that supersedes it or None, whether its lineage is retired)."""
        lineage = self.lineage_of(ref, lineage)
        head = self.current.get(lineage, ref)
        version = self._positions.get(ref, 1)
        if ref in self._shown:  # current, maybe under another name (a renamed file's bytes)
            return version, None, False
        return version, (head if head is not None and head != ref else None), head is None


def shown_as(renamed: dict[str, tuple[str, str | None]], ref: str, name: str,
              path: str | None) -> tuple[str, str | None]:
    """The (name, path) a document answers to: its lineage's new name and path if it was renamed."""
    moved = renamed.get(ref)
    return (name, path) if moved is None else (moved[0], moved[1] or path)


class LineageView(Protocol):
    """What a query reads of the lineage state: `LineageState`, or `SimpleLineage` where the history is simple."""

    @property
    def renamed(self) -> dict[str, tuple[str, str | None]]: ...

    def hidden(self) -> set[str]: ...

    def live_count(self) -> int: ...

    def retired_count(self) -> int: ...

    def shown(self, ref: str, name: str, source_path: str | None) -> tuple[str, str | None]: ...

    def describe(self, ref: str, lineage: str) -> tuple[int, str | None, bool]: ...

    def copies(self) -> dict[str, tuple[str, str | None]]: ...


@dataclass(frozen=True)
class SimpleLineage:
    """The lineage state of a simple history, known without building it: every document is the one
    version of the lineage named as it is, and nothing was retired or renamed.

    That is every dataset of files or records ingested once (a JSONL import of a million records
    included): `LineageState.from_history` over it gives exactly this (each document current at version
    1, nothing hidden or shown renamed: tests/test_lineage_simple.py), but builds a lineage per
    document to say so: 10 s and 1.1 GB for a cold query at a million one-passage documents.
    `marks`: the document and event seqs it was read up to (a reopen checks only the rows after them).
    """

    documents: int
    marks: tuple[int, int]

    @property
    def renamed(self) -> dict[str, tuple[str, str | None]]:
        return {}

    def hidden(self) -> set[str]:
        return set()

    def live_count(self) -> int:
        return self.documents

    def retired_count(self) -> int:
        return 0

    def shown(self, ref: str, name: str, source_path: str | None) -> tuple[str, str | None]:
        return name, source_path

    def describe(self, ref: str, lineage: str) -> tuple[int, str | None, bool]:
        return 1, None, False

    def copies(self) -> dict[str, tuple[str, str | None]]:
        return {}   # every lineage holds its own document: no bytes taken on under a second name
