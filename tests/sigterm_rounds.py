"""One round of the SIGTERM campaign: a real `kx datasets watch`, one SIGTERM, a clean and bounded stop.

Shared by tests/test_stopping.py (a few rounds) and benchmarks/sigterm.py
(the 50-round campaign). A round: a fresh KX_HOME (the model's export cache
shared), a folder of `files` Markdown files with text of their own, `kx
datasets watch NAME DIR --json` started on it, one SIGTERM at the round's
moment, then the checks:

- the process exits within `limit` seconds of the signal, with code 0, and
  its last line is the `stopped` event (except a signal that lands while the
  interpreter itself starts, before any kx code runs: SIGTERM's default
  action ends it at once, -15, with nothing opened; `pre_handler` counts
  those apart);
- nothing committed is lost: every file the process reported `ingested` is
  in the catalogue, once, whole (its passages all there), and the catalogue
  passes `PRAGMA integrity_check`; a dataset that received a commit is never
  removed;
- optionally (`restart`), the same watch run again takes in the rest: the
  dataset then holds every file exactly once and both indexes hold every
  passage.

Moments: `after_batch_done` (the instant the first batch_done line arrives,
the moment that used to deadlock), `mid_batch` (a random delay after the
batch_started line, within the batch's expected duration), `random` (a
random delay after the `watching` line), `startup` (a random delay after
the process starts, before it may even be watching).
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MOMENTS = ("after_batch_done", "mid_batch", "random", "startup")
DATASET = "stop"

_WORDS = ("harbour lantern orchard velvet granite meadow copper falcon willow ember quartz saffron "
          "glacier thistle cobalt juniper marble tundra walnut cinder").split()


@dataclass
class RoundResult:
    moment: str
    delay: float               # seconds from the moment's reference event to the signal
    stop_seconds: float        # from the signal to the process's exit (the limit + 1 when it had to be killed)
    exit_code: int | None
    reported: int              # files the process reported ingested before it stopped
    committed: int             # documents in the catalogue after the stop
    batches_done: int          # batch_done lines seen before the stop
    abandoned: int | None      # the batch the process said it gave up, if any
    problems: list[str] = field(default_factory=list)
    pre_handler: bool = False  # ended by SIGTERM's default action before kx's code ran (start-up moment only)
    guard: bool = False        # left through the stop guard (the batch found no safe point in time)

    @property
    def ok(self) -> bool:
        return not self.problems


def write_files(folder: Path, files: int, seed: int) -> dict[str, str]:
    """`files` Markdown files, each a paragraph no other file shares; returns name -> text."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    texts = {}
    for i in range(files):
        words = " ".join(rng.choice(_WORDS) for _ in range(60))
        text = f"# Note {seed}-{i}\n\nRecord {seed}-{i} says: {words}.\n"
        (folder / f"note{i:03d}.md").write_text(text)
        texts[f"note{i:03d}"] = text
    return texts


def kx_env(home: Path, model_cache: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KX_")}
    env.update({"KX_HOME": str(home), "KX_MODEL_CACHE": str(model_cache), "PYTHONUNBUFFERED": "1",
                "PYTHONPATH": str(REPO), **(extra or {})})
    return env


def prepare_model(model_cache: Path, scratch: Path) -> None:
    """Export the model into the shared cache once, so no round pays for it inside its window."""
    subprocess.run([sys.executable, "-m", "kx_tui", "models", "prepare"], cwd=REPO, check=True,
                   env=kx_env(scratch / "prepare-home", model_cache), capture_output=True, timeout=600)


class _Lines:
    """A process's stdout lines, read on a thread, each with the time it arrived."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.queue: queue.Queue[tuple[float, str] | None] = queue.Queue()
        self.seen: list[dict] = []
        self.stderr = ""
        self._threads = [threading.Thread(target=self._pump, args=(proc,), daemon=True),
                         threading.Thread(target=self._drain_err, args=(proc,), daemon=True)]
        for thread in self._threads:
            thread.start()

    def _pump(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.queue.put((time.monotonic(), line))
        self.queue.put(None)

    def _drain_err(self, proc: subprocess.Popen) -> None:
        assert proc.stderr is not None
        self.stderr = proc.stderr.read()

    def until(self, kind: str, timeout: float) -> dict | None:
        """The first event of `kind` (reading on from where the last call stopped); None at EOF or timeout."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                item = self.queue.get(timeout=remaining)
            except queue.Empty:
                return None
            if item is None:
                return None
            event = json.loads(item[1])
            self.seen.append(event)
            if event.get("event") == kind:
                return event

    def rest(self, timeout: float = 5.0) -> None:
        for thread in self._threads:
            thread.join(timeout)
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                self.seen.append(json.loads(item[1]))

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.seen if e.get("event") == kind]


