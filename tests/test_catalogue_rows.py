"""Rows damaged in place (one byte of a ref, one bit of a vector, a text that is no longer UTF-8, a row gone):
DATA_LOSS naming the dataset and `kx datasets check`, never a wrong hit or INTERNAL; the check finds each
one and `--repair` sets it aside, says what was lost, and rebuilds the indexes. A forked dataset's graph
copied over the other's is rebuilt, not believed.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from engine import Engine, KxError, Status
from engine.text.inputs import from_text

from .helpers import run_cli, small_engine

DOCS = [f"note {i}: elephants and penguins share the zoo's {word} enclosure" for i, word in
        enumerate(["north", "south", "east", "west", "river", "hill"])]


@pytest.fixture
def zoo(kx_home: Path) -> Path:
    engine = small_engine()
    engine.ingest("zoo", [from_text(t, name=f"n{i}") for i, t in enumerate(DOCS)])
    engine.close()
    return kx_home / "datasets" / "zoo" / "catalog.sqlite"


def _edit(path: Path, sql: str, *args) -> None:
    db = sqlite3.connect(path)
    db.execute(sql, args)
    db.commit()
    db.close()


def _flip_vector_bit(path: Path, seq: int, byte: int = 3, bit: int = 6) -> None:
    db = sqlite3.connect(path)
    blob = bytearray(db.execute("SELECT vector FROM passages WHERE seq = ?", (seq,)).fetchone()[0])
    blob[byte] ^= 1 << bit  # an exponent bit of the first number
    db.execute("UPDATE passages SET vector = ? WHERE seq = ?", (bytes(blob), seq))
    db.commit()
    db.close()


def _data_loss(call) -> KxError:
    with pytest.raises(KxError) as caught:
        call()
    assert caught.value.status is Status.DATA_LOSS, caught.value
    assert "dataset 'zoo'" in caught.value.message and "kx datasets check zoo" in caught.value.message
    return caught.value


DAMAGES = {
    "one byte of a ref": ("UPDATE passages SET ref = '98' || char(21) || substr(ref, 4) WHERE seq = 2",
                          "passage 2's ref"),
    "a ref of another span": ("UPDATE passages SET char_end = char_end - 1 WHERE seq = 2",
                              "is not the one its document and span"),
    "a text no longer UTF-8": ("UPDATE passages SET text = CAST(x'ff41fe' AS TEXT) WHERE seq = 2",
                               "decode"),
    "a character of a text changed": ("UPDATE passages SET text = 'X' || substr(text, 2) WHERE seq = 2",
                                      "passage 2's text is not its document's text over its span"),
    "a row gone": ("DELETE FROM passages WHERE seq = 2", "passage 2 is in the dataset's indexes but its row"),
    "a document row gone": ("DELETE FROM documents WHERE name = 'n1'", "has passages but no row"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_row_is_data_loss_in_every_mode_never_a_wrong_hit(zoo: Path, damage: str) -> None:
    sql, said = DAMAGES[damage]
    _edit(zoo, sql)
    engine = small_engine()
    # a row gone changes the catalogue's passage count, so the dense graph is rebuilt from the rows left
    # (each whole); the keyword index still holds it
    modes = ("sparse", "hybrid") if damage == "a row gone" else ("dense", "sparse", "hybrid")
    for mode in modes:
        error = _data_loss(lambda: engine.query("zoo", "elephants penguins zoo enclosure", mode=mode, k=10))
        assert said in error.message, (mode, error.message)


def test_a_flipped_vector_bit_is_data_loss_when_read_and_when_the_graph_is_rebuilt(zoo: Path) -> None:
    """It scored -1.26e35 and still ranked 2nd: MMR reads the head's stored vectors, a rebuild all of them."""
    _flip_vector_bit(zoo, 3)
    engine = small_engine()
    error = _data_loss(lambda: engine.query("zoo", "elephants penguins zoo", mode="dense", k=6))
    assert "passage 3's stored vector is not a unit vector" in error.message
    engine.close()
    for name in ("dense.voy", "dense.json"):
        (zoo.parent / name).unlink()
    error = _data_loss(lambda: small_engine().query("zoo", "elephants", mode="sparse", k=3, rerank=False))
    assert "passage 3's stored vector" in error.message


