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

import time
from typing import Any, Callable

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from engine.records import IngestEvent
from engine.records import Progress as StageProgress

LINE_SECONDS = 5.0   # off a terminal: at most one line this often
_SHOW_FROM = 64      # passages to embed (or documents to read) below which a bar is not worth drawing


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
        return (done - self.first) / elapsed if elapsed > 0.5 and done > self.first else None

    def eta(self, done: int, total: int) -> str:
        rate = self.per_second(done)
        if not rate:
            return "-:--:--"
        left = int(max(total - done, 0) / rate)
        return f"{left // 3600}:{left % 3600 // 60:02d}:{left % 60:02d}"


class PipelineProgress:
    """An ingest's (or `kx datasets embed`'s) progress on stderr; feed it every event with `update`."""

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
        self._started = clock()
        self._last_line = self._started

    def __enter__(self) -> PipelineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def update(self, event: IngestEvent) -> None:
        """Draw a stage's progress; every other event of the ingest (a document's result, a notice) is not ours."""
        if not isinstance(event, StageProgress) or not self.enabled or event.stage not in self._rates:
            return
        stage = event.stage
        self._rates[stage].seen(event.done)
        self._state[stage] = (event.done, event.total, event.passages)
        if stage == "reading":
            part = event.part
            self._part = (part, event.part_done, event.part_total) if part and event.part_total else None
        if self.live:
            self._draw(stage)
            self._draw_part()
        elif self.clock() - self._last_line >= self.line_seconds and self._under_way():
            self._last_line = self.clock()
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
        if "embedding" in self._state:
            done, total, _ = self._state["embedding"]
            rate = self._rates["embedding"].per_second(done)
            speed = f", {rate:.1f} passages/s, ETA {self._rates['embedding'].eta(done, total)}" if rate else ""
            parts.append(f"embedding {done:,}/{total:,} passages{speed}")
        return f"kx: {'; '.join(parts)} ({self.clock() - self._started:.0f} s)"

    def _draw(self, stage: str) -> None:
        done, total, passages = self._state[stage]
        if stage not in self._tasks:
            if total < _SHOW_FROM:
                return
            unit = "documents" if stage == "reading" else "passages"
            self._tasks[stage] = self._bars().add_task(stage, total=total, unit=unit, extra="")
        assert self._progress is not None
        if stage == "reading":
            extra = f"{passages:,} passages committed"
        else:
            rate = self._rates[stage].per_second(done)
            extra = f"{rate:.1f}/s" if rate else ""
        self._progress.update(self._tasks[stage], completed=done, total=total, extra=extra)

    def _draw_part(self) -> None:
        """The step on one large document as a bar of its own while it lasts (percent of the step)."""
        if self._part is None:
            if "part" in self._tasks and self._progress is not None:
                self._progress.remove_task(self._tasks.pop("part"))
            return
        label, done, total = self._part
        bars = self._bars()
        if "part" not in self._tasks:
            self._tasks["part"] = bars.add_task("document", total=100, unit="%", extra="")
        bars.update(self._tasks["part"], completed=100 * done // total, extra=label)

    def _bars(self) -> Progress:
        if self._progress is None:
            self._progress = Progress(TextColumn("{task.description:<9}"), BarColumn(), MofNCompleteColumn(),
                                      TextColumn("{task.fields[unit]}"), TextColumn("{task.fields[extra]}"),
                                      TimeRemainingColumn(), console=self.console, transient=True)
            self._progress.start()
        return self._progress

    def print(self, message: str) -> None:
        self.console.print(escape(message))

    def call(self, fn: Callable[..., None], *args: Any) -> None:
        fn(*args)
