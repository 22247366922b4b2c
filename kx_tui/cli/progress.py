"""Both stages of an ingest, shown while they run: on a terminal two live bars, off it a plain line now and then.

Stage 1 ("reading": documents read, extracted, committed and made keyword-
searchable) and stage 2 ("embedding": the backlog's passages given vectors)
each move on every document and every embedding batch; one large document
moves on its own too (cutting it into passages, indexing them for keyword
search: the event's `part`), as a third bar or at the end of the line. On a terminal the
bars redraw continuously (rate and ETA included); off a terminal (a log, a
pipe, `kx eval ... > out.json`) one line goes to stderr every LINE_SECONDS,
so long work is never silent. Standard output is never touched, so `--json`
stays clean.
"""

from __future__ import annotations

import io
import threading
import time
from typing import Any, Callable

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn

from engine.records import IngestEvent, Notice
from engine.records import Progress as StageProgress

FIRST_LINE_SECONDS = 1.0   # off a terminal: the first line this long after the work began (then every LINE_SECONDS)
LINE_SECONDS = 5.0         # off a terminal: at most one line this often
RATE_SECONDS = 2.0         # no rate (and so no ETA) before a stage has moved for this long: an early guess misleads
TICK_SECONDS = 0.25        # how often the ticker looks whether a line is due, also when no event comes (an export)


