"""SIGTERM rounds for `kx serve`, `kx datasets ingest` and `kx datasets embed` (the watcher's are in sigterm_rounds.py).

Shared by tests/test_stopping.py (one round of a few moments) and
benchmarks/sigterm.py (`--commands serve,ingest,embed`). Each round: a fresh
KX_HOME (a copy of a prepared template where the command needs a dataset
with an embedding backlog), the real command as its own process, one SIGTERM
at the round's moment (every 7th round three at once), then:

- the process exits within `limit` seconds of the signal with its clean stop
  code: 0 for `kx serve` (a service stopped), 130 for `ingest` and `embed`
  (CANCELLED: the command did not finish its work, and says what stays); a
  command that finished before the signal counts apart (`finished_first`);
  a signal that lands before the interpreter runs any of kx's code gets the
  default action (-15) and counts apart (`pre_handler`);
- nothing committed is lost: `PRAGMA integrity_check` ok, every document the
  process reported added (its "added" lines, the upload's answer) is in the
  catalogue, no passage that had a vector before the signal lost it, no
  document partial, no name doubled;
- with `restart`, the work is finished afterwards (`kx datasets embed`, or
  the same ingest again) and the dataset is whole: every passage embedded,
  both index watermarks at the top passage.

Moments: serve: `startup` (0-3 s after spawn: opening, warm-up, the backlog's
resumption starting), `backlog` (0-3 s into the start-up's resumption of a
~450-passage backlog), `upload` (0-4 s into a client's upload of 40 documents,
which ingests and embeds inside the request), `idle` (serving, with six open
keep-alive connections and one client sending its headers a byte a second).
ingest: `startup`, `stage1` (the first "added" line: groups being committed),
`stage2` (0-2 s after the first vectors are committed), `random` (0-8 s).
embed: `startup`, `mid` (0-3 s after the first vectors are committed).
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .sigterm_rounds import REPO, check_indexes_at_top, kx_env

SERVE_MOMENTS = ("startup", "backlog", "upload", "idle")
INGEST_MOMENTS = ("startup", "stage1", "stage2", "random")
EMBED_MOMENTS = ("startup", "mid")
DATASET = "stop"
CLEAN_CODE = {"serve": 0, "ingest": 130, "embed": 130}

_WORDS = ("harbour lantern orchard velvet granite meadow copper falcon willow ember quartz saffron "
          "glacier thistle cobalt juniper marble tundra walnut cinder").split()


@dataclass
class CommandResult:
    command: str
    moment: str
    delay: float
    stop_seconds: float
    exit_code: int | None
    reported: int = 0            # documents the process reported added before it stopped
    vectors_before: int = 0      # passages with a vector just before the signal
    vectors_after: int = 0
    problems: list[str] = field(default_factory=list)
    pre_handler: bool = False
    finished_first: bool = False
    guard: bool = False
    stderr: str = ""             # the process's stderr (the guard's stack dump with KX_DEBUG=1)

    @property
    def ok(self) -> bool:
        return not self.problems


def write_notes(folder: Path, count: int, seed: int, paragraphs: int = 1) -> list[Path]:
    """`count` Markdown files of `paragraphs` ~420-character paragraphs each, no two alike."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        body = "\n\n".join(f"Record {seed}-{i}-{p} says: " + " ".join(rng.choice(_WORDS) for _ in range(60)) + "."
                           for p in range(paragraphs))
        path = folder / f"note{i:03d}.md"
        path.write_text(f"# Note {seed}-{i}\n\n{body}\n")
        paths.append(path)
    return paths


def make_backlog_template(template: Path, model_cache: Path, files: int = 100, paragraphs: int = 8) -> int:
    """A KX_HOME whose dataset DATASET holds `files` documents committed with no vector yet; its passages."""
    code = ("import sys; from pathlib import Path; from engine import Engine, load_settings; "
            "from engine.text.inputs import from_file; "
            "paths = sorted(Path(sys.argv[1]).glob('*.md')); "
            "e = Engine(load_settings({})); "
            f"e.ingest({DATASET!r}, [from_file(p, 2**20) for p in paths], should_stop=lambda: True); "
            f"print(e.dataset_summary({DATASET!r}).backlog)")
    write_notes(template / "files", files, seed=7, paragraphs=paragraphs)
    done = subprocess.run([sys.executable, "-c", code, str(template / "files")], cwd=REPO, check=True,
                          env=kx_env(template / "home", model_cache), capture_output=True, text=True, timeout=900)
    return int(done.stdout.strip().splitlines()[-1])


