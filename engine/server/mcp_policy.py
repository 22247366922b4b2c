"""What `kx mcp` lets a client do beyond reading: ingest, and the folders ingest_file may read.

Apart from engine/server/mcp_server.py (which imports the MCP SDK, seconds on a small
machine) so `kx mcp` checks its options before it starts loading anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..errors import KxError, Status, invalid


@dataclass(frozen=True)
class Policy:
    """What this server lets a client do beyond reading."""

    allow_ingest: bool = False
    allow_paths: tuple[Path, ...] = ()          # resolved folders ingest_file may read from
    max_document_bytes: int = 64 * 1024 * 1024

    @staticmethod
    def of(allow_ingest: bool, allow_paths: Sequence[str | Path], max_document_bytes: int) -> Policy:
        """Checked at start: each allowed folder must exist and be a folder (resolved, symlinks followed)."""
        if allow_paths and not allow_ingest:
            raise invalid("--allow-path only names folders for ingest_file; add --allow-ingest, or drop it")
        roots = []
        for given in allow_paths:
            root = Path(os.path.realpath(Path(given).expanduser()))
            if not root.is_dir():
                raise invalid(f"--allow-path {given}: {root} is not a folder; name an existing folder")
            roots.append(root)
        return Policy(allow_ingest, tuple(roots), max_document_bytes)

    def confine(self, given: str) -> Path:
        """`given` resolved (symlinks followed, `..` collapsed) if it lies in an allowed folder; else PERMISSION_DENIED.

        A relative path is taken inside the first allowed folder.
        """
        if not self.allow_paths:
            raise KxError(Status.PERMISSION_DENIED, "this server reads no files: start it with --allow-ingest "
                                                     "--allow-path FOLDER to let ingest_file read from FOLDER")
        if "\x00" in given:
            raise invalid("the path holds a NUL byte; no file has that name")
        path = Path(given).expanduser()
        if not path.is_absolute():
            path = self.allow_paths[0] / path
        resolved = Path(os.path.realpath(path))
        if not any(resolved.is_relative_to(root) for root in self.allow_paths):
            folders = ", ".join(str(r) for r in self.allow_paths)
            raise KxError(Status.PERMISSION_DENIED,
                          f"{given} resolves to {resolved}, outside the folders this server may read ({folders}); "
                          "copy the file into one of them, or restart with --allow-path naming its folder")
        return resolved
