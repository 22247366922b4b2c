"""The extraction worker process: one document at a time, under a memory limit.

The parent (engine/extract/pool.py) sends `Job`s down a pipe; the worker
resolves the job's extractor by import path ("module:function", so a test
can point it at an extractor of its own), runs it and sends back a `Done`
(the `Extracted`) or a `Failed` (status name and message: a KxError itself
does not survive pickling). Its address space is capped at its size at start
plus the job's memory allowance (RLIMIT_AS), so a parser that balloons gets a
MemoryError here instead of taking the machine; the worker then reports it and
exits, since a parser interrupted mid-allocation may be left broken.

Importing this module is cheap: parsers are imported by the extractors, in the worker.
"""

from __future__ import annotations

import importlib
import signal
from dataclasses import dataclass
from typing import Callable

from .base import Extracted, Limits


@dataclass(frozen=True)
class Job:
    extractor: str  # "package.module:function"
    data: bytes
    label: str
    limits: Limits
    cpu_seconds: float = 3600.0  # the kernel's backstop (RLIMIT_CPU); the parent's deadline comes first


@dataclass(frozen=True)
class Done:
    extracted: Extracted


@dataclass(frozen=True)
class Progress:
    """Sent before the job's outcome, as often as the extractor reports (an OCR'd scan: once a page)."""

    message: str
    done: int
    total: int


@dataclass(frozen=True)
class Failed:
    status: str  # a Status name
    message: str
    fatal: bool = False  # the worker exits after sending it


_RESOLVED: dict[str, Callable] = {}


def resolve(path: str) -> Callable[[bytes, str, Limits], Extracted]:
    if path not in _RESOLVED:
        module, _, name = path.partition(":")
        _RESOLVED[path] = getattr(importlib.import_module(module), name)
    return _RESOLVED[path]


def run_job(job: Job) -> Done | Failed:
    """Run one job, turning every failure into a Failed a user can read."""
    from ..errors import KxError

    try:
        return Done(resolve(job.extractor)(job.data, job.label, job.limits))
    except KxError as exc:
        return Failed(exc.status.name, exc.message)
    except MemoryError:
        return Failed("RESOURCE_EXHAUSTED", "", fatal=True)  # the pool words it: it knows the limit's name
    except RecursionError:
        return Failed("INVALID_ARGUMENT", f"{job.label} is nested too deeply to read; re-save it from its application")
    except Exception as exc:  # a parser's own failure on a bad file: say it plainly, never a traceback
        reason = str(exc).strip() or type(exc).__name__
        return Failed("INVALID_ARGUMENT", f"{job.label} could not be read: the parser failed ({reason[:300]}); "
                      "the file may be damaged: re-save or re-download it")


def serve(receive, send, memory_mb: int) -> None:
    """The worker's main loop: until the pipe closes, take a Job, send its Done or Failed."""
    from .base import set_reporter

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ctrl-C is the parent's to handle; it ends us
    _limit_memory(memory_mb)
    set_reporter(lambda message, done, total: send.send(Progress(message, done, total)))
    while True:
        try:
            job = receive.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        _limit_cpu(job.cpu_seconds)
        outcome = run_job(job)
        try:
            send.send(outcome)
        except (BrokenPipeError, OSError):
            return
        if isinstance(outcome, Failed) and outcome.fatal:
            return


def main(argv: list[str]) -> None:
    """Entry point of `python -c ...` in engine/extract/pool.py: read fd, write fd, memory allowance."""
    from multiprocessing.connection import Connection

    receive, send = Connection(int(argv[0]), writable=False), Connection(int(argv[1]), readable=False)
    serve(receive, send, int(argv[2]))


def _limit_memory(memory_mb: int) -> None:
    try:
        import resource

        with open("/proc/self/statm") as handle:  # pages of address space in use now
            used = int(handle.read().split()[0]) * resource.getpagesize()
        limit = used + memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    except (ImportError, OSError, ValueError):
        pass  # no /proc or no RLIMIT_AS (not Linux): the time limit still holds


def _limit_cpu(seconds: float) -> None:
    """A kernel backstop for the parent's deadline: a spinning parser dies even if its parent did."""
    try:
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
        soft = int(usage.ru_utime + usage.ru_stime + seconds) + 1
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        if hard == resource.RLIM_INFINITY or soft < hard:
            resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (ImportError, OSError, ValueError):
        pass