def run_round(work: Path, model_cache: Path, moment: str, rng: random.Random, *, files: int = 100,
              batch_seconds: float = 8.0, limit: float = 10.0, restart: bool = False,
              seed: int = 0, signals: int = 1) -> RoundResult:
    """One watch process, one SIGTERM at `moment`; the checks listed in the module's head."""
    home, folder = work / "home", work / "drop"
    texts = write_files(folder, files, seed)
    env = kx_env(home, model_cache)
    args = [sys.executable, "-m", "kx_tui", "datasets", "watch", DATASET, str(folder), "--json", "--settle", "0.2"]
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = _Lines(proc)
    problems: list[str] = []
    delay = 0.0
    try:
        if moment == "startup":
            delay = rng.uniform(0.0, 3.0)
            time.sleep(delay)
        else:
            if lines.until("watching", 120) is None:
                problems.append("no 'watching' line")
            elif moment == "random":
                delay = rng.uniform(0.0, batch_seconds)
                time.sleep(delay)
            elif moment == "mid_batch":
                if lines.until("batch_started", 60) is None:
                    problems.append("no batch_started line")
                delay = rng.uniform(0.0, batch_seconds)
                time.sleep(delay)
            elif moment == "after_batch_done":
                if lines.until("batch_done", 180) is None:
                    problems.append("no batch_done line")
            else:
                raise ValueError(f"unknown moment {moment}")
        sent = time.monotonic()
        for _ in range(signals):  # a service manager's stop, or an impatient operator's second and third
            proc.send_signal(signal.SIGTERM)
        try:
            code: int | None = proc.wait(timeout=limit)
            stop_seconds = time.monotonic() - sent
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
            code, stop_seconds = None, limit + 1
            problems.append(f"still running {limit:g} s after SIGTERM")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    lines.rest()
    # A SIGTERM that lands while the interpreter starts and imports, before kx's own code has run, gets
    # the default action: the process ends at once (-15) with nothing opened. Counted apart, not hidden.
    pre_handler = (moment == "startup" and code == -signal.SIGTERM and not lines.seen
                   and not (home / "datasets" / DATASET).exists())
    if code not in (0, None) and not pre_handler:
        problems.append(f"exit code {code}; stderr: {lines.stderr[-600:]}")
    stopped = lines.of("stopped")
    # The last resort (kx_tui/cli/stopping.py's guard) leaves with exit 0 and one line on stderr, no 'stopped' line.
    guard = code == 0 and not stopped and "did not stop in time; leaving now" in lines.stderr
    if code == 0 and not stopped and not guard:
        problems.append(f"exit 0 without a 'stopped' line; stderr: {lines.stderr[-300:]}")
    reported = {Path(e["path"]).stem for e in lines.of("ingested")}
    catalogue = home / "datasets" / DATASET / "catalog.sqlite"
    committed_names = _committed(catalogue, problems)
    if reported - committed_names:
        problems.append(f"{len(reported - committed_names)} reported file(s) missing from the catalogue")
    if restart:
        _restart(work, model_cache, args, env, texts, problems)
    return RoundResult(moment, round(delay, 3), round(stop_seconds, 3), code, len(reported), len(committed_names),
                       len(lines.of("batch_done")), stopped[-1].get("abandoned_batch") if stopped else None,
                       problems, pre_handler, guard)


def check_indexes_at_top(folder: Path, problems: list[str], when: str) -> None:
    """Both index sidecars of the dataset in `folder` are at the catalogue's top passage."""
    db = sqlite3.connect(f"file:{folder / 'catalog.sqlite'}?mode=ro", uri=True)
    try:
        top = db.execute("SELECT COALESCE(MAX(seq), 0) FROM passages").fetchone()[0]
    finally:
        db.close()
    for sidecar in ("dense.json", "sparse.json"):
        try:
            watermark = json.loads((folder / sidecar).read_text()).get("watermark")
        except (OSError, ValueError):
            watermark = None
        if watermark != top:
            problems.append(f"{sidecar} watermark {watermark} != top passage {top} {when}")


def _committed(catalogue: Path, problems: list[str]) -> set[str]:
    if not catalogue.exists():
        return set()
    db = sqlite3.connect(f"file:{catalogue}?mode=ro", uri=True)
    try:
        if db.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            problems.append("integrity_check failed")
        names = [row[0] for row in db.execute("SELECT name FROM documents")]
        broken = db.execute("SELECT d.name FROM documents d LEFT JOIN passages p ON p.doc_ref = d.ref "
                            "GROUP BY d.ref HAVING COUNT(p.seq) != d.passage_count").fetchall()
    finally:
        db.close()
    if broken:
        problems.append(f"partial documents: {broken[:3]}")
    if len(names) != len(set(names)):
        problems.append("a document name is doubled")
    return set(names)


def _restart(work: Path, model_cache: Path, args: list[str], env: dict[str, str], texts: dict[str, str],
             problems: list[str]) -> None:
    """Run the same watch again until every file is in, stop it, and check the dataset whole."""
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = _Lines(proc)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            done = lines.until("batch_done", deadline - time.monotonic())
            if done is None or done["documents"] >= len(texts):
                break
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    lines.rest()
    if code != 0:
        problems.append(f"the restart exited {code}: {lines.stderr[-300:]}")
    catalogue = work / "home" / "datasets" / DATASET / "catalog.sqlite"
    names = _committed(catalogue, problems)
    if names != set(texts):
        problems.append(f"after the restart the dataset holds {len(names)} of {len(texts)} files")
    check_indexes_at_top(catalogue.parent, problems, "after the restart")
