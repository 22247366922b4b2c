"""Corruption campaign: random bit flips in a dataset's catalogue, then queries; never a silently wrong answer.

    python benchmarks/catalogue_flips.py [--rounds 60] [--flips 8] [--seed 7] [--docs 400]

A dataset of SciFact documents (real text; the tiny deterministic embedder of
tests/helpers.py, so no model is loaded) is built once. Each round copies it,
flips `--flips` random bits in the catalogue file (its WAL folded in first,
so the damage is to the data), opens it with a fresh engine and runs every
query in every mode. Each answer is one of:

- same: the pristine dataset's hits (refs, texts, names) and scores;
- refused: a KxError DATA_LOSS (or another named status);
- INTERNAL: a KxError INTERNAL or any other exception (a bug);
- silently wrong: an answer that differs from the pristine one, no error (a bug).

A flip in a page no query reads changes nothing (same). The target is 0
silently wrong and 0 INTERNAL over at least 500 queries. Then, per round,
`kx datasets check` must find the damage whenever a query was refused.

Second part (`--latency`): what the row checks cost a query, A/B in turns on
one engine (checks on, then the same query with the unchecked readers).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engine import Engine, KxError, Status, load_settings  # noqa: E402
from engine.text.inputs import from_text  # noqa: E402
from tests.helpers import HashEmbedder  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "scifact"
MODES = ("dense", "sparse", "hybrid")


def _settings(home: Path):
    return load_settings({"home": str(home), "chunk_size": 400, "chunk_overlap": 80})


def _engine(home: Path) -> Engine:
    return Engine(_settings(home), embedder=HashEmbedder(dimension=64))


def build(home: Path, docs: int) -> list[str]:
    rows = [json.loads(line) for line in (DATA / "corpus.jsonl").open()][:docs]
    queries = [json.loads(line)["text"] for line in (DATA / "queries.jsonl").open()][:12]
    if not (home / "datasets" / "sci" / "catalog.sqlite").exists():
        engine = _engine(home)
        engine.ingest("sci", [from_text(f"{r.get('title', '')}\n\n{r['text']}", name=f"d{r['_id']}") for r in rows])
        engine.close()
        db = sqlite3.connect(home / "datasets" / "sci" / "catalog.sqlite")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
    return queries


def answer(engine: Engine, text: str, mode: str) -> list[tuple]:
    return [(h.passage_ref, h.text, h.document_name, h.score) for h in engine.query("sci", text, mode=mode, k=10)]


def flip(path: Path, count: int, rng: random.Random) -> list[int]:
    data = bytearray(path.read_bytes())
    offsets = [rng.randrange(100, len(data)) for _ in range(count)]  # past the header's magic string
    for at in offsets:
        data[at] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))
    return offsets


def campaign(root: Path, rounds: int, flips: int, seed: int, docs: int) -> dict:
    pristine = root / "pristine"
    queries = build(pristine, docs)
    engine = _engine(pristine)
    expected = {(q, m): answer(engine, q, m) for q in queries for m in MODES}
    engine.close()
    rng = random.Random(seed)
    tally: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    unfound = 0
    examples: list[str] = []
    for round_no in range(rounds):
        home = root / "round"
        shutil.rmtree(home, ignore_errors=True)
        shutil.copytree(pristine, home)
        flip(home / "datasets" / "sci" / "catalog.sqlite", flips, rng)
        refused_here = False
        for q in queries:
            for m in MODES:
                engine = _engine(home)  # a fresh process's view: nothing cached from a clean read
                try:
                    got = answer(engine, q, m)
                    kind = "same" if got == expected[(q, m)] else "silently wrong"
                except KxError as exc:
                    kind = "INTERNAL" if exc.status is Status.INTERNAL else "refused"
                    statuses[exc.status.name] += 1
                    refused_here = True
                    if kind == "INTERNAL":
                        examples.append(f"round {round_no}: {exc.message[:200]}")
                except Exception as exc:  # noqa: BLE001 - the campaign counts whatever escapes
                    kind = "INTERNAL"
                    import traceback

                    where = traceback.extract_tb(exc.__traceback__)[-1]
                    examples.append(f"round {round_no}: {type(exc).__name__}: {str(exc)[:120]} "
                                    f"({Path(where.filename).name}:{where.lineno})")
                finally:
                    engine.close()
                tally[kind] += 1
                if kind == "silently wrong":
                    examples.append(f"round {round_no}: {m} {q[:40]!r} differs")
        if refused_here:
            from engine.embedded.integrity import check_dataset

            try:
                healthy = check_dataset(_settings(home), "sci").healthy
            except KxError:
                healthy = False  # the check itself refused (DATA_LOSS): it found the damage
            unfound += int(healthy)
        print(f"round {round_no + 1}/{rounds}: {dict(tally)}", flush=True)
    return {"queries": sum(tally.values()), "rounds": rounds, "flips_per_round": flips, "seed": seed,
            "documents": docs, "answers": dict(tally), "statuses": dict(statuses),
            "refused_rounds_check_called_healthy": unfound, "examples": examples[:10]}


def latency(root: Path, docs: int, repeats: int) -> dict:
    """p50 query time with the row checks and without (the unchecked readers patched in), in turns."""
    import numpy as np

    from engine.embedded import readers
    from engine.embedded.catalogue import passages

    pristine = root / "pristine"
    queries = build(pristine, docs)
    engine = _engine(pristine)
    cls = passages.PassageReads
    checked = (cls.passages_by_seq, cls.refs_by_seq, cls.vectors_by_seq, readers.DatasetSearcher.documents)

    def unchecked_passages(self, seqs):
        rows = self._where_in(self._select("passages", passages.PASSAGE_COLUMNS), "seq", [int(s) for s in seqs])
        return {row[0]: passages.PassageRow(*row) for row in rows}

    def unchecked_refs(self, seqs):
        return dict(self._where_in("SELECT seq, ref FROM passages", "seq", [int(s) for s in seqs]))

    def unchecked_vectors(self, seqs, dimension):
        found = dict(self._where_in("SELECT seq, vector FROM passages", "seq", [int(s) for s in seqs]))
        return np.frombuffer(b"".join(found[int(s)] for s in seqs), dtype=np.float32).reshape(len(seqs), dimension)

    def unchecked_documents(self, refs):
        return readers.shown_documents(self.catalogue.documents_by_ref(refs), self._lineages())

    plain = (unchecked_passages, unchecked_refs, unchecked_vectors, unchecked_documents)

    def use(functions) -> None:
        cls.passages_by_seq, cls.refs_by_seq, cls.vectors_by_seq, readers.DatasetSearcher.documents = functions

    times: dict[str, dict[str, list[float]]] = {m: {"checked": [], "unchecked": []} for m in MODES}
    for q in queries:
        for m in MODES:
            engine.query("sci", q, mode=m)  # warm
    for _ in range(repeats):
        for q in queries:
            for m in MODES:
                for label, functions in (("checked", checked), ("unchecked", plain)):
                    use(functions)
                    engine.searcher("sci")._ref_of.clear()  # each query reads its refs, as a fresh reader would
                    started = time.perf_counter()
                    engine.query("sci", q, mode=m)
                    times[m][label].append((time.perf_counter() - started) * 1000)
    use(checked)
    engine.close()
    out = {}
    for m in MODES:
        a, b = float(np.median(times[m]["checked"])), float(np.median(times[m]["unchecked"]))
        out[m] = {"p50_checked_ms": round(a, 3), "p50_unchecked_ms": round(b, 3), "ratio": round(a / b, 3)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--flips", type=int, default=8)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--latency", action="store_true", help="measure what the row checks cost instead")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--root", type=Path, default=REPO / "benchmarks" / "out" / "catalogue-flips")
    args = parser.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    if args.latency:
        print(json.dumps(latency(args.root, args.docs, args.repeats), indent=2))
    else:
        print(json.dumps(campaign(args.root, args.rounds, args.flips, args.seed, args.docs), indent=2))


if __name__ == "__main__":
    main()