def test_check_finds_each_damaged_row_and_repair_sets_them_aside_and_rebuilds(zoo: Path) -> None:
    healthy = run_cli("datasets", "check", "zoo")
    assert healthy.code == 0 and "'zoo': healthy" in healthy.stdout
    _edit(zoo, DAMAGES["one byte of a ref"][0])
    _edit(zoo, DAMAGES["a text no longer UTF-8"][0].replace("seq = 2", "seq = 4"))
    _flip_vector_bit(zoo, 5)
    found = run_cli("datasets", "check", "zoo", "--json")
    assert found.code == 12, found.stderr
    report = json.loads(found.stdout)
    assert not report["healthy"] and report["passages"] == len(DOCS)
    assert [(f["key"], f["vector_only"]) for f in report["findings"]] == [(2, False), (4, False), (5, True)]
    assert "not valid UTF-8" in report["findings"][1]["problem"]

    repaired = run_cli("datasets", "check", "zoo", "--repair")
    assert repaired.code == 0, repaired.stderr
    assert "repair: 2 passage row(s) and 0 other row(s) set aside into" in repaired.stdout
    assert "1 damaged vector(s) cleared: run `kx datasets embed zoo`" in repaired.stdout
    quarantine = list(zoo.parent.glob("quarantine-*.jsonl"))
    rows = [json.loads(line) for line in quarantine[0].read_text().splitlines()]
    assert [(r["table"], r["row"]["seq"]) for r in rows] == [("passages", 2), ("passages", 4)]
    assert rows[1]["row"]["text"] == "ff41fe"  # every column kept, bytes as hex

    engine = small_engine()
    engine.embed("zoo")  # the cleared vector embedded again from its intact text
    answer = engine.query("zoo", "elephants penguins zoo enclosure", mode="hybrid", k=10)
    assert sorted(h.document_name for h in answer) == ["n0", "n2", "n4", "n5"]  # n1, n3 set aside
    assert run_cli("datasets", "check", "zoo").code == 0


def test_a_forked_datasets_graph_copied_over_the_others_is_rebuilt_not_believed(zoo: Path, kx_home: Path) -> None:
    """`cp -r` keeps the dataset id; after each fork took its own documents, one's graph (same id, same
    passage count) answered the other's dense queries with its own vectors."""
    fork = kx_home / "datasets" / "zoo2"
    shutil.copytree(zoo.parent, fork)
    engine = small_engine()
    engine.ingest("zoo", [from_text("giraffes browse the acacia trees at dawn", name="giraffe")])
    engine.ingest("zoo2", [from_text("the harbour ferry leaves at nine sharp", name="ferry")])
    engine.close()
    for name in ("dense.voy", "dense.json", "sparse.json"):
        shutil.copy2(zoo.parent / name, fork / name)
    shutil.rmtree(fork / "sparse")
    shutil.copytree(zoo.parent / "sparse", fork / "sparse")
    checked = run_cli("datasets", "check", "zoo2")  # the check names both before a query rebuilds them
    assert checked.code == 12 and "dense index describes other passages" in checked.stdout
    assert "keyword index describes other passages" in checked.stdout
    fresh = small_engine()
    hits = fresh.query("zoo2", "the harbour ferry leaves at nine sharp", mode="dense", k=1)
    assert [h.document_name for h in hits] == ["ferry"] and hits.dense_coverage == 1.0
    keyword = fresh.query("zoo2", "harbour ferry", mode="sparse", k=1)
    assert [h.document_name for h in keyword] == ["ferry"] and not keyword.notes
    giraffe = fresh.query("zoo", "giraffes browse the acacia trees at dawn", mode="dense", k=1)
    assert [h.document_name for h in giraffe] == ["giraffe"]


@pytest.mark.slow  # ~2 s: a slice of benchmarks/catalogue_flips.py (4,320 queries there)
def test_random_bit_flips_in_the_catalogue_never_answer_wrongly_or_internal(kx_home: Path, tmp_path: Path) -> None:
    import random

    words = ["north", "south", "river", "hill", "lake", "forest", "harbour", "bridge"]
    engine = small_engine()
    engine.ingest("zoo", [from_text(f"{w} zoo note {i}: elephants and penguins near the {w} {words[i % 8]}. " * 3,
                                    name=f"n{w}{i}") for i, w in enumerate(words * 5)])
    engine.close()
    pristine = kx_home / "datasets" / "zoo"
    db = sqlite3.connect(pristine / "catalog.sqlite")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    queries = [("elephants near the river", "dense"), ("penguins harbour", "sparse"), ("forest bridge", "hybrid")]

    def answers(engine: Engine) -> list:
        return [[(h.passage_ref, h.text, h.document_name, h.score) for h in engine.query("zoo", q, mode=m, k=5)]
                for q, m in queries]

    expected = answers(small_engine())
    rng = random.Random(3)
    tally = {"same": 0, "refused": 0}
    for _ in range(12):
        shutil.rmtree(pristine.parent / "hit", ignore_errors=True)
        shutil.copytree(pristine, pristine.parent / "hit")
        path = pristine.parent / "hit" / "catalog.sqlite"
        data = bytearray(path.read_bytes())
        for _ in range(4):
            data[rng.randrange(100, len(data))] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
        for i, (q, m) in enumerate(queries):
            fresh = small_engine()
            try:
                got = [(h.passage_ref, h.text, h.document_name, h.score)
                       for h in fresh.query("hit", q, mode=m, k=5)]
                assert got == expected[i], "silently wrong"
                tally["same"] += 1
            except KxError as exc:
                assert exc.status is not Status.INTERNAL, exc
                tally["refused"] += 1
            finally:
                fresh.close()
    assert tally["same"] and tally["refused"], tally  # both kinds of round happened
