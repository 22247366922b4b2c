"""The keyword index's commit failing after the catalogue's (a full disk): a backlog with true notes (issue 38).

The failure is injected where a full disk strikes it, as the keyword index writes its segment file, as the
OSError (ENOSPC) the disk gives; the catalogue, the engine and the CLI are the real ones.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from engine import Engine, KxError, Status
from engine.text.inputs import from_text

from .helpers import run_cli


def _disk_full(monkeypatch: pytest.MonkeyPatch, full: bool) -> None:
    from engine.embedded import postings

    real = getattr(postings.write_segment, "real", postings.write_segment)

    def refused(path, segment):
        path.with_suffix(".tmp").write_bytes(b"half a segm")   # what the disk took before it was full
        raise OSError(errno.ENOSPC, "No space left on device")

    refused.real = real  # type: ignore[attr-defined]
    monkeypatch.setattr(postings, "write_segment", refused if full else real)


def test_passages_the_keyword_index_lacks_are_a_backlog_never_called_searchable(
        hash_engine: Engine, kx_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # readers opened while the indexes could not catch up try again at the next query, not 5 s later
    monkeypatch.setattr("engine.embedded.engine.HEAL_RETRY_SECONDS", 0.0)
    hash_engine.ingest("notes", [from_text("Otters hold hands while they sleep.", "otters")])
    _disk_full(monkeypatch, True)
    with pytest.raises(KxError) as caught:
        hash_engine.ingest("notes", [from_text("Walruses sleep in the water, floating upright.", "walruses")])
    assert caught.value.status is Status.RESOURCE_EXHAUSTED
    summary = hash_engine.dataset_summary("notes")
    assert (summary.documents, summary.passages, summary.unindexed) == (2, 2, 1)   # committed, not indexed

    sparse = hash_engine.query("notes", "walruses", mode="sparse")
    assert sparse.hits == []
    assert any("sparse covers 1 of 2 passages" in n for n in sparse.notes), sparse.notes
    assert not any("only stopwords" in n for n in sparse.notes), sparse.notes
    assert any("could not catch up" in n for n in sparse.notes), sparse.notes
    hybrid = hash_engine.query("notes", "walruses sleep", mode="hybrid")
    assert not any("sparse covers all" in n for n in hybrid.notes), hybrid.notes
    listed = run_cli("datasets", "list")
    assert listed.code == 0 and "to index" in listed.stdout and "keyword-searchable" in listed.stdout, listed.stdout
    assert "but not yet keyword-searchable" in listed.stdout and "passages keyword-searchable but" not in listed.stdout

    _disk_full(monkeypatch, False)   # the disk has room again: the next query fills the gap from the catalogue
    hash_engine.query("notes", "walruses", mode="sparse")   # its readers were opened before the retry time changed
    healed = hash_engine.query("notes", "walruses", mode="sparse")
    assert [h.document_name for h in healed.hits] == ["walruses"] and healed.notes == [], healed.notes
    assert hash_engine.dataset_summary("notes").unindexed == 0
    assert "to index" not in run_cli("datasets", "list").stdout
