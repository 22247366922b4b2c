"""Crash campaign: SIGKILL kx at random moments and check nothing reported is lost, doubled or corrupt.

    python benchmarks/crashes.py [--ingest 50] [--watch 20] [--gateway 20] [--embedding 20] [--retire 20]
                                 [--rebuild 20] [--docs 20] [--seed 13]

By hand, not in CI (minutes per dozen kills). Three targets, each a real
`kx` process on a SciFact slice (one abstract per file, KX_INGEST_COMMIT_PASSAGES
small so a command makes many commits for a kill to land between):

- ingest:  `kx datasets ingest crash-ingest FILES...` killed at a moment drawn
  uniformly from [0, the uninterrupted command's duration]; then the same
  command is run again to completion (the restart). Then the same files go
  into a reference dataset in one uninterrupted ingest, and both answer each
  round's first five documents' first words: sparse hits and scores must be
  the same floats, hybrid hits the same passages in order ("differed").
- watch:   `kx datasets watch crash-watch DIR --json` with the round's files
  dropped in, killed likewise; restarted until the dataset holds them all.
- gateway: `kx serve` killed while a client uploads the round's documents
  (POST /v1/datasets/crash-gateway/documents); restarted, the upload repeated.
- embedding: `kx datasets ingest` killed during stage 2, at a moment drawn
  uniformly from the span in which the catalogue holds some vectors of the
  round's passages and not all (the embedding backlog half done); then
  `kx datasets embed` finishes it. Checked: the resumer embedded exactly the
  backlog the kill left (0 embedded twice), every passage has one vector,
  the dense graph holds every passage, each document is found by its text.
- retire:  `kx datasets watch crash-retire DIR --json` on a folder its dataset
  already holds, with 2-6 files deleted since (every other round: before the
  watch starts, so its start scan retires them; or while it watches) and the
  files the previous round deleted put back; killed at a moment drawn from
  the time that retiring (and restoring) takes. Checked after the kill: every
  file reported `retired` answers no more by default, nothing doubled; after a
  restart, the documents that answer by default are exactly the folder's files
  (retired ones gone, restored ones back), every one found by its own text.
- rebuild: `kx datasets rebuild crash-source --as crash-rebuilt-N --chunk-size
  600 --chunk-overlap 100` from a source with two retired lineages, killed at a
  moment drawn from the uninterrupted command's duration; then the same
  command again (a rebuild continues into its own unfinished target). Checked:
  the source untouched (same documents, passages, vectors and lineage state),
  the target's catalogue consistent after the kill and, after the resumed
  command, the source's documents with its lineage state (retired ones not
  answering), every passage embedded once, indexes at the top, each live
  document found by its own text.

After every kill, before anything else touches the dataset:
`PRAGMA integrity_check` is ok and every document the killed process
reported as added (its "added" lines / "ingested" events / the response
that made it out) is in the catalogue exactly once. After the restart: the
indexes have caught up (both sidecar watermarks = the top passage seq,
without a query healing them), every reported document is found by its
own exact text in sparse and in dense search, and no name or passage is
doubled. A kill "survives" when all of that holds; "lost" counts reported
documents missing; "corrupt" counts datasets failing a check.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import DATA, REPO


@dataclass
class Tally:
    kills: int = 0
    survived: int = 0
    lost: int = 0
    corrupt: int = 0
    before_first_commit: int = 0
    finished_first: int = 0        # rounds whose command ended before its kill: not counted as kills
    differed: int = 0              # ingest rounds whose answers differ from an uninterrupted ingest's
    problems: list[str] = field(default_factory=list)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KX_")}
    env.update({"KX_HOME": str(home), "KX_INGEST_COMMIT_PASSAGES": "4", "PYTHONUNBUFFERED": "1",
                "PYTHONPATH": str(REPO),
                # one export cache for every home, prepared before the campaigns: a first-use ONNX export
                # (~10 s) inside a calibration would stretch the kill windows past the real work
                "KX_MODEL_CACHE": str(home.parent / "model-cache")})
    return env


def _kx(home: Path, *args: str, extra: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kx_tui", *args], cwd=REPO, env={**_env(home), **(extra or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class Reader:
    """Collects a process's stdout lines on a thread (so a kill never loses what was already printed)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self.times: list[float] = []   # when each line arrived (time.monotonic())
        self._thread = threading.Thread(target=self._pump, args=(proc.stdout,), daemon=True)
        self._thread.start()
        threading.Thread(target=lambda: proc.stderr.read(), daemon=True).start()

    def _pump(self, stream) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))
            self.times.append(time.monotonic())

    def join(self) -> None:
        self._thread.join(timeout=10)