class _Rate:
    """Items per second over the stage so far, and the time left at that rate."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.started: float | None = None
        self.first = 0

    def seen(self, done: int) -> None:
        if self.started is None:
            self.started, self.first = self.clock(), done

    def per_second(self, done: int) -> float | None:
        if self.started is None:
            return None
        elapsed = self.clock() - self.started
        return (done - self.first) / elapsed if elapsed >= RATE_SECONDS and done > self.first else None

    def eta(self, done: int, total: int) -> str:
        """"ETA 0:00:27", or "" while there is no rate to go on."""
        rate = self.per_second(done)
        if not rate:
            return ""
        left = int(max(total - done, 0) / rate)
        return f"ETA {left // 3600}:{left % 3600 // 60:02d}:{left % 60:02d}"


class PipelineProgress:
    """An ingest's (or `kx datasets embed`'s) progress on stderr; feed it every event with `update`.

    Used as a context manager it also ticks on its own (a thread): off a terminal a line is due
    FIRST_LINE_SECONDS after the work began and then every LINE_SECONDS even when no event comes (the
    model's one-time export says how long it has been going); on a terminal the bars' spinner moves.
    """

    def __init__(self, console: Console, enabled: bool = True, clock: Callable[[], float] = time.monotonic,
                 line_seconds: float = LINE_SECONDS) -> None:
        self.console = console
        self.enabled = enabled
        self.live = enabled and console.is_terminal
        self.clock = clock
        self.line_seconds = line_seconds
        self._progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        self._state: dict[str, tuple[int, int, int]] = {}  # stage -> (done, total, passages)
        self._part: tuple[str, int, int] | None = None     # one large document's step: (label, done, total)
        self._rates = {"reading": _Rate(clock), "embedding": _Rate(clock)}
        self._preparing: tuple[str, float] | None = None    # the model's preparation under way: (what, since)
        self._started = clock()
        self._last_line: float | None = None
        self._lock = threading.RLock()   # the ticker and the caller's thread both draw
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> PipelineProgress:
        if self.live:   # a spinner from the first moment, until the first stage moves
            self._tasks["start"] = self._bars().add_task("starting", total=None, unit="", extra="", eta="")
        if self.enabled:
            # draw one line nowhere first: rich imports some modules on its first print, and the ticker must not
            # wait for the import lock while this thread imports the model's runtime (seconds, torch's)
            Console(file=io.StringIO(), width=80).print(self.line(), markup=False, highlight=False, soft_wrap=True)
            self._ticker = threading.Thread(target=self._tick_until_stopped, name="kx-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=1.0)
        with self._lock:
            if self._progress is not None:
                self._progress.stop()

    def _tick_until_stopped(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            self.tick()

    def update(self, event: IngestEvent) -> None:
        """Draw a stage's progress; every other event of the ingest (a document's result) is not ours, and a
        notice is `notice`'s."""
        if not isinstance(event, StageProgress) or not self.enabled or event.stage not in self._rates:
            return
        with self._lock:
            stage = event.stage
            self._rates[stage].seen(event.done)
            self._state[stage] = (event.done, event.total, event.passages)
            if stage == "embedding":
                self._preparing = None   # the model embeds: whatever preparing it took is over
            if stage == "reading":
                part = event.part
                self._part = (part, event.part_done, event.part_total) if part and event.part_total else None
            if self.live:
                if "start" in self._tasks:
                    self._bars().remove_task(self._tasks.pop("start"))
                self._draw(stage)
                self._draw_part()
                self._draw_preparing()
            else:
                self.tick()

    def notice(self, event: Notice) -> None:
        """A notice, one line ("preparing: exporting ... (once, about 10 s)"); a model being prepared is shown
        as under way (a spinner, or the plain line's "preparing the model for N s") until it embeds."""
        with self._lock:
            self.print(f"{event.kind}: {event.message}")
            if event.kind == "preparing" and self.enabled:
                # engine/embedding/onnx_export.py's words: "exporting|quantising ... (once ...)" begin a step that
                # lasts; "... ready: ..." and "using torch ..." end it
                if " ready" in event.message or event.message.startswith("using torch"):
                    self._preparing = None
                elif self._preparing is None:
                    self._preparing = (event.message, self.clock())
                if self.live:
                    self._draw_preparing()

    def tick(self) -> None:
        """Off a terminal: print the line when one is due and there is something under way to say."""
        if self.live or not self.enabled:
            return
        with self._lock:
            now = self.clock()
            due = (now - self._started >= FIRST_LINE_SECONDS if self._last_line is None
                   else now - self._last_line >= self.line_seconds)
            if due and (self._under_way() or self._preparing is not None or not self._state):
                self._last_line = now
                self.console.print(self.line(), markup=False, highlight=False, soft_wrap=True)

    def _under_way(self) -> bool:
        """Some stage still has work left: a line about finished work says nothing the result will not."""
        return any(done < total for done, total, _ in self._state.values())

    def line(self) -> str:
        """The plain status line: "reading 40/105 documents (512 passages committed); embedding 320/949 ..."."""
        parts = []
        if "reading" in self._state:
            done, total, passages = self._state["reading"]
            parts.append(f"reading {done:,}/{total:,} documents ({passages:,} passages committed)")
            if self._part is not None:
                label, part_done, part_total = self._part
                parts.append(f"{label} {100 * part_done // part_total} %")
        if self._preparing is not None:
            parts.append(f"preparing the model ({self.clock() - self._preparing[1]:.0f} s so far)")
        if "embedding" in self._state:
            done, total, _ = self._state["embedding"]
            rate = self._rates["embedding"].per_second(done)
            speed = f", {rate:.1f} passages/s, {self._rates['embedding'].eta(done, total)}" if rate else ""
            parts.append(f"embedding {done:,}/{total:,} passages{speed}")
        return f"kx: {'; '.join(parts) or 'starting'} ({self.clock() - self._started:.0f} s)"

    def _draw(self, stage: str) -> None:
        """A stage's bar, from its first event whatever the size of the job."""
        done, total, passages = self._state[stage]
        if stage not in self._tasks:
            unit = "documents" if stage == "reading" else "passages"
            self._tasks[stage] = self._bars().add_task(stage, total=total, unit=unit, extra="", eta="")
        assert self._progress is not None
        eta = ""
        if stage == "reading":
            extra = f"{passages:,} passages committed"
        else:
            rate = self._rates[stage].per_second(done)
            extra = f"{rate:.1f}/s" if rate else ""
            eta = self._rates[stage].eta(done, total)
        self._progress.update(self._tasks[stage], completed=done, total=total, extra=extra, eta=eta)

    def _draw_preparing(self) -> None:
        """The model's preparation as a row of its own (a spinner and its words) while it lasts."""
        if self._preparing is None:
            if "model" in self._tasks and self._progress is not None:
                self._progress.remove_task(self._tasks.pop("model"))
            return
        if "model" not in self._tasks:
            self._tasks["model"] = self._bars().add_task("model", total=None, unit="", extra="preparing (once)",
                                                         eta="")

    def _draw_part(self) -> None:
        """The step on one large document as a bar of its own while it lasts (percent of the step)."""
        if self._part is None:
            if "part" in self._tasks and self._progress is not None:
                self._progress.remove_task(self._tasks.pop("part"))
            return
        label, done, total = self._part
        bars = self._bars()
        if "part" not in self._tasks:
            self._tasks["part"] = bars.add_task("document", total=100, unit="%", extra="", eta="")
        bars.update(self._tasks["part"], completed=100 * done // total, extra=label)

    def _bars(self) -> Progress:
        if self._progress is None:
            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description:<9}"), BarColumn(),
                                      MofNCompleteColumn(), TextColumn("{task.fields[unit]}"),
                                      TextColumn("{task.fields[extra]}"), TextColumn("{task.fields[eta]}"),
                                      console=self.console, transient=True)
            self._progress.start()
        return self._progress

    def print(self, message: str) -> None:
        with self._lock:
            self.console.print(escape(message))

    def call(self, fn: Callable[..., None], *args: Any) -> None:
        with self._lock:
            fn(*args)