def _state(catalogue: Path) -> tuple[int, int, int]:
    """(documents, passages, passages with a vector); zeros before the catalogue exists."""
    if not catalogue.exists():
        return 0, 0, 0
    try:
        db = sqlite3.connect(f"file:{catalogue}?mode=ro", uri=True, timeout=5)
        try:
            docs = db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
            passages, embedded = db.execute(
                "SELECT COUNT(*), COALESCE(SUM(length(vector) > 0), 0) FROM passages").fetchone()
            return int(docs), int(passages), int(embedded)
        finally:
            db.close()
    except sqlite3.DatabaseError:
        return 0, 0, 0


def check_dataset(catalogue: Path, reported: set[str], problems: list[str], vectors_before: int) -> int:
    """The after-stop checks; returns the passages with a vector."""
    if not catalogue.exists():
        if reported:
            problems.append(f"{len(reported)} reported document(s) but no catalogue")
        return 0
    db = sqlite3.connect(f"file:{catalogue}?mode=ro", uri=True)
    try:
        if db.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            problems.append("integrity_check failed")
        names = [row[0] for row in db.execute("SELECT name FROM documents")]
        broken = db.execute("SELECT d.name FROM documents d LEFT JOIN passages p ON p.doc_ref = d.ref "
                            "GROUP BY d.ref HAVING COUNT(p.seq) != d.passage_count").fetchall()
        embedded = db.execute("SELECT COUNT(*) FROM passages WHERE length(vector) > 0").fetchone()[0]
    finally:
        db.close()
    if broken:
        problems.append(f"partial documents: {broken[:3]}")
    if len(names) != len(set(names)):
        problems.append("a document name is doubled")
    if reported - set(names):
        problems.append(f"{len(reported - set(names))} reported document(s) missing from the catalogue")
    if embedded < vectors_before:
        problems.append(f"vectors lost: {vectors_before} before the signal, {embedded} after")
    return int(embedded)


