"""kx's faces for people and scripts: the `kx` CLI and the Textual app."""

import os as _os
import sys as _sys


def _started_as_kx() -> bool:
    """This process is the `kx` program (its console script, or `python -m kx_tui`), not a test importing us."""
    argv = getattr(_sys, "orig_argv", _sys.argv)
    if _sys.argv and _os.path.basename(_sys.argv[0]) == "kx":
        return True
    return any(arg == "-m" and following in ("kx_tui", "kx_tui.__main__")
               for arg, following in zip(argv, argv[1:]))


if _started_as_kx():
    # Before anything heavy is imported (click, numpy, the engine: a second or more on a loaded machine), so a
    # SIGTERM in that window is counted instead of killing the process with -15 (kx_tui/cli/stopping.py).
    from .cli.stopping import install_early

    install_early()
