"""`kx` with no subcommand: the Textual workbench over KX_HOME or a gateway.

The app is handed its backend (constructor injection) and, when the datasets
are on this machine, the local settings: the CLI passes the in-process Engine
and its settings, or a KxClient and None; tests pass an Engine with a test
embedder. The app keeps only what every screen shares (the backend, the
settings, the query options, the model's warm-up); the default screen
(screens/main.py) does the work. Everything that touches the backend runs in
a worker thread and answers with a message from kx_tui/tui/messages.py; a
KxError becomes a notification, never a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from pathlib import Path
from typing import Iterable

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.screen import Screen

from engine.backend import Backend
from engine.config import Settings
from engine.records import RetrievalMode

from ..render import terminal_safe
from .screens.first_run import SAMPLE_DATASET  # noqa: F401 - re-exported
from .screens.keys import KeysScreen
from .screens.main import MainScreen
from .warmup import ModelWarmup

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "handbook"


class KxApp(App):
    """Datasets, a query box and its explained answer; `get_default_screen()` is the MainScreen."""

    TITLE = "kx"
    # Every screen is "-short" below 30 rows (an 80x24 terminal): panes that can shrink do, so what matters
    # (the agent's answer, the hits) keeps the room
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]
    # A toast takes its rows from the screen's layout instead of being drawn over it: in the screen's own layer,
    # docked at the bottom, it shrinks the tables and lists above it for as long as it shows, so it never
    # hides the row a person is on (Textual's own layer put it over the documents table at 80x24)
    CSS = """
    ToastRack { layer: default; }
    """

    def __init__(self, backend: Backend, *, settings: Settings | None = None, samples: Path | None = SAMPLES,
                 watch_settle_seconds: float = 1.0) -> None:
        """`settings`: the local engine's settings, or None over a gateway (no highlighting, watching, samples)."""
        super().__init__()
        self.backend = backend
        self.settings = settings
        self.samples = samples
        self.watch_settle_seconds = watch_settle_seconds
        self.mode: str = settings.default_mode if settings else RetrievalMode.HYBRID
        self.rerank: bool = settings.rerank if settings else True
        self.k: int = settings.default_k if settings else 10
        self.max_k: int = settings.max_k if settings else 64
        self.warmup = ModelWarmup(backend, local=settings is not None)

    def get_default_screen(self) -> Screen:
        return MainScreen()

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every toast, whoever raised it (widgets and screens notify through the app), is cleaned of
        terminal controls and shown as plain text: many quote a path, a document name or an error that holds
        stored text, whose "[" is not markup (a "[/]" in it was a MarkupError when the toast was drawn, which
        ended the app). No toast of ours uses markup; `markup` is kept for Textual's signature."""
        super().notify(terminal_safe(message), title=terminal_safe(title), severity=severity, timeout=timeout,
                       markup=False)

    def action_help_quit(self) -> None:
        """Ctrl+C does not quit: Textual's hint of the key that does, without its markup (toasts are plain)."""
        for key, active in self.active_bindings.items():
            if active.binding.action in ("quit", "app.quit"):
                self.notify(f"Press {key} to quit the app", title="Do you want to quit?")
                return

    def on_mount(self) -> None:
        """SIGTERM leaves like ctrl+q, restoring the terminal: asyncio's handler only writes a wake-up
        byte (signal.set_wakeup_fd) and `exit` then runs in the event loop, as ordinary code."""
        if threading.current_thread() is threading.main_thread():
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # no signals here (Windows)
                asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self.exit)

    def on_unmount(self) -> None:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)

    def help_bindings(self) -> Iterable[Binding]:
        """The app-wide keys, for the help screen."""
        if self.ENABLE_COMMAND_PALETTE:
            yield Binding(self.COMMAND_PALETTE_BINDING, "command_palette", "Commands", tooltip="command palette")
        yield from (b for b in self.BINDINGS if isinstance(b, Binding) and b.description)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's own commands, with our "Keys" (this screen's keys, from its bindings) in place of its panel."""
        for command in super().get_system_commands(screen):
            if command.title == "Keys":
                if isinstance(screen, KeysScreen):
                    yield SystemCommand("Keys", "Show this screen's keys", screen.action_show_keys)
                continue
            yield command
        if isinstance(screen, MainScreen):
            yield from screen.system_commands()
