"""`kx datasets rebuild NAME --as NEW`: a new dataset from the stored originals, lineages and retirements kept.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import engine.embedded.rebuild as rebuild_module
from engine import Engine, KxError, Status, load_settings
from engine.records import DocumentStatus, Progress
from engine.text.inputs import from_text

from .helpers import HashEmbedder, assert_dataset_consistent, catalogue_counts, run_cli

LONG = " ".join(f"Sentence {i} of the staff handbook explains the travel policy." for i in range(30))


def _source(hash_engine: Engine) -> None:
    for text in ("The office opens at eight.", "The office opens at nine."):
        hash_engine.ingest("src", [from_text(text, name="guide/draft")])
    hash_engine.rename("src", [("guide/draft", "guide/hours", None)])   # a renamed file: its history goes along
    hash_engine.ingest("src", [from_text(LONG, name="travel"), from_text("Bikes go in the yard.", name="bikes")])
    hash_engine.retire("src", ["bikes"])


def _small_chunks() -> Engine:
    return Engine(load_settings({"chunk_size": 120, "chunk_overlap": 20}), embedder=HashEmbedder())


def test_a_rebuild_keeps_names_versions_and_retirements_under_new_settings(hash_engine: Engine,
                                                                            kx_home: Path) -> None:
    _source(hash_engine)
    with sqlite3.connect(kx_home / "datasets" / "src" / "catalog.sqlite") as db:   # ingested in 2020
        db.execute("UPDATE documents SET ingested_at = ingested_at - 200000000")
    hash_engine.close()
    before = catalogue_counts(kx_home, "src")
    other = _small_chunks()
    report = other.rebuild("src", "small")
    assert report.created and report.count(DocumentStatus.ADDED) == 4
    assert catalogue_counts(kx_home, "src") == before  # the source is only read
    assert hash_engine.dataset_summary("src").fingerprint["chunk_size"] == 200
    small = other.dataset_summary("small")
    assert small.fingerprint["chunk_size"] == 120 and small.backlog == 0
    assert (small.documents, small.versions, small.retired) == (2, 4, 1)
    # the report's totals mean what an ingest's do (the documents stored): `kx datasets ingest` and a rebuild
    # of the same documents say the same
    assert (report.documents, report.passages) == catalogue_counts(kx_home, "small")
    assert small.passages > before[1]  # shorter passages: more of them
    shown = [(d.name, d.version, d.retired, d.source_path, d.ingested_at)
             for d in other.list_documents("small", versions="all")]
    assert shown == [(d.name, d.version, d.retired, d.source_path, d.ingested_at)
                     for d in hash_engine.list_documents("src", versions="all")]   # the dates too
    hits = other.query("small", "office opens", k=5)
    assert [h.text for h in hits if h.document_name == "guide/hours"] == ["The office opens at nine."]
    assert all(h.document_name != "bikes" for h in other.query("small", "bikes yard", k=5))
    for engine in (hash_engine, other):   # a date filter answers the same on both
        dataset = "src" if engine is hash_engine else "small"
        assert len(engine.query(dataset, "office opens", k=5, where=["before:2021-01-01"])) > 0
        assert len(engine.query(dataset, "office opens", k=5, where=["after:2021-01-01"])) == 0
    assert_dataset_consistent(kx_home, "small")


def test_a_stopped_rebuild_continues_and_a_foreign_target_is_refused(hash_engine: Engine, kx_home: Path,
                                                                    monkeypatch) -> None:
    _source(hash_engine)
    monkeypatch.setattr(rebuild_module, "BATCH_BYTES", 1)  # one original a batch
    other = _small_chunks()
    seen = []

    def stop_after_two(event: object) -> None:
        if isinstance(event, Progress) and event.stage == "reading" and event.done == 1:
            seen.append(event)
            if len(seen) == 2:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        other.rebuild("src", "small", on_event=stop_after_two)
    done = other.dataset_summary("small").versions
    assert done is not None and 0 < done < 4
    report = other.rebuild("src", "small")
    assert [r.status for r in report.results].count(DocumentStatus.UNCHANGED) == done
    assert other.dataset_summary("small").versions == 4
    assert_dataset_consistent(kx_home, "small")

    other.ingest("mine", [from_text("Something else.")])
    with pytest.raises(KxError) as caught:
        other.rebuild("src", "mine")
    assert caught.value.status is Status.ALREADY_EXISTS and "pick another name" in caught.value.message
    with pytest.raises(KxError) as caught:
        other.rebuild("src", "src")
    assert caught.value.status is Status.INVALID_ARGUMENT


def test_a_rebuild_stopped_inside_its_first_batch_continues(hash_engine: Engine, kx_home: Path) -> None:
    """Found by the crash campaign (benchmarks/crashes.py --rebuild): the mark that lets the same command
    continue was written after the first batch's ingest, so a kill between that batch's first commit and its
    end left a target the next rebuild refused as "exists already"."""
    _source(hash_engine)
    other = Engine(load_settings({"chunk_size": 120, "chunk_overlap": 20, "ingest_commit_passages": 1}),
                   embedder=HashEmbedder())

    def stop_at_first_added(event: object) -> None:
        if getattr(event, "status", None) == DocumentStatus.ADDED:
            raise KeyboardInterrupt  # as a kill would: the first commit is in, the batch is not done

    with pytest.raises(KeyboardInterrupt):
        other.rebuild("src", "small", on_event=stop_at_first_added)
    assert other.dataset_summary("small").versions == 1
    report = other.rebuild("src", "small")
    assert [r.status for r in report.results].count(DocumentStatus.UNCHANGED) == 1
    assert other.dataset_summary("small").versions == 4
    assert_dataset_consistent(kx_home, "small")


def test_the_fingerprint_refusal_names_the_rebuild_command(hash_engine: Engine) -> None:
    _source(hash_engine)
    with pytest.raises(KxError) as caught:
        _small_chunks().ingest("src", [from_text("More.")])
    assert "kx datasets rebuild src --as NEW_NAME" in caught.value.message


@pytest.fixture
def hash_cli(monkeypatch: pytest.MonkeyPatch, hash_engine: Engine) -> Engine:
    """The real `kx` command line over the tiny embedder, with dataset 'src' holding one 600-word document."""
    import engine.embedding.embedders

    # the engine imports load_embedder when it first needs a model: patch it where it lives
    monkeypatch.setattr(engine.embedding.embedders, "load_embedder",
                        lambda card, *args, **kwargs: HashEmbedder(card.dimension) if card else None)
    hash_engine.ingest("src", [from_text(" ".join(f"word{i}" for i in range(600)), name="words")])
    hash_engine.close()
    return hash_engine


def _passages(name: str) -> int:
    listed = {d["name"]: d for d in json.loads(run_cli("datasets", "list", "--json").stdout)}
    return listed[name]["passages"]


def test_cli_rebuild_applies_chunk_settings_given_with_set(hash_cli: Engine) -> None:
    """`--set chunk_size=200` used to be overwritten by the absent --chunk-size flag: the rebuilt dataset kept
    the old passages, and `--set chunk_size=abc` was accepted."""
    by_set = run_cli("datasets", "rebuild", "src", "--as", "by-set", "--set", "chunk_size=200",
                     "--set", "chunk_overlap=50")
    assert by_set.code == 0, by_set.stderr
    by_flag = run_cli("datasets", "rebuild", "src", "--as", "by-flag", "--chunk-size", "200", "--chunk-overlap", "50")
    assert by_flag.code == 0, by_flag.stderr
    assert _passages("by-set") == _passages("by-flag") > _passages("src")
    summary = Engine(load_settings(), embedder=HashEmbedder()).dataset_summary("by-set")
    assert (summary.fingerprint["chunk_size"], summary.fingerprint["chunk_overlap"]) == (200, 50)


@pytest.mark.parametrize("args, words", [
    (["--set", "chunk_size=abc"], "malformed value 'abc'"),
    (["--set", "chunk_overlap=-5"], "chunk_overlap"),
    (["--set", "chunk_size=100", "--set", "chunk_overlap=150"], "must be smaller than chunk_size"),
    (["--set", "chunk_size=200", "--chunk-size", "300"], "give it once"),   # two values for one setting
    (["--chunk-overlap", "10", "--set", "chunk_overlap=10"], "give it once"),
])
def test_cli_rebuild_refuses_bad_chunk_settings_and_makes_nothing(hash_cli: Engine, kx_home: Path,
                                                                   args: list[str], words: str) -> None:
    result = run_cli("datasets", "rebuild", "src", "--as", "bad", *args)
    assert result.code == Status.INVALID_ARGUMENT.exit_code, result.stderr
    assert "error: INVALID_ARGUMENT" in result.stderr and words in result.stderr
    assert not (kx_home / "datasets" / "bad").exists()


def test_a_failed_rebuild_leaves_no_dataset_behind(hash_cli: Engine, kx_home: Path) -> None:
    """A rebuild under a model that cannot load failed (exit 5) but left an empty 'r1' that `kx datasets list`
    showed as `r1 0 0 -`."""
    before = catalogue_counts(kx_home, "src")
    result = run_cli("datasets", "rebuild", "src", "--as", "r1", "--set", "embed_model=bogus")
    assert result.code == Status.FAILED_PRECONDITION.exit_code and "'bogus'" in result.stderr
    listed = run_cli("datasets", "list")
    assert listed.code == 0 and "r1" not in listed.stdout and "src" in listed.stdout
    assert not (kx_home / "datasets" / "r1").exists()
    assert catalogue_counts(kx_home, "src") == before   # the source untouched
    again = run_cli("datasets", "rebuild", "src", "--as", "r1")   # the name is free again
    assert again.code == 0, again.stderr


def test_a_rebuild_failing_part_way_discards_only_a_target_it_created(hash_cli: Engine, kx_home: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    other = _small_chunks()

    def full_disk(*_args, **_kwargs):
        raise KxError(Status.RESOURCE_EXHAUSTED, "the disk is full; free space and run the same command again")

    monkeypatch.setattr(other, "embed", full_disk)   # stage 1 committed, stage 2 fails
    with pytest.raises(KxError):
        other.rebuild("src", "small")
    assert not (kx_home / "datasets" / "small").exists()

    def stop(event: object) -> None:
        if getattr(event, "status", None) == DocumentStatus.ADDED:
            raise KeyboardInterrupt   # a stop keeps what was committed, for the same command to continue

    with pytest.raises(KeyboardInterrupt):
        other.rebuild("src", "small", on_event=stop)
    assert other.dataset_summary("small").versions == 1
    with pytest.raises(KxError):   # continuing it fails: the target was there before, so it stays
        other.rebuild("src", "small")
    assert other.dataset_summary("small").versions == 1


@pytest.mark.slow
def test_cli_rebuild_to_int8_answers_with_the_same_documents(tmp_path: Path, kx_home: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "guide" / "index.md").write_text("# Guide\n\nRefunds are granted within thirty days of purchase.")
    (docs / "api" / "index.md").parent.mkdir()
    (docs / "api" / "index.md").write_text("# API\n\nThe token endpoint issues bearer tokens for one hour.")
    assert run_cli("datasets", "ingest", "hb", str(docs)).code == 0
    result = run_cli("datasets", "rebuild", "hb", "--as", "hb8", "--set", "embed_model=default-int8", "--json")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["added"] == 2
    listed = {d["name"]: d for d in json.loads(run_cli("datasets", "list", "--json").stdout)}
    assert "int8" in listed["hb8"]["embed_model"] and listed["hb8"]["documents"] == 2
    names = [d["name"] for d in json.loads(run_cli("datasets", "documents", "hb8", "--json").stdout)["documents"]]
    assert sorted(names) == ["api/index", "guide/index"]
    hits = json.loads(run_cli("--set", "embed_model=default-int8", "datasets", "query", "hb8",
                              "how long is the refund window", "--json", "-k", "1").stdout)["hits"]
    assert hits[0]["document_name"] == "guide/index"
    # the dataset remembers its model: a plain query (and ingest) needs no --set (engine/dataset_settings.py)
    plain = run_cli("datasets", "query", "hb8", "how long is the refund window", "--json", "-k", "1")
    assert plain.code == 0, plain.stderr
    assert json.loads(plain.stdout)["hits"][0]["document_name"] == "guide/index"
    added = run_cli("datasets", "ingest", "hb8", "--text", "Parking is free after six.", "--json")
    assert added.code == 0 and json.loads(added.stdout)["added"] == 1, added.stderr
    # an operator's explicit model still refuses (the seed's scenario), naming the command that works
    monkeypatch.setenv("KX_SERVE_EMBED_MODEL", "default")
    refused = run_cli("datasets", "query", "hb8", "refund window")
    assert refused.code == 5, refused.stderr
    assert "this command set embed_model (env KX_SERVE_EMBED_MODEL)" in refused.stderr
    assert "kx --set embed_model=default-int8 datasets query hb8" in refused.stderr
    monkeypatch.delenv("KX_SERVE_EMBED_MODEL")

    # list says each dataset's model and chunking (a plain engine cutting at a dataset's own size, and the
    # refusal of an explicit other one: tests/test_dataset_settings.py, without the model)
    shown = run_cli("datasets", "list").stdout
    assert "1000/200" in shown and "int8" in shown
