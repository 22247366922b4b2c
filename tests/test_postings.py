"""The keyword index's own segments (engine/embedded/postings.py, written by engine/embedded/sparse.py): the
writer's analysis, the file format, merges and their policy, and what a crash or an older layout leaves."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from engine import Engine
from engine.embedded.dataset import Dataset
from engine.embedded.postings import (
    SegmentBuilder,
    SegmentFileError,
    Snapshot,
    merge,
    merge_run,
    read_segment,
    write_segment,
)
from engine.text.analysis import build_analyzer, term_counter
from engine.text.inputs import from_text

from .helpers import SHARED_DATA, needs_shared, small_engine

WORDS = "otter walrus badger heron vole stoat marten lynx ibex newt".split()


def _counts(rng: random.Random) -> dict[str, dict[str, int]]:
    body: dict[str, int] = {}
    for _ in range(rng.randint(0, 40)):
        word = rng.choice(WORDS) + str(rng.randint(0, 30))
        body[word] = body.get(word, 0) + 1
    return {"body": body, "name": {rng.choice(WORDS): 1} if rng.random() < 0.7 else {}}


def _built(passages: list[tuple[int, dict]]) -> object:
    builder = SegmentBuilder()
    for seq, counts in passages:
        builder.add(seq, counts)
    return builder.build()


def _as_lists(segment) -> dict:
    return {"seqs": segment.seqs.tolist(),
            **{f"{field}.{part}": getattr(segment.fields[field], part) if part == "terms"
               else getattr(segment.fields[field], part).tolist()
               for field in ("body", "name") for part in ("terms", "offsets", "docs", "tfs")},
            **{f"{field}.lengths": segment.lengths[field].tolist() for field in ("body", "name")}}


@needs_shared("scifact", "corpus.jsonl")
@pytest.mark.parametrize("stopwords", [True, False])
def test_the_writers_analysis_gives_whooshs_chain_its_terms(stopwords: bool) -> None:
    """term_counter skips whoosh's token objects; on real abstracts it gives the same terms and counts, in the
    same first-seen order, as the analyzer chain highlights and older indexes used."""
    chain, counter = build_analyzer(stopwords), term_counter(stopwords)
    with (SHARED_DATA / "scifact" / "corpus.jsonl").open(encoding="utf-8") as lines:
        texts = [json.loads(line)["text"] for _, line in zip(range(400), lines)]
    texts += ["Ünïcode İstanbul ΣΊΣΥΦΟΣ straße v1.2.3 e.g. 4,000 under_score", ""]
    for text in texts:
        expected: dict[str, int] = {}
        for token in chain(text):
            expected[token.text] = expected.get(token.text, 0) + 1
        assert list(counter(text).items()) == list(expected.items())


def test_a_segment_reads_back_as_written_and_merges_as_one_build(tmp_path) -> None:
    rng = random.Random(5)
    passages = [(seq, _counts(rng)) for seq in range(1, 301)]
    whole = _built(passages)
    parts = [_built(passages[a:b]) for a, b in ((0, 1), (1, 120), (120, 121), (121, 300))]
    for number, part in enumerate(parts):
        write_segment(tmp_path / f"{number}.seg", part)
    read = [read_segment(tmp_path / f"{number}.seg") for number in range(len(parts))]
    assert [_as_lists(r) for r in read] == [_as_lists(p) for p in parts]
    assert _as_lists(merge(read)) == _as_lists(whole)
    snapshot = Snapshot(read)
    for word in ("otter3", "vole17", "absent"):
        found, expected = snapshot.postings("body", word), Snapshot([whole]).postings("body", word)
        assert (found is None) == (expected is None)
        if found is not None and expected is not None:
            assert found[0].tolist() == expected[0].tolist() and found[1].tolist() == expected[1].tolist()


def test_a_file_that_is_not_a_whole_segment_is_refused(tmp_path) -> None:
    path = tmp_path / "one.seg"
    write_segment(path, _built([(1, {"body": {"otter": 2}, "name": {}})]))
    whole = path.read_bytes()
    for damaged in (b"", b"KXPOSTINGS1\n", b"garbage" + whole[7:], whole[:len(whole) // 2]):
        path.write_bytes(damaged)
        with pytest.raises(SegmentFileError):
            read_segment(path)


def test_the_merge_policy_rewrites_a_passage_a_few_times_and_keeps_segments_few() -> None:
    """A million passages committed in groups of 50-2,000 (stage one's commit groups): each passage is
    rewritten about once a level, never at nearly every commit, and the segments stay few."""
    rng = random.Random(3)
    sizes: list[int] = []
    rewrites: list[int] = []   # per segment: how often its oldest passages have been rewritten
    worst_count, total = 0, 0
    while total < 1_000_000:
        size = rng.randint(50, 2_000)
        sizes.append(size)
        rewrites.append(0)
        total += size
        while (start := merge_run(sizes)) is not None:
            sizes = sizes[:start] + [sum(sizes[start:])]
            rewrites = rewrites[:start] + [max(rewrites[start:]) + 1]
            worst_count = max(worst_count, len(sizes))
        worst_count = max(worst_count, len(sizes))
    assert sum(sizes) == total
    assert max(rewrites) <= 4      # 3 for this draw
    assert worst_count <= 30       # 21 for this draw


def test_leftovers_of_a_crashed_catch_up_are_removed_and_never_read(hash_engine: Engine) -> None:
    hash_engine.ingest("notes", [from_text("Otters hold hands while they sleep.", "otters")])
    folder = Dataset(hash_engine.settings, "notes").sparse(True).folder
    stray = folder / "99999999.seg"
    write_segment(stray, _built([(1, {"body": {"walrus": 9}, "name": {}})]))   # never named by the sidecar
    (folder / "00000009.tmp").write_bytes(b"half a segm")
    assert hash_engine.query("notes", "walrus", mode="sparse").hits == []
    hash_engine.ingest("notes", [from_text("Walruses sleep in the water.", "walruses")])
    assert not stray.exists() and not (folder / "00000009.tmp").exists()
    assert [h.document_name for h in hash_engine.query("notes", "walrus", mode="sparse").hits] == ["walruses"]


def test_an_index_in_whooshs_layout_is_rebuilt_and_answers_the_same(hash_engine: Engine) -> None:
    """A dataset from before round 4 holds whoosh's segments under a sidecar naming other fields: its next
    catch-up rebuilds the index from the catalogue; the listing shows the passages waiting meanwhile."""
    hash_engine.ingest("notes", [from_text(f"Otter {i} holds hands with walrus {i % 3}.", f"d{i}") for i in range(12)])
    before = [(h.document_name, h.score) for h in hash_engine.query("notes", "walrus holds", mode="sparse").hits]
    dataset = Dataset(hash_engine.settings, "notes")
    sidecar = dataset.folder / "sparse.json"
    meta = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**meta, "fields": "body+name-1"}))
    assert dataset.sparse(True).watermark == 0 and dataset.sparse(True).claimed_watermark == 0
    assert hash_engine.dataset_summary("notes").unindexed == 12
    hash_engine.close()
    assert dataset.heal_if_behind()
    again = small_engine()
    assert [(h.document_name, h.score) for h in again.query("notes", "walrus holds", mode="sparse").hits] == before
    assert again.dataset_summary("notes").unindexed == 0
    again.close()


def test_many_small_commits_score_as_one_big_one(hash_engine: Engine) -> None:
    """The same passages committed one at a time (segments written and merged along the way) or at once
    give the same sparse answers, to the last bit."""
    rng = random.Random(9)
    docs = [from_text(" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 30))), f"n{i}") for i in range(40)]
    for doc in docs:
        hash_engine.ingest("drip", [doc])
    hash_engine.ingest("once", docs)
    folders = {name: Dataset(hash_engine.settings, name).sparse(True).folder for name in ("drip", "once")}
    assert len(list(folders["drip"].glob("*.seg"))) > len(list(folders["once"].glob("*.seg")))
    for query in ("otter", "walrus heron heron", "lynx ibex newt vole"):
        drip = [(h.document_name, h.score) for h in hash_engine.query("drip", query, mode="sparse", k=40).hits]
        once = [(h.document_name, h.score) for h in hash_engine.query("once", query, mode="sparse", k=40).hits]
        assert drip == once and drip
    assert np.array_equal(*(Snapshot([read_segment(p) for p in sorted(f.glob("*.seg"))]).lengths("body").sum()
                            for f in folders.values()))
