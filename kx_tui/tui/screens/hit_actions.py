"""What a user does with one hit, from the results list or the passage view: copy its citation, open its file.

`y` copies a one-line citation (the app's clipboard, which Textual sends to
the terminal with OSC 52); `o` opens the source file with the desktop's
opener (`open` on macOS, `xdg-open` under X11/Wayland, `start` on Windows)
when the file still exists and there is a desktop to open it on; otherwise
it says why not and where the file is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from textual.app import App

from engine.records import Hit
from engine.text.inputs import CLIENT_PREFIX

from ...render import citation


def system_opener() -> list[str] | None:
    """The command that opens a file in its desktop application, or None where there is none to use."""
    if sys.platform == "darwin":
        found = shutil.which("open")
        return [found] if found else None
    if sys.platform.startswith("win"):
        return ["cmd", "/c", "start", ""]
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return None  # a console-only session: xdg-open would start a text browser inside our terminal
    found = shutil.which("xdg-open")
    return [found] if found else None


def copy_citation(app: App, dataset: str, hit: Hit | None) -> None:
    if hit is None:
        app.notify("no hit to cite: run a query and pick a hit", severity="warning")
        return
    text = citation(hit, dataset)
    app.copy_to_clipboard(text)
    app.notify(text, title="citation copied")


def open_source(app: App, hit: Hit | None) -> None:
    if hit is None:
        app.notify("no hit to open: run a query and pick a hit", severity="warning")
        return
    if not hit.source_path:
        app.notify(f"{hit.document_name} was given as text, not read from a file: there is no file to open",
                   severity="warning")
        return
    if hit.source_path.startswith(CLIENT_PREFIX):
        # a path a gateway's client sent, kept marked as the client's: any client may send any path, so it is
        # never opened as a file of this machine
        app.notify(f"{hit.document_name} was sent through a gateway by a client, from "
                   f"{hit.source_path[len(CLIENT_PREFIX):]} on that client's machine; kx opens no path a client "
                   "sent", severity="warning", timeout=10)
        return
    path = Path(hit.source_path)
    if not path.exists():
        if getattr(app, "settings", "") is None:  # the app over a gateway: a path is one on the gateway's machine
            app.notify(f"{path} is not on this machine: the dataset lives behind the gateway, and the file on "
                       "the gateway's machine", severity="warning")
        else:
            app.notify(f"{path} is no longer there", severity="warning")
        return
    opener = system_opener()
    where = f" (the passage is on {hit.provenance.split(' · ')[0]})" if hit.page_start is not None else ""
    if opener is None:
        app.notify(f"no desktop opener here (xdg-open needs a display); the file is {path}{where}",
                   severity="warning", timeout=10)
        return
    try:
        subprocess.Popen([*opener, str(path)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        app.notify(f"could not start {opener[0]}: {exc.strerror or exc}; the file is {path}", severity="error")
        return
    app.notify(f"opening {path}{where}", title="source file")
