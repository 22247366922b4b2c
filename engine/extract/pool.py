"""A small pool of extraction worker processes that survives the files it reads.

Why our own pool and not concurrent.futures: a hung parser must be killed
on its own. ProcessPoolExecutor cannot kill one worker; killing its
processes breaks every other job in flight. Here each worker has its own
pipe and runs one job at a time, so the parent knows whose job hangs:

- a job past its deadline (`extract_timeout`): that worker is killed, the
  document refused "extraction took longer than 60 s (KX_EXTRACT_TIMEOUT)",
  and a fresh worker takes the next job;
- a worker that dies (a parser's segfault, an abort, the kernel's OOM
  killer) or reports a MemoryError under its RLIMIT_AS: the document is
  refused with that reason, and a fresh worker replaces it;
- everything else goes on, and results come back in input order.

Workers are plain `python -c` children (subprocess, not multiprocessing: a
fork would copy torch's threads, and spawn/forkserver re-run the parent's
`__main__`, which breaks a user's unguarded script), about 0.1-0.2 s each to
start. They are started lazily, as jobs arrive, up to `workers`, in their own
session so a terminal's ctrl-C reaches only the parent; `close()` (leaving
the `with`, or any exception such as KeyboardInterrupt) stops them all. A
worker whose parent died reads end-of-file and exits, and RLIMIT_CPU ends
one spinning in a parser even then.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from typing import Callable, Iterable, Iterator

from ..config import ENV
from ..errors import KxError, Status
from .worker import Done, Failed, Job, Progress

# The child imports the worker from the parent's own sys.path (so `engine`, and a test's
# extractor module, resolve there exactly as here) and never re-runs the parent's __main__,
# which multiprocessing's spawn and forkserver would do to a user's unguarded script.
_BOOT = "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); " \
        "from engine.extract.worker import main; main(sys.argv[2:])"


@dataclass(frozen=True)
class Ready:
    """An item whose outcome is already known (extracted in-process, or refused before a job)."""

    outcome: object


class _Worker:
    """One `python -c` child process with a pipe each way (no multiprocessing start method)."""

    def __init__(self, memory_mb: int) -> None:
        job_read, job_write = os.pipe()
        out_read, out_write = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, json.dumps(sys.path), str(job_read), str(out_write), str(memory_mb)],
                pass_fds=(job_read, out_write), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True)  # ctrl-C goes to the parent, which ends us
        finally:
            os.close(job_read)
            os.close(out_write)
        self.jobs = Connection(job_write, readable=False)
        self.conn = Connection(out_read, writable=False)
        self.index: int | None = None
        self.job: Job | None = None
        self.deadline = 0.0

    def give(self, index: int, job: Job, timeout: float) -> bool:
        self.index, self.job, self.deadline = index, job, time.monotonic() + timeout
        try:
            self.jobs.send(replace(job, cpu_seconds=2 * timeout + 5))
            return True
        except (BrokenPipeError, OSError):
            return False

    def exitcode(self) -> int | None:
        try:
            return self.process.wait(1.0)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, kill: bool = False) -> None:
        if not kill and self.process.poll() is None:
            try:
                self.jobs.send(None)
                self.process.wait(1.0)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                pass
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(5.0)
        self.jobs.close()
        self.conn.close()


class ExtractPool:
    """Runs Jobs in worker processes; `ordered()` yields each item's outcome in input order."""

    def __init__(self, workers: int, timeout: float, memory_mb: int,
                 on_progress: Callable[[str, int, int], None] | None = None) -> None:
        self.size, self.timeout, self.memory_mb = max(1, workers), timeout, memory_mb
        self.on_progress = on_progress  # a worker's report on its job (an OCR'd page), as it comes
        self._idle: list[_Worker] = []
        self._busy: list[_Worker] = []
        self.started = 0  # workers started, replacements included (for tests and benchmarks)

    def __enter__(self) -> ExtractPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for worker in self._busy:
            worker.stop(kill=True)
        for worker in self._idle:
            worker.stop()
        self._idle, self._busy = [], []

    def ordered(self, items: Iterable[Job | Ready], window: int | None = None) -> Iterator[Done | Failed | object]:
        """Each item's outcome (Done/Failed for a Job, the given outcome for Ready), in input order.

        Runs at most `window` items ahead of what the caller has taken (default 4 per worker),
        so a long batch does not hold every document's text at once.
        """
        window = window or 4 * self.size
        source = iter(items)
        waiting: deque[tuple[int, Job]] = deque()
        done: dict[int, object] = {}
        taken = read = 0
        exhausted = False
        while True:
            while not exhausted and read - taken < window:
                item = next(source, None)
                if item is None:
                    exhausted = True
                    break
                if isinstance(item, Ready):
                    done[read] = item.outcome
                else:
                    waiting.append((read, item))
                read += 1
            self._dispatch(waiting, done)
            if taken in done:
                yield done.pop(taken)
                taken += 1
                continue
            if exhausted and taken >= read:
                return
            self._collect(done)

    def _dispatch(self, waiting: deque, done: dict) -> None:
        while waiting and (self._idle or len(self._busy) < self.size):
            worker = self._idle.pop() if self._idle else self._start()
            index, job = waiting.popleft()
            if worker.give(index, job, self.timeout):
                self._busy.append(worker)
            else:  # died before it could take the job (e.g. killed from outside): retry on a fresh one
                worker.stop(kill=True)
                waiting.appendleft((index, job))

    def _start(self) -> _Worker:
        self.started += 1
        return _Worker(self.memory_mb)

    def _collect(self, done: dict) -> None:
        """Wait for the next finished, dead or overdue worker and record its job's outcome."""
        now = time.monotonic()
        soonest = min(w.deadline for w in self._busy)
        handles = {w.conn: w for w in self._busy}  # a worker's death reads as end-of-file here
        ready = wait(list(handles), timeout=max(0.0, soonest - now))
        finished: list[_Worker] = []
        for handle in ready:
            worker = handles[handle]  # type: ignore[index]  # wait() hands back the connections it was given
            if worker in finished:
                continue
            outcome = self._receive(worker)
            if isinstance(outcome, Progress):  # still working: pass the news on, wait for the outcome
                if self.on_progress is not None:
                    self.on_progress(outcome.message, outcome.done, outcome.total)
                continue
            finished.append(worker)
            done[worker.index] = outcome
            self._busy.remove(worker)
            if isinstance(outcome, Done) or (isinstance(outcome, Failed) and not outcome.fatal
                                             and worker.process.poll() is None):
                self._idle.append(worker)
            else:
                worker.stop(kill=True)
        now = time.monotonic()
        for worker in [w for w in self._busy if w.deadline <= now]:
            self._busy.remove(worker)
            worker.stop(kill=True)
            done[worker.index] = Failed(Status.RESOURCE_EXHAUSTED.name, _timeout_message(worker.job, self.timeout))

    def _receive(self, worker: _Worker) -> Done | Failed | Progress:
        try:
            if worker.conn.poll():
                outcome = worker.conn.recv()
                if isinstance(outcome, Failed) and outcome.fatal:
                    return Failed(outcome.status, _memory_message(worker.job, self.memory_mb), fatal=True)
                return outcome
        except (EOFError, OSError):
            pass
        return Failed(Status.INVALID_ARGUMENT.name, _crash_message(worker.job, worker.exitcode(), self.memory_mb))


def _label(job: Job | None) -> str:
    return job.label if job is not None else "a document"  # a busy worker always holds its job


def _timeout_message(job: Job | None, timeout: float) -> str:
    return (f"{_label(job)} was refused: extraction took longer than {timeout:g} s ({ENV.extract_timeout}); "
            "the file may be damaged or pathological, or raise the limit")


def _memory_message(job: Job | None, memory_mb: int) -> str:
    return (f"{_label(job)} was refused: extracting it needed more than the {memory_mb:,} MiB allowed "
            f"({ENV.extract_memory_mb}); raise the limit if the file is genuinely that large")


def _crash_message(job: Job | None, exitcode: int | None, memory_mb: int) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            how = f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            how = f"was killed by signal {-exitcode}"
        if -exitcode == signal.SIGKILL:
            how += f" (out of memory? the limit is {memory_mb:,} MiB, {ENV.extract_memory_mb})"
    else:
        how = f"exited unexpectedly (status {exitcode})"
    return (f"{_label(job)} was refused: the extractor crashed on it (its worker process {how}); "
            "the file may be damaged: re-save or re-download it")


def outcome_error(outcome: Failed) -> KxError:
    return KxError(Status[outcome.status], outcome.message)
