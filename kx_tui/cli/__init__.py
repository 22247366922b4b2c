"""The `kx` command line: one module per subcommand group, the shared context, progress and stopping."""

from typing import Any


def __getattr__(name: str) -> Any:
    # `kx`'s console script, installed before the move, runs `from kx_tui.cli import main`: resolve it on demand
    # so importing kx_tui.cli.stopping early (kx_tui/__init__.py) does not load click and every command.
    if name == "main":
        from .root import main

        return main
    raise AttributeError(f"module 'kx_tui.cli' has no attribute {name!r}")
