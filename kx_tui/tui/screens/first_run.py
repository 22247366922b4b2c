"""The main screen's first run: an empty home gets the shipped handbook samples, built while the user watches.

`FirstRun` is a part the main screen holds, not a widget. `start()` ingests
the samples in a worker on the screen (group "ingest": the screen's error
handler knows it) and shows one progress line (warmup.BuildProgress: what
happens, how long, what is left), redrawn each second; the screen hands the
ingest's messages and the model's warm-up notes back here. Over a gateway, or
with no samples, there is nothing to build: the screen shows how to add
documents (widgets/first_run.py's FirstRunNote) instead.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from textual.timer import Timer

from engine.records import IngestReport

from ..messages import IngestFinished, IngestProgressed
from ..warmup import BuildProgress
from ..widgets.first_run import BuildProgressLine
from .keys import KeysScreen

SAMPLE_DATASET = "handbook"



class FirstRun:
    def __init__(self, screen: KeysScreen) -> None:
        self.screen = screen
        self.build: BuildProgress | None = None   # the sample build, while it runs
        self._timer: Timer | None = None

    def start(self) -> bool:
        """Build the sample dataset from the shipped samples; False where there is nothing to build here."""
        kx = self.screen.kx
        files = sorted(kx.samples.glob("*.md")) if kx.samples and kx.samples.is_dir() else []
        if not files or kx.settings is None:  # over a gateway, its datasets are its operator's
            return False
        self.build = BuildProgress(SAMPLE_DATASET, len(files))
        if kx.warmup.ready:
            self.build.model_ready()
        self.screen.query_one(BuildProgressLine).display = True
        self.show()
        self._timer = self.screen.set_interval(1.0, self.show)  # the seconds and the ETA move on
        self.screen.run_worker(partial(self._ingest, files), name="ingest_samples", group="ingest", exclusive=True,
                               thread=True, exit_on_error=False)
        return True

    def _ingest(self, files: list[Path]) -> None:
        """The worker: one model load (the warm-up's), then the samples in, with progress."""
        from engine.records import IngestEvent, Progress
        from engine.text.inputs import from_file

        kx = self.screen.kx
        settings = kx.settings
        assert settings is not None  # start() checked

        def on_event(event: IngestEvent) -> None:
            if isinstance(event, Progress):
                self.screen.post_message(IngestProgressed(event.stage, event.done, event.total))

        kx.warmup.wait()  # one model load, not two side by side
        documents = [from_file(f, settings.max_document_bytes) for f in files]
        report = kx.backend.ingest(SAMPLE_DATASET, documents, on_event=on_event)
        self.screen.post_message(IngestFinished(report))

    def show(self) -> None:
        if self.build is not None:
            self.screen.query_one(BuildProgressLine).update(self.build.line())

    def noted(self, line: str) -> bool:
        """A warm-up note (e.g. a first use's ONNX export): True where the progress line says it."""
        if self.build is None:
            return False
        self.build.noted(line)
        self.show()
        return True

    def model_ready(self) -> None:
        if self.build is not None:
            self.build.model_ready()
            self.show()

    def progressed(self, message: IngestProgressed) -> None:
        if self.build is not None:
            self.build.progressed(message.stage, message.done, message.total)
            self.show()

    def finished(self, report: IngestReport, answering: bool) -> None:
        """The sample is in: say so, with how long it took and (`answering`) that a held query runs now."""
        seconds = None if self.build is None else self.build.clock() - self.build.started
        self.end()
        took = "" if seconds is None else f" in {seconds:.0f} s"
        then = "Answering your query." if answering else "Ask it something."
        self.screen.notify(f"'{report.dataset}' is ready{took}: {report.documents} documents, {report.passages} "
                           f"passages. {then}", title="sample dataset")

    def end(self) -> None:
        """The build is over (done or failed): the progress line goes."""
        self.build = None
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.screen.query_one(BuildProgressLine).display = False
