"""Ctrl-C and SIGTERM as requests a command polls, never as work done inside a signal handler.

Python runs a signal handler on the main thread between two bytecodes,
wherever that thread happens to be: inside `Event.wait`, inside a `with
lock:` of a console or a logger. A handler that takes a lock (Event.set,
print, a Condition) can wait for a lock its own thread holds and never
return; `kx datasets watch` did exactly that on SIGTERM after a large batch.
So the handler here only counts the signal; the command's main loop waits
with timeouts and looks at the count (`StopSignals.count`), or lets the
engine's progress callback raise at a safe point (`checkpoint`).

Used by `kx datasets watch`, `kx datasets ingest`, `kx serve` and `kx mcp --http`; the two servers'
uvicorn drains through `draining_server`.

The same counting handler is installed first of all when `kx` starts
(`install_early`, from kx_tui/__init__.py, before click, numpy or the engine
are imported): a SIGTERM that lands while the interpreter imports a second
of modules used to get the default action (exit -15). Now it is counted;
a command that handles stops (`StopSignals`) takes the count over and stops
at once through its own clean path, and any other command leaves before it
starts (`release_early`): exit 0 for SIGTERM, 130 for Ctrl-C, nothing done.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from types import FrameType
from typing import TYPE_CHECKING, Any, Callable, Iterable

if TYPE_CHECKING:  # imported by the servers when they start, not when `kx --help` is drawn
    import asyncio
    import socket

    import uvicorn

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# How long after the first stop signal a command's guard ends the process whatever it is blocked in (one ONNX
# encode batch takes 10 s and more on a 2-core machine at load 15). Two seconds under the 10 s a stop may
# take: under such load the guard's own wake-up and the exit's teardown took 0.9-1.1 s (RELIABILITY.md).
GIVE_UP_SECONDS = 8.0


class _Early:
    """Stop signals counted between the process's start and the command's own handling of them."""

    count = 0
    last: int | None = None
    first_at: float | None = None  # time.monotonic() of the first one: a stop's bound counts from the signal


def _early_handler(signum: int, _frame: FrameType | None) -> None:
    # plain assignments (and a clock read, a C call that takes no lock) only, as in StopSignals._on_signal
    _Early.count += 1
    _Early.last = signum
    if _Early.first_at is None:
        _Early.first_at = time.monotonic()


def install_early() -> None:
    """Count Ctrl-C and SIGTERM from now on (the entry point's first act); `release_early` or a StopSignals
    block takes over."""
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            signal.signal(sig, _early_handler)


def release_early(command_handles_stops: bool) -> None:
    """Where a command starts: hand the early signals over, or give the ordinary handlers back.

    A command that handles stops (`command_handles_stops`: it enters a
    StopSignals block, which takes the count over) keeps counting until
    then. Any other gets Python's usual Ctrl-C and SIGTERM back; if one came
    already, the process leaves now, before the command did anything: exit 0
    for SIGTERM (a service manager's stop, done), 130 for Ctrl-C.
    """
    if signal.getsignal(signal.SIGTERM) is not _early_handler:
        return  # not started through the entry point (a test calling the CLI), or already handed over
    if command_handles_stops:
        return  # its StopSignals block takes the count over
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if _Early.count and _Early.last is not None:
        name = signal.Signals(_Early.last).name
        sys.stderr.write(f"kx: stopped by {name} before the command started; nothing was done\n")
        sys.stderr.flush()
        sys.exit(0 if _Early.last == signal.SIGTERM else 130)


class Interrupted(KeyboardInterrupt):
    """Raised by `checkpoint` on the main thread, at a point the command chose, once a stop was asked for."""

    def __init__(self, signum: int, message: str = "") -> None:
        super().__init__(message or f"stopped by {signal.Signals(signum).name}")
        self.signum = signum
        self.message = message or f"stopped by {signal.Signals(signum).name}"


class StopSignals:
    """Count Ctrl-C and SIGTERM while the `with` block runs; restore the previous handlers after.

    Only the main thread can install handlers; elsewhere (a test calling the
    command from a thread) nothing is installed and `count` stays 0.

    With `give_up_after`, a guard thread ends the process with `exit_code`
    (after one line on stderr) if the block is still running that many
    seconds after the first signal: the bound on a stop, whatever the command
    was blocked in (a giant batch, a C call, a full pipe on stdout). Leaving
    that way is no worse than a kill, which kx survives with nothing
    committed lost (RELIABILITY.md, crash campaign).
    """

    def __init__(self, signals: tuple[int, ...] = STOP_SIGNALS, give_up_after: float | None = None,
                 exit_code: int = 130, last_words: str = "") -> None:
        self.signals = signals
        self.count = 0
        self.last: int | None = None
        self.first_at: float | None = None  # when the first signal came (time.monotonic()): the guard's clock
        self.give_up_after = give_up_after
        self.exit_code = exit_code
        self.last_words = last_words
        self._previous: dict[int, Any] = {}
        self._done = False
        # Called from the handler as well: it must only set a flag (e.g. uvicorn's server.should_exit).
        self.also_flag: Callable[[], None] | None = None

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        # No locks, no I/O, nothing that could wait: plain assignments (and a clock read) only.
        self.count += 1
        self.last = signum
        if self.first_at is None:
            self.first_at = time.monotonic()
        if self.also_flag is not None:
            self.also_flag()

    @property
    def name(self) -> str:
        """The last signal's name (SIGTERM, SIGINT), or '' when none came."""
        return signal.Signals(self.last).name if self.last is not None else ""

    def checkpoint(self) -> None:
        """Raise `Interrupted` if a stop was asked for; call it where stopping loses nothing committed."""
        if self.count and self.last is not None:
            raise Interrupted(self.last)

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._on_signal) for sig in self.signals}
            if _early_handler in self._previous.values() and _Early.count:
                # a stop that came while kx was starting: this command stops at once, by its own clean path,
                # and the guard's bound counts from that signal, not from now
                self.count, self.last, self.first_at = self.count + _Early.count, _Early.last, _Early.first_at
                _Early.count, _Early.first_at = 0, None
            if self.give_up_after is not None:
                threading.Thread(target=self._guard, name="kx-stop-guard", daemon=True).start()
        return self

    def _guard(self) -> None:
        assert self.give_up_after is not None
        while not self._done:
            time.sleep(0.1)
            if not self.count:
                continue
            if self.first_at is None:
                self.first_at = time.monotonic()
            if time.monotonic() - self.first_at >= self.give_up_after and not self._done:
                words = self.last_words or "stopping now"
                with_newline = f"{words} ({self.name} {self.give_up_after:g} s ago)\n"
                try:
                    # no Python-level lock on the way, and never blocking on a full pipe: a pipe that
                    # select() calls writable takes PIPE_BUF (>= 512) bytes in one write
                    if select.select([], [2], [], 0)[1]:
                        os.write(2, with_newline.encode("utf-8", "replace")[:512])
                        if os.environ.get("KX_DEBUG"):  # what held the stop up: every thread's stack
                            import faulthandler

                            faulthandler.dump_traceback(all_threads=True)
                finally:
                    os._exit(self.exit_code)

    def __exit__(self, *exc: object) -> None:
        self._done = True
        previous, self._previous = self._previous, {}
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def exit_without_finalising(code: int) -> None:
    """Leave now, streams flushed, without finalising the interpreter.

    A helper thread still inside ONNX Runtime's C++ (a model loading beside a
    command) makes finalisation abort the process ("terminate called without
    an active exception", exit -6); every commit is whole by the time a
    command calls this, so nothing is lost by skipping it.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def leave_now_if_helpers_remain(code: int) -> None:
    """After a command stopped on a signal: leave without finalising if helper threads are still alive.

    An embedding thread whose batch outlived the stop (seconds on a loaded
    machine; its work in hand is uncommitted), extraction or watchdog threads:
    finalising the interpreter would wait for them, or abort inside ONNX
    Runtime. Only as the process's own entry point: main() called in-process
    (tests) has its streams redirected and must return.
    """
    if threading.active_count() > 1 and threading.current_thread() is threading.main_thread() \
            and sys.stdout is sys.__stdout__:
        exit_without_finalising(code)


def join_or_leave(thread: threading.Thread, seconds: float, code: int = 0) -> None:
    """Wait up to `seconds` for `thread` (a model warm-up); if it still runs, leave without finalising."""
    thread.join(seconds)
    if thread.is_alive():
        exit_without_finalising(code)


BACKSTOP_SECONDS = 1  # uvicorn's own cancel after the drain, should ours not have ended every request by then


def draining_server(config: uvicorn.Config, stop: StopSignals, on_stop: Callable[[], None], drain_seconds: float,
                    listening: Callable[[], Iterable[asyncio.Task[Any]]] = tuple) -> uvicorn.Server:
    """uvicorn's Server for kx's servers (`kx serve`, `kx mcp --http`): a stop it handles counts in `stop`, whose
    guard bounds the whole stop, and calls `on_stop` (flags only: the engine's work in flight leaves too).

    Requests get `drain_seconds` to answer; then those still running are cancelled here, which the app answers
    as JSON (503 UNAVAILABLE, or on a started event stream an error event). uvicorn's own timeout
    (`config.timeout_graceful_shutdown`, BACKSTOP_SECONDS later) would cancel them too, but log an ERROR line
    for it. `listening`: the tasks that answer nothing (a client's open event stream), ended as soon as they
    are all that still runs: they would hold every stop for the whole drain, and ended earlier, while a call
    is in flight, the client takes the server for gone and drops that call's answer.
    """
    import asyncio

    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            # uvicorn's own handler while it runs, in place of StopSignals': count it there too, so the guard's
            # clock starts with this stop (uvicorn would otherwise wait as long as a request does)
            on_stop()
            stop.count += 1
            stop.last = sig
            if stop.first_at is None:
                stop.first_at = time.monotonic()
            super().handle_exit(sig, frame)

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            loop = asyncio.get_running_loop()
            drained = loop.call_later(drain_seconds, lambda: self._cancel(self.server_state.tasks, "the drain is over"))
            timers = [drained]

            def end_listening() -> None:
                streams = set(listening())
                if streams and not set(self.server_state.tasks) - streams:
                    self._cancel(streams, "nothing else runs")
                timers.append(loop.call_later(0.1, end_listening))

            end_listening()
            try:
                await super().shutdown(sockets)
            finally:
                for timer in timers:
                    timer.cancel()

        @staticmethod
        def _cancel(tasks: Iterable[asyncio.Task[Any]], why: str) -> None:
            for task in list(tasks):
                task.cancel(msg=f"kx: the server is stopping ({why})")

    return Server(config)