def check_whole(home: Path, model_cache: Path, problems: list[str], expected_documents: int) -> None:
    """Finish the backlog with `kx datasets embed`, then every passage has a vector and both indexes are at the top."""
    done = subprocess.run([sys.executable, "-m", "kx_tui", "datasets", "embed", DATASET, "--json"], cwd=REPO,
                          env=kx_env(home, model_cache), capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        problems.append(f"the resuming embed exited {done.returncode}: {done.stderr[-300:]}")
        return
    folder = home / "datasets" / DATASET
    documents, passages, embedded = _state(folder / "catalog.sqlite")
    if documents != expected_documents or embedded != passages:
        problems.append(f"after resuming: {documents} of {expected_documents} documents, "
                        f"{embedded} of {passages} passages embedded")
    check_indexes_at_top(folder, problems, "after resuming")


class _Output:
    """A process's stdout and stderr, read on threads, stdout lines with their arrival time."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[tuple[float, str]] = []
        self.stderr = ""
        self._threads = [threading.Thread(target=self._out, args=(proc,), daemon=True),
                         threading.Thread(target=self._err, args=(proc,), daemon=True)]
        for thread in self._threads:
            thread.start()

    def _out(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def _err(self, proc: subprocess.Popen) -> None:
        assert proc.stderr is not None
        self.stderr = proc.stderr.read()

    def join(self) -> None:
        for thread in self._threads:
            thread.join(10)

    def added(self) -> set[str]:
        return {line.split()[1] for _t, line in self.lines if line.startswith("added ")}

    def wait_for(self, predicate, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(predicate(line) for _t, line in self.lines):
                return True
            time.sleep(0.02)
        return False


def _wait_until(condition, timeout: float, proc: subprocess.Popen) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if condition():
            return True
        time.sleep(0.02)
    return False


def _signal_and_wait(proc: subprocess.Popen, signals: int, limit: float) -> tuple[int | None, float, float]:
    """(exit code, seconds to exit, when sent); the code is None when it had to be killed after `limit`."""
    sent = time.monotonic()
    for _ in range(signals):
        proc.send_signal(signal.SIGTERM)
    try:
        code: int | None = proc.wait(timeout=limit)
        return code, time.monotonic() - sent, sent
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)
        return None, limit + 1, sent


def _judge(result: CommandResult, out: _Output, started: float, sent: float) -> None:
    result.stderr = out.stderr
    code = result.exit_code
    result.guard = "leaving now" in out.stderr or "did not reach a stopping point" in out.stderr
    if code is None:
        result.problems.append(f"still running {result.stop_seconds - 1:g} s after SIGTERM")
    elif code == -signal.SIGTERM and result.moment == "startup" and not out.lines and not out.stderr.strip() \
            and sent - started < 3.5:
        # Ended by SIGTERM's default action before the interpreter ran any of kx's code (its handler is
        # installed first thing, kx_tui/__init__.py): nothing was opened. Counted apart, not hidden.
        result.pre_handler = True
    elif code == 0 and result.command != "serve":
        result.finished_first = True
    elif code != CLEAN_CODE[result.command]:
        result.problems.append(f"exit code {code}; stderr: {out.stderr[-400:]}")


def run_serve_round(work: Path, model_cache: Path, template: Path, moment: str, rng: random.Random, *,
                    limit: float = 10.0, signals: int = 1, restart: bool = False) -> CommandResult:
    import http.client

    home = work / "home"
    shutil.copytree(template / "home", home)
    catalogue = home / "datasets" / DATASET / "catalog.sqlite"
    expected = _state(catalogue)[0]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "kx_tui", "serve", "--quiet", "--port", str(port)], cwd=REPO,
                            env=kx_env(home, model_cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = _Output(proc)
    result = CommandResult("serve", moment, 0.0, 0.0, None)
    answer: dict = {}
    held: list[socket.socket | http.client.HTTPConnection] = []
    try:
        if moment == "startup":
            result.delay = rng.uniform(0.0, 3.0)
            time.sleep(result.delay)
        else:
            serving = _wait_until(lambda: _healthy(port), 120, proc)
            if not serving:
                result.problems.append(f"never served; stderr: {out.stderr[-300:]}")
            if moment == "backlog":
                _wait_until(lambda: _state(catalogue)[2] > 0, 120, proc)
                result.delay = rng.uniform(0.0, 3.0)
                time.sleep(result.delay)
            elif moment == "upload":
                docs = [{"name": f"up{i:03d}", "text": f"Upload {i} says: " + " ".join(
                    rng.choice(_WORDS) for _ in range(120))} for i in range(40)]
                threading.Thread(target=_upload, args=(port, home, docs, answer), daemon=True).start()
                result.delay = rng.uniform(0.0, 4.0)
                time.sleep(result.delay)
            elif moment == "idle":
                held = _hold_connections(port, home)
                result.delay = rng.uniform(0.0, 2.0)
                time.sleep(result.delay)
        result.vectors_before = _state(catalogue)[2]
        result.exit_code, result.stop_seconds, sent = _signal_and_wait(proc, signals, limit)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        for conn in held:
            conn.close()
    out.join()
    _judge(result, out, started, sent)
    time.sleep(0.2)  # the upload thread's answer, if one came
    reported = {r["name"] for r in (answer.get("report") or {}).get("results", []) if r.get("status") == "added"}
    result.reported = len(reported)
    if reported:  # the answer made it out before the stop: its documents are committed (another dataset)
        check_dataset(home / "datasets" / "uploads" / "catalog.sqlite", reported, result.problems, 0)
    result.vectors_after = check_dataset(catalogue, set(), result.problems, result.vectors_before)
    if restart:
        check_whole(home, model_cache, result.problems, expected)
    return result


def _healthy(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


def _upload(port: int, home: Path, docs: list[dict], answer: dict) -> None:
    import http.client

    token = (home / "gateway.token").read_text().strip()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/v1/datasets/uploads/documents", body=json.dumps({"documents": docs}),
                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        response = conn.getresponse()
        body = response.read()
        answer["status"] = response.status
        answer["report"] = json.loads(body) if response.status == 200 else None
    except (OSError, ValueError, http.client.HTTPException) as exc:
        answer["error"] = repr(exc)
    finally:
        conn.close()


def _hold_connections(port: int, home: Path) -> list:
    """Six keep-alive connections that each made a request, and one sending its headers a byte at a time."""
    import http.client

    token = (home / "gateway.token").read_text().strip()
    held: list = []
    for _ in range(6):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/v1/datasets", headers={"Authorization": f"Bearer {token}"})
        conn.getresponse().read()
        held.append(conn)
    slow = socket.create_connection(("127.0.0.1", port))
    slow.sendall(b"GET /v1/datasets HTTP/1.1\r\nHost: 127.0.0.1\r\n")

    def dribble() -> None:
        try:
            for byte in b"X-Slow: " + b"a" * 60:
                time.sleep(1.0)
                slow.send(bytes([byte]))
        except OSError:
            pass

    threading.Thread(target=dribble, daemon=True).start()
    held.append(slow)
    return held


def run_ingest_round(work: Path, model_cache: Path, moment: str, rng: random.Random, *, files: int = 48,
                     limit: float = 10.0, signals: int = 1, restart: bool = False, seed: int = 0) -> CommandResult:
    home = work / "home"
    # at most 50 files: beyond that the CLI prints no "added" line per document, and those are the reports
    paths = write_notes(work / "files", min(files, 50), seed, paragraphs=4)
    catalogue = home / "datasets" / DATASET / "catalog.sqlite"
    args = [sys.executable, "-m", "kx_tui", "datasets", "ingest", DATASET, *map(str, paths)]
    # small commit groups and embedding chunks: many commits for a signal to land between
    env = kx_env(home, model_cache, {"KX_INGEST_COMMIT_PASSAGES": "8", "KX_EMBED_BATCH_SIZE": "8"})
    started = time.monotonic()
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = _Output(proc)
    result = CommandResult("ingest", moment, 0.0, 0.0, None)
    try:
        if moment == "startup":
            result.delay = rng.uniform(0.0, 3.0)
            time.sleep(result.delay)
        elif moment == "stage1":
            _wait_until(lambda: _state(catalogue)[0] > 0, 120, proc)  # the first group is committed
        elif moment == "stage2":
            _wait_until(lambda: _state(catalogue)[2] > 0, 120, proc)
            result.delay = rng.uniform(0.0, 2.0)
            time.sleep(result.delay)
        else:
            result.delay = rng.uniform(0.0, 8.0)
            time.sleep(result.delay)
        result.vectors_before = _state(catalogue)[2]
        result.exit_code, result.stop_seconds, sent = _signal_and_wait(proc, signals, limit)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    out.join()
    _judge(result, out, started, sent)
    reported = out.added()
    result.reported = len(reported)
    result.vectors_after = check_dataset(catalogue, reported, result.problems, result.vectors_before)
    if result.exit_code == 130 and "committed and stay" not in out.stderr and "What was committed stays" \
            not in out.stderr:
        result.problems.append(f"stopped without saying what stays: {out.stderr[-300:]}")
    if restart:
        again = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
        if again.returncode != 0:
            result.problems.append(f"the same ingest again exited {again.returncode}: {again.stderr[-300:]}")
        readded = {line.split()[1] for line in again.stdout.splitlines() if line.startswith("added ")}
        if readded & reported:
            result.problems.append(f"re-added after the restart: {sorted(readded & reported)[:3]}")
        check_whole(home, model_cache, result.problems, len(paths))
    return result


def run_embed_round(work: Path, model_cache: Path, template: Path, moment: str, rng: random.Random, *,
                    limit: float = 10.0, signals: int = 1, restart: bool = False) -> CommandResult:
    home = work / "home"
    shutil.copytree(template / "home", home)
    catalogue = home / "datasets" / DATASET / "catalog.sqlite"
    expected = _state(catalogue)[0]
    env = kx_env(home, model_cache, {"KX_EMBED_BATCH_SIZE": "8"})
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "kx_tui", "datasets", "embed", DATASET], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = _Output(proc)
    result = CommandResult("embed", moment, 0.0, 0.0, None)
    try:
        if moment == "startup":
            result.delay = rng.uniform(0.0, 3.0)
            time.sleep(result.delay)
        else:
            _wait_until(lambda: _state(catalogue)[2] > 0, 120, proc)
            result.delay = rng.uniform(0.0, 3.0)
            time.sleep(result.delay)
        result.vectors_before = _state(catalogue)[2]
        result.exit_code, result.stop_seconds, sent = _signal_and_wait(proc, signals, limit)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    out.join()
    _judge(result, out, started, sent)
    result.vectors_after = check_dataset(catalogue, set(), result.problems, result.vectors_before)
    if restart:
        check_whole(home, model_cache, result.problems, expected)
    return result