def _slice(count: int, start: int) -> list[dict]:
    """`count` SciFact abstracts from line `start` on; refuses a slice past the corpus's end (a campaign of
    empty commands would never get a kill in)."""
    out = []
    with (DATA / "scifact" / "corpus.jsonl").open(encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            if number >= start + count:
                break
            if number >= start:
                record = json.loads(line)
                out.append({"name": f"sf-{record['_id']}", "text": f"{record['title']}\n\n{record['text']}"})
    if len(out) < count:
        raise SystemExit(f"SciFact has no {count} abstracts from line {start} on")
    return out


def _write(folder: Path, docs: list[dict]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for doc in docs:
        path = folder / f"{doc['name']}.txt"
        path.write_text(doc["text"], encoding="utf-8")
        paths.append(path)
    return paths


# -- the checks ---------------------------------------------------------------------------


def _catalogue(home: Path, dataset: str) -> Path:
    return home / "datasets" / dataset / "catalog.sqlite"


def check_after_kill(home: Path, dataset: str, reported: set[str], tally: Tally, what: str) -> bool:
    """integrity_check ok and every reported document present exactly once. Returns False if corrupt."""
    path = _catalogue(home, dataset)
    if not path.exists():
        if reported:
            tally.lost += len(reported)
            tally.problems.append(f"{what}: no catalogue, {len(reported)} reported documents gone")
        return True
    db = sqlite3.connect(path)  # read-write, as the next kx would: a hot WAL is replayed
    try:
        verdict = db.execute("PRAGMA integrity_check").fetchone()[0]
        names = [row[0] for row in db.execute("SELECT name FROM documents")]
    finally:
        db.close()
    if verdict != "ok":
        tally.corrupt += 1
        tally.problems.append(f"{what}: integrity_check says {verdict}")
        return False
    missing = reported - set(names)
    doubled = {n for n in names if names.count(n) > 1}
    if missing:
        tally.lost += len(missing)
        tally.problems.append(f"{what}: reported added but missing: {sorted(missing)[:5]}")
    if doubled:
        tally.corrupt += 1
        tally.problems.append(f"{what}: doubled after the kill: {sorted(doubled)[:5]}")
        return False
    return not missing


def check_after_restart(home: Path, dataset: str, expected: dict[str, str], tally: Tally, what: str,
                        embedder, settings: dict[str, object] | None = None) -> bool:
    """Indexes caught up, every expected document findable by its text in both retrievers, nothing doubled."""
    from engine import Engine, load_settings

    folder = home / "datasets" / dataset
    if not (folder / "catalog.sqlite").exists():
        tally.corrupt += 1
        tally.problems.append(f"{what}: after the restart there is no catalogue at {folder}")
        return False
    db = sqlite3.connect(f"file:{folder / 'catalog.sqlite'}?mode=ro", uri=True)
    try:
        top, passages = db.execute("SELECT COALESCE(MAX(seq), 0), COUNT(*) FROM passages").fetchone()
        names = [row[0] for row in db.execute("SELECT name FROM documents")]
        broken = db.execute("SELECT COUNT(*) FROM (SELECT d.ref FROM documents d LEFT JOIN passages p "
                            "ON p.doc_ref = d.ref GROUP BY d.ref HAVING COUNT(p.seq) != d.passage_count)"
                            ).fetchone()[0]
    finally:
        db.close()
    ok = True
    dense = json.loads((folder / "dense.json").read_text())
    sparse = json.loads((folder / "sparse.json").read_text())
    if dense["watermark"] != top or sparse["watermark"] != top or dense["count"] != passages:
        tally.problems.append(f"{what}: indexes behind after the restart (top {top}, dense {dense['watermark']}, "
                              f"sparse {sparse['watermark']})")
        ok = False
    if len(names) != len(set(names)) or broken:
        tally.problems.append(f"{what}: {len(names) - len(set(names))} doubled names, {broken} partial documents")
        ok = False
    missing = set(expected) - set(names)
    if missing:
        tally.lost += len(missing)
        tally.problems.append(f"{what}: after the restart {len(missing)} documents missing")
        ok = False
    engine = Engine(load_settings({"home": str(home), **(settings or {})}), embedder=embedder)
    try:
        for name in sorted(set(expected) & set(names)):
            for mode in ("sparse", "dense"):
                hits = engine.query(dataset, expected[name], mode=mode, k=5, rerank=False).hits
                if name not in [h.document_name for h in hits]:
                    tally.problems.append(f"{what}: {name} not found by its own text in {mode}")
                    ok = False
    finally:
        engine.close()
    return ok


def _finish(home: Path, dataset: str, docs: list[dict], reported: set[str], restarted: set[str], good: bool,
            tally: Tally, what: str, embedder) -> None:
    """The after-restart checks, the tally and the round's line."""
    if restarted & reported:
        tally.problems.append(f"{what}: re-added after the restart: {sorted(restarted & reported)[:5]}")
        good = False
    good = check_after_restart(home, dataset, {d["name"]: d["text"] for d in docs}, tally, what, embedder) and good
    tally.survived += good
    print(f"  {what}: {len(reported)} reported added before the kill -> {'ok' if good else 'FAILED'}", flush=True)


# -- the targets ---------------------------------------------------------------------------


def _kill_at(proc: subprocess.Popen, delay: float) -> bool:
    """SIGKILL `proc` after `delay` s; False if it had already exited by then (no kill happened)."""
    deadline = time.monotonic() + delay
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    return killed


def _added_lines(lines: list[str]) -> set[str]:
    return {line.split()[1] for line in lines if line.startswith("added ")}


class Uninterrupted:
    """The same files ingested in one go, in this process, with kx's default commit groups: what a killed and
    resumed ingest must answer exactly like (issue 38: BM25's statistics from the live passages)."""

    QUERIES_PER_ROUND = 5

    def __init__(self, root: Path, embedder) -> None:
        from engine import Engine, load_settings

        self.home = root / "uninterrupted-home"
        self.engine = Engine(load_settings({"home": str(self.home)}, env={}), embedder=embedder)

    def add(self, paths: list[Path]) -> None:
        from engine.text.inputs import from_file

        self.engine.ingest("reference", [from_file(p, 10**8) for p in paths])

    def check(self, home: Path, dataset: str, paths: list[Path], docs: list[dict], tally: Tally, what: str) -> bool:
        """Ingest this round's files here too, then ask both datasets each document's first words: the sparse
        hits and scores must be the same floats, the hybrid hits the same passages in the same order."""
        from engine import Engine, load_settings

        self.add(paths)
        resumed = Engine(load_settings({"home": str(home)}, env={}), embedder=self.engine.embedder())
        try:
            for doc in docs[:self.QUERIES_PER_ROUND]:
                query = " ".join(doc["text"].split()[:12])
                for mode in ("sparse", "hybrid"):
                    ours = [(h.passage_ref, h.score if mode == "sparse" else None)
                            for h in resumed.query(dataset, query, mode=mode, k=10).hits]
                    theirs = [(h.passage_ref, h.score if mode == "sparse" else None)
                              for h in self.engine.query("reference", query, mode=mode, k=10).hits]
                    if ours != theirs:
                        tally.differed += 1
                        tally.problems.append(f"{what}: {mode} answers to {query[:40]!r} differ from an "
                                              "uninterrupted ingest's")
                        return False
        finally:
            resumed.close()
        return True


def campaign_ingest(root: Path, rounds: int, per: int, rng: random.Random, embedder, tally: Tally) -> None:
    home, dataset = root / "ingest-home", "crash-ingest"
    uninterrupted = Uninterrupted(root, embedder)
    calibrate = _write(root / "files-calibrate", _slice(per, 4000))
    started = time.monotonic()
    proc = _kx(home, "datasets", "ingest", "crash-calibrate", *map(str, calibrate))
    calibration = Reader(proc)
    proc.wait(timeout=600)
    calibration.join()
    span = time.monotonic() - started
    added = [t for t, line in zip(calibration.times, calibration.lines) if line.startswith("added")]
    # After the last commit the command still brings the indexes up to date and exits; with a fast model that
    # is most of its time, so every other kill is drawn from the commits' window alone.
    commits = (added[-1] - started) if added else span
    print(f"ingest: one uninterrupted command of {per} files takes {span:.1f} s, its last commit at {commits:.1f} s; "
          f"kills drawn from [0, {span:.1f}] and [0, {commits:.1f}] in turn", flush=True)
    number = 0
    while tally.kills < rounds:
        docs = _slice(per, number * per)
        paths = _write(root / f"files-{number}", docs)
        proc = _kx(home, "datasets", "ingest", dataset, *map(str, paths))
        reader = Reader(proc)
        delay = rng.uniform(0, span if number % 2 == 0 else commits)
        number += 1
        killed = _kill_at(proc, delay)
        reader.join()
        if not killed:  # it finished first: a complete ingest, not a crash; the next round draws again
            tally.finished_first += 1
            uninterrupted.add(paths)
            continue
        reported = _added_lines(reader.lines)
        what = f"ingest kill {tally.kills + 1} at {delay:.2f} s"
        tally.kills += 1
        tally.before_first_commit += not reported
        good = check_after_kill(home, dataset, reported, tally, what)
        again = _kx(home, "datasets", "ingest", dataset, *map(str, paths))
        out, err = again.communicate(timeout=600)
        if again.returncode != 0:
            tally.problems.append(f"{what}: the restart exited {again.returncode}: {err.strip()[-300:]}")
            good = False
        _finish(home, dataset, docs, reported, _added_lines(out.splitlines()), good, tally, what, embedder)
        uninterrupted.check(home, dataset, paths, docs, tally, what)


def campaign_watch(root: Path, rounds: int, per: int, rng: random.Random, embedder, tally: Tally) -> None:
    home, dataset = root / "watch-home", "crash-watch"
    inbox = root / "inbox"
    inbox.mkdir()
    span = _calibrate_watch(root, per)
    print(f"watch: {per} dropped files are all in {span:.1f} s after the drop; kills drawn from [0, {span:.1f}]",
          flush=True)
    for number in range(rounds):
        docs = _slice(per, 2000 + number * per)
        proc = _kx(home, "datasets", "watch", dataset, str(inbox), "--json", "--settle", "0.3")
        reader = Reader(proc)
        while not any('"watching"' in line for line in reader.lines) and proc.poll() is None:
            time.sleep(0.05)
        _write(inbox, docs)
        delay = rng.uniform(0, span)
        _kill_at(proc, delay)
        reader.join()
        reported = set()
        for line in reader.lines:
            event = json.loads(line) if line.startswith("{") else {}
            if event.get("event") == "ingested":
                reported.add(event["name"])
        what = f"watch kill {number + 1} at {delay:.2f} s"
        tally.kills += 1
        tally.before_first_commit += not reported
        good = check_after_kill(home, dataset, reported, tally, what)
        total = (number + 1) * per
        again = _kx(home, "datasets", "watch", dataset, str(inbox), "--json", "--settle", "0.3")
        lines = Reader(again)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and again.poll() is None:
            done = [json.loads(l) for l in lines.lines if l.startswith('{"event": "batch_done"')]
            if done and done[-1]["documents"] >= total and not _pending(lines.lines):
                break
            if _catalogue(home, dataset).exists() and not done and _count(home, dataset) >= total:
                break  # everything was in already: the restart only finds it unchanged
            time.sleep(0.1)
        again.send_signal(signal.SIGTERM)
        again.wait(timeout=60)
        lines.join()
        readded = {json.loads(l)["name"] for l in lines.lines if l.startswith('{"event": "ingested"')}
        _finish(home, dataset, docs, reported, readded, good, tally, what, embedder)


def _calibrate_watch(root: Path, per: int) -> float:
    """Seconds from dropping a round's files into a fresh watch until the last is in (the model loads lazily)."""
    home, inbox = root / "watch-calibrate", root / "inbox-calibrate"
    inbox.mkdir()
    proc = _kx(home, "datasets", "watch", "calibrate", str(inbox), "--json", "--settle", "0.3")
    reader = Reader(proc)
    while not any('"watching"' in line for line in reader.lines) and proc.poll() is None:
        time.sleep(0.05)
    started = time.monotonic()
    _write(inbox, _slice(per, 4500))
    while time.monotonic() - started < 600 and proc.poll() is None:
        done = [json.loads(l) for l in reader.lines if l.startswith('{"event": "batch_done"')]
        if done and done[-1]["documents"] >= per:
            break
        time.sleep(0.05)
    span = time.monotonic() - started
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    return span


def _pending(lines: list[str]) -> bool:
    """A batch started but not yet done."""
    started = sum(1 for l in lines if l.startswith('{"event": "batch_started"'))
    done = sum(1 for l in lines if l.startswith('{"event": "batch_done"'))
    return started > done


def _count(home: Path, dataset: str) -> int:
    db = sqlite3.connect(f"file:{_catalogue(home, dataset)}?mode=ro", uri=True)
    try:
        return db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    finally:
        db.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _serve(home: Path) -> tuple[subprocess.Popen, str, str]:
    import httpx

    port = _free_port()
    proc = _kx(home, "serve", "--quiet", "--port", str(port))  # its stderr is an undrained pipe
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/v1/health", timeout=1).status_code == 200:
                return proc, url, (home / "gateway.token").read_text().strip()
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("kx serve did not start")


def campaign_gateway(root: Path, rounds: int, per: int, rng: random.Random, embedder, tally: Tally) -> None:
    import httpx

    home, dataset = root / "gateway-home", "crash-gateway"
    proc, url, token = _serve(home)
    started = time.monotonic()
    calibrate = {"documents": [{"text": d["text"], "name": d["name"]} for d in _slice(per, 4500)]}
    httpx.post(f"{url}/v1/datasets/crash-calibrate/documents", json=calibrate,
               headers={"Authorization": f"Bearer {token}"}, timeout=600).raise_for_status()
    span = (time.monotonic() - started) * 1.2  # a little past the answer, so some kills come after it
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    print(f"gateway: an upload of {per} documents to a fresh gateway takes {span / 1.2:.1f} s; kills drawn "
          f"from [0, {span:.1f}]", flush=True)
    for number in range(rounds):
        docs = _slice(per, 3000 + number * per)
        body = {"documents": [{"text": d["text"], "name": d["name"]} for d in docs]}
        proc, url, token = _serve(home)
        headers = {"Authorization": f"Bearer {token}"}
        answer: dict = {}

        def upload() -> None:
            try:
                response = httpx.post(f"{url}/v1/datasets/{dataset}/documents", json=body, headers=headers,
                                      timeout=300)
                answer["report"] = response.json()
            except (httpx.TransportError, ValueError) as exc:
                answer["error"] = repr(exc)

        client = threading.Thread(target=upload)
        client.start()
        delay = rng.uniform(0.0, span)
        _kill_at(proc, delay)
        client.join(timeout=60)
        report = answer.get("report") or {}
        reported = {r["name"] for r in report.get("results", []) if r.get("status") == "added"}
        what = f"gateway kill {number + 1} at {delay:.2f} s"
        tally.kills += 1
        tally.before_first_commit += not reported
        good = check_after_kill(home, dataset, reported, tally, what)
        proc, url, token = _serve(home)
        try:
            again = httpx.post(f"{url}/v1/datasets/{dataset}/documents", json=body, headers=headers, timeout=600)
            redone = again.json()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        if again.status_code != 200:
            tally.problems.append(f"{what}: the restart's upload answered {again.status_code}")
            good = False
        readded = {r["name"] for r in redone.get("results", []) if r.get("status") == "added"}
        _finish(home, dataset, docs, reported, readded, good, tally, what, embedder)


def _vector_state(home: Path, dataset: str) -> tuple[int, int]:
    """(passages, passages still without a vector), read-only; (0, 0) before the catalogue exists."""
    path = _catalogue(home, dataset)
    if not path.exists():
        return 0, 0
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return tuple(db.execute("SELECT COUNT(*), COALESCE(SUM(length(vector) = 0), 0) FROM passages"
                                    ).fetchone())  # type: ignore[return-value]
        finally:
            db.close()
    except sqlite3.DatabaseError:
        return 0, 0


def campaign_embedding(root: Path, rounds: int, per: int, rng: random.Random, embedder, tally: Tally) -> None:
    number = 0
    while tally.kills < rounds:
        home, dataset = root / f"embedding-home-{number}", "crash-embedding"
        # enough passages for several embedding chunks; SciFact has 5,183 abstracts (each round has its own home)
        docs = _slice(per * 3, (number * per * 3) % 5000)
        paths = _write(root / f"embedding-files-{number}", docs)
        # embedding chunks of 8 x 8 passages: many vector commits for a kill to land between
        proc = _kx(home, "datasets", "ingest", dataset, *map(str, paths), extra={"KX_EMBED_BATCH_SIZE": "8"})
        reader = Reader(proc)
        number += 1
        # wait for stage 2 to be under way (some vectors in, some not), then kill at a random moment of it
        deadline, state = time.monotonic() + 600, (0, 0)
        while time.monotonic() < deadline and proc.poll() is None:
            state = _vector_state(home, dataset)
            if state[0] and 0 < state[1] < state[0]:
                break
            time.sleep(0.02)
        killed = _kill_at(proc, rng.uniform(0, 3.0))
        reader.join()
        if not killed:
            tally.finished_first += 1
            continue
        tally.kills += 1
        what = f"embedding kill {tally.kills}"
        passages, backlog = _vector_state(home, dataset)
        good = check_after_kill(home, dataset, _added_lines(reader.lines), tally, what)
        resume = _kx(home, "datasets", "embed", dataset, "--json")
        out, err = resume.communicate(timeout=900)
        if resume.returncode != 0:
            tally.problems.append(f"{what}: kx datasets embed exited {resume.returncode}: {err.strip()[-300:]}")
            _finish(home, dataset, docs, set(), set(), False, tally, what, embedder)
            continue
        embedded = json.loads(out)["embedded"]
        after = _vector_state(home, dataset)
        if embedded != backlog or after != (passages, 0):
            tally.corrupt += 1
            tally.problems.append(f"{what}: the kill left {backlog} of {passages} passages to embed; the resumer "
                                  f"embedded {embedded}; afterwards {after[1]} of {after[0]} still without vectors")
            good = False
        print(f"  {what}: killed with {backlog} of {passages} passages left to embed; resumed: {embedded}", flush=True)
        again = _kx(home, "datasets", "ingest", dataset, *map(str, paths))  # the documents all come back unchanged
        out, _err = again.communicate(timeout=600)
        _finish(home, dataset, docs, set(), _added_lines(out.splitlines()), good, tally, what, embedder)


def _live(home: Path, dataset: str) -> set[str]:
    """Names that answer by default (each lineage's current version, not retired), through a fresh engine."""
    from engine import Engine, load_settings

    engine = Engine(load_settings({"home": str(home)}), embedder=None)
    try:
        names: set[str] = set()
        offset = 0
        while True:
            page = engine.list_documents(dataset, offset, 1000)
            names.update(d.name for d in page)
            if len(page) < 1000:
                return names
            offset += len(page)
    finally:
        engine.close()


def _integrity(home: Path, dataset: str, tally: Tally, what: str) -> bool:
    """integrity_check ok, no name doubled, no partial document (read-write: a hot WAL is replayed)."""
    path = _catalogue(home, dataset)
    if not path.exists():
        return True
    db = sqlite3.connect(path)
    try:
        verdict = db.execute("PRAGMA integrity_check").fetchone()[0]
        names = [row[0] for row in db.execute("SELECT name FROM documents")]
        broken = db.execute("SELECT COUNT(*) FROM (SELECT d.ref FROM documents d LEFT JOIN passages p "
                            "ON p.doc_ref = d.ref GROUP BY d.ref HAVING COUNT(p.seq) != d.passage_count)"
                            ).fetchone()[0]
    finally:
        db.close()
    if verdict != "ok" or len(names) != len(set(names)) or broken:
        tally.corrupt += 1
        tally.problems.append(f"{what}: integrity {verdict}, {len(names) - len(set(names))} doubled names, "
                              f"{broken} partial documents")
        return False
    return True


def _watch_until(home: Path, dataset: str, inbox: Path, done, timeout: float = 300) -> tuple[bool, list[str]]:
    """Run the watch on `inbox` until `done()` holds (polled after its first line), then SIGTERM it."""
    proc = _kx(home, "datasets", "watch", dataset, str(inbox), "--json", "--settle", "0.3")
    reader = Reader(proc)
    deadline = time.monotonic() + timeout
    ok = False
    while time.monotonic() < deadline and proc.poll() is None:
        if any('"watching"' in line for line in reader.lines) and not _pending(reader.lines) and done():
            ok = True
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    reader.join()
    return ok, reader.lines


def _until_idle(proc: subprocess.Popen, reader: Reader, quiet: float = 1.5, timeout: float = 180) -> None:
    """Until the watch is watching, has no batch in hand and has printed nothing for `quiet` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if any('"watching"' in line for line in reader.lines) and not _pending(reader.lines) \
                and time.monotonic() - (reader.times[-1] if reader.times else 0) >= quiet:
            return
        time.sleep(0.05)


def campaign_retire(root: Path, rounds: int, per: int, rng: random.Random, embedder, tally: Tally) -> None:
    home, dataset = root / "retire-home", "crash-retire"
    inbox, shelf = root / "retire-inbox", root / "retire-shelf"
    docs = {d["name"]: d for d in _slice(per, 4600)}
    _write(inbox, list(docs.values()))
    shelf.mkdir()
    filled, _ = _watch_until(home, dataset, inbox, lambda: _count(home, dataset) >= per
                             if _catalogue(home, dataset).exists() else False)
    if not filled:
        raise SystemExit("retire: the watched folder never got in whole")
    # how long a start scan takes to retire a few files, and a live deletion to be retired (settle included)
    spans = {}
    for variant in ("start", "live"):
        gone = sorted(docs)[:3] if variant == "start" else sorted(docs)[3:6]
        started = time.monotonic()
        if variant == "start":
            for name in gone:
                (inbox / f"{name}.txt").rename(shelf / f"{name}.txt")
            ok, _ = _watch_until(home, dataset, inbox, lambda: not set(gone) & _live(home, dataset))
        else:
            proc = _kx(home, "datasets", "watch", dataset, str(inbox), "--json", "--settle", "0.3")
            reader = Reader(proc)
            _until_idle(proc, reader)
            started = time.monotonic()
            for name in gone:
                (inbox / f"{name}.txt").rename(shelf / f"{name}.txt")
            while time.monotonic() - started < 120 and sum('"retired"' in line for line in reader.lines) < 3:
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
            reader.join()
        spans[variant] = time.monotonic() - started
        for name in gone:  # back for the next calibration and the rounds
            (shelf / f"{name}.txt").rename(inbox / f"{name}.txt")
    _watch_until(home, dataset, inbox, lambda: _live(home, dataset) == set(docs))
    print(f"retire: a start scan retires 3 files in {spans['start']:.1f} s after spawn; a live deletion is retired "
          f"{spans['live']:.1f} s after it; kills drawn from [0, 1.2 x that]", flush=True)
    shelved: list[str] = []
    for number in range(rounds):
        variant = "start" if number % 2 == 0 else "live"
        for name in shelved:  # the previous round's deletions come back (the next watch restores them)
            (shelf / f"{name}.txt").rename(inbox / f"{name}.txt")
        present = sorted(docs)
        shelved = rng.sample(present, rng.randint(2, 6))
        delay = rng.uniform(0, spans[variant] * 1.2)
        if variant == "start":
            for name in shelved:
                (inbox / f"{name}.txt").rename(shelf / f"{name}.txt")
            proc = _kx(home, "datasets", "watch", dataset, str(inbox), "--json", "--settle", "0.3")
            reader = Reader(proc)
        else:
            proc = _kx(home, "datasets", "watch", dataset, str(inbox), "--json", "--settle", "0.3")
            reader = Reader(proc)
            _until_idle(proc, reader)  # its start scan has restored what the last round put back
            for name in shelved:
                (inbox / f"{name}.txt").rename(shelf / f"{name}.txt")
        killed = _kill_at(proc, delay)
        reader.join()
        what = f"retire kill {tally.kills + 1} ({variant}, {len(shelved)} gone) at {delay:.2f} s"
        if not killed:
            tally.finished_first += 1
            continue
        tally.kills += 1
        retired = {json.loads(l)["name"] for l in reader.lines if l.startswith('{"event": "retired"')}
        tally.before_first_commit += not retired
        good = _integrity(home, dataset, tally, what)
        live = _live(home, dataset)
        if retired & live:
            tally.lost += len(retired & live)
            tally.problems.append(f"{what}: reported retired but still answering: {sorted(retired & live)[:5]}")
            good = False
        expected = set(docs) - set(shelved)
        settled, _ = _watch_until(home, dataset, inbox, lambda: _live(home, dataset) == expected, timeout=180)
        if not settled:
            live = _live(home, dataset)
            tally.problems.append(f"{what}: after a restart {len(live - expected)} gone files still answer, "
                                  f"{len(expected - live)} present ones do not")
            good = False
        good = _integrity(home, dataset, tally, what) and good
        good = check_after_restart(home, dataset, {n: docs[n]["text"] for n in expected}, tally, what,
                                   embedder) and good
        tally.survived += good
        print(f"  {what}: {len(retired)} reported retired before the kill -> {'ok' if good else 'FAILED'}",
              flush=True)


def _digest(home: Path, dataset: str) -> tuple:
    """What a rebuild must leave alone in its source: documents, passages, vectors, lineage events."""
    db = sqlite3.connect(f"file:{_catalogue(home, dataset)}?mode=ro", uri=True)
    try:
        return (tuple(db.execute("SELECT ref, name FROM documents ORDER BY ref")),
                db.execute("SELECT COUNT(*), SUM(length(vector)), MAX(seq) FROM passages").fetchone(),
                tuple(db.execute("SELECT lineage, doc_ref FROM lineage_events ORDER BY rowid")))
    finally:
        db.close()


def campaign_rebuild(root: Path, rounds: int, per: int, rng: random.Random, embedder, tally: Tally) -> None:
    from engine import Engine, load_settings

    home, source = root / "rebuild-home", "crash-source"
    docs = _slice(per, 4700)
    paths = _write(root / "rebuild-files", docs)
    made = _kx(home, "datasets", "ingest", source, *map(str, paths))
    _out, err = made.communicate(timeout=600)
    if made.returncode != 0:
        raise SystemExit(f"rebuild: the source ingest failed: {err[-300:]}")
    retired = [docs[0]["name"], docs[1]["name"]]
    engine = Engine(load_settings({"home": str(home)}), embedder=embedder)
    try:
        engine.retire(source, retired)
    finally:
        engine.close()
    live = {d["name"]: d["text"] for d in docs if d["name"] not in retired}
    before = _digest(home, source)
    args = ["--chunk-size", "600", "--chunk-overlap", "100"]
    started = time.monotonic()
    calibration = _kx(home, "datasets", "rebuild", source, "--as", "crash-calibrate", *args)
    calibration.communicate(timeout=600)
    span = time.monotonic() - started
    print(f"rebuild: an uninterrupted rebuild of {per} documents takes {span:.1f} s; kills drawn from [0, {span:.1f}]",
          flush=True)
    for number in range(rounds):
        target = f"crash-rebuilt-{number}"
        proc = _kx(home, "datasets", "rebuild", source, "--as", target, *args)
        reader = Reader(proc)
        delay = rng.uniform(0, span)
        killed = _kill_at(proc, delay)
        reader.join()
        if not killed:
            tally.finished_first += 1
            continue
        tally.kills += 1
        what = f"rebuild kill {tally.kills} at {delay:.2f} s"
        tally.before_first_commit += not _catalogue(home, target).exists()
        good = _integrity(home, target, tally, what)
        again = _kx(home, "datasets", "rebuild", source, "--as", target, *args)
        _out, err = again.communicate(timeout=600)
        if again.returncode != 0:
            tally.problems.append(f"{what}: the same rebuild again exited {again.returncode}: {err.strip()[-300:]}")
            print(f"  {what}: resuming FAILED: {err.strip()[-300:]}", flush=True)
            continue
        if _digest(home, source) != before:
            tally.corrupt += 1
            tally.problems.append(f"{what}: the source dataset changed")
            good = False
        answering = _live(home, target)
        if answering != set(live):
            tally.problems.append(f"{what}: the rebuilt dataset answers with {len(answering)} documents, the source "
                                  f"with {len(live)} (retired carried: {not set(retired) & answering})")
            good = False
        good = _integrity(home, target, tally, what) and good
        good = check_after_restart(home, target, live, tally, what, embedder,
                                   {"chunk_size": 600, "chunk_overlap": 100}) and good
        tally.survived += good
        print(f"  {what}: {'a target existed' if _catalogue(home, target).exists() else 'no target'} after the kill "
              f"-> {'ok' if good else 'FAILED'}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ingest", type=int, default=50, help="kills of `kx datasets ingest`")
    parser.add_argument("--watch", type=int, default=20, help="kills of `kx datasets watch`")
    parser.add_argument("--gateway", type=int, default=20, help="kills of `kx serve` during an upload")
    parser.add_argument("--embedding", type=int, default=20,
                        help="kills of `kx datasets ingest` during its embedding stage, resumed by `kx datasets embed`")
    parser.add_argument("--retire", type=int, default=20,
                        help="kills of `kx datasets watch` while it retires files deleted from its folder")
    parser.add_argument("--rebuild", type=int, default=20, help="kills of `kx datasets rebuild`, then resumed")
    parser.add_argument("--docs", type=int, default=20, help="SciFact abstracts per round")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args()
    if not (DATA / "scifact" / "corpus.jsonl").exists():
        raise SystemExit(f"SciFact is not at {DATA / 'scifact'}; nothing to run on")
    from engine.embedding.cards import model_card_for
    from engine.embedding.embedders import load_embedder

    embedder = load_embedder(model_card_for("default"))
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="kx-crashes-"))
    prepare = subprocess.run([sys.executable, "-m", "kx_tui", "models", "prepare"], cwd=REPO,
                             env=_env(root / "prepare-home"), capture_output=True, text=True, timeout=600)
    if prepare.returncode != 0:
        raise SystemExit(f"kx models prepare failed: {prepare.stderr.strip()[-500:]}")
    results = {}
    for target, count, run in (("ingest", args.ingest, campaign_ingest), ("watch", args.watch, campaign_watch),
                               ("gateway", args.gateway, campaign_gateway),
                               ("embedding", args.embedding, campaign_embedding),
                               ("retire", args.retire, campaign_retire), ("rebuild", args.rebuild, campaign_rebuild)):
        if count <= 0:
            continue
        tally = Tally()
        started = time.monotonic()
        run(root, count, args.docs, rng, embedder, tally)
        results[target] = tally
        print(f"{target}: {tally.kills} kills, {tally.survived} survived, {tally.lost} documents lost, "
              f"{tally.corrupt} corrupt datasets ({tally.before_first_commit} kills before any reported add; "
              f"{tally.finished_first} rounds finished before their kill, not counted; "
              f"{tally.differed} answering unlike an uninterrupted ingest) "
              f"in {time.monotonic() - started:.0f} s", flush=True)
        for problem in tally.problems:
            print(f"    {problem}", flush=True)
    print(json.dumps({t: {"kills": r.kills, "survived": r.survived, "lost": r.lost, "corrupt": r.corrupt,
                          "before_first_commit": r.before_first_commit, "finished_first": r.finished_first,
                          "differed": r.differed}
                      for t, r in results.items()}))
    if not args.keep:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"kept {root}")


if __name__ == "__main__":
    main()
