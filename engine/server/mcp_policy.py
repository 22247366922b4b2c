"""What `kx mcp` lets a client do beyond reading: ingest, and the folders ingest_file may read.

Apart from engine/server/mcp_server.py (which imports the MCP SDK, seconds on a small
machine) so `kx mcp` checks its options before it starts loading anything.

The client is a model that may follow someone else's instructions, so a file is read only when:
- its path, every link resolved, lies in an allowed folder, and no allowed folder is, holds or lies
  inside KX_HOME or the datasets folder (checked at start: engine/text/kx_files.py's rule, strict);
- the resolved path is opened without following a link (O_NOFOLLOW), and where the opened descriptor
  really lies (/proc/self/fd) is checked again, so a link swapped in between is not read;
- the file has one name: a hardlink's other names can lie anywhere (a link to the token, or to a file
  outside every allowed folder, looks like any file inside), and nothing tells where, so a regular
  file with st_nlink > 1 is refused; a copy of it has one name and is read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ..errors import KxError, Status, invalid
from ..text.kx_files import kx_files_refusal, reaches_kx_files


@dataclass(frozen=True)
class Policy:
    """What this server lets a client do beyond reading."""

    allow_ingest: bool = False
    allow_paths: tuple[Path, ...] = ()          # resolved folders ingest_file may read from
    max_document_bytes: int = 64 * 1024 * 1024
    kx_places: tuple[Path, ...] = ()            # KX_HOME and the datasets folder: never read

    @staticmethod
    def of(allow_ingest: bool, allow_paths: Sequence[str | Path], max_document_bytes: int, *,
           home: Path, datasets: Path) -> Policy:
        """Checked at start: each allowed folder must exist, be a folder (resolved, symlinks followed) and
        neither be, hold nor lie inside kx's home or datasets."""
        if allow_paths and not allow_ingest:
            raise invalid("--allow-path only names folders for ingest_file; add --allow-ingest, or drop it")
        roots = []
        for given in allow_paths:
            root = Path(os.path.realpath(Path(given).expanduser()))
            if not root.is_dir():
                raise invalid(f"--allow-path {given}: {root} is not a folder; name an existing folder")
            place = reaches_kx_files(root, home, datasets, strict=True)
            if place is not None:
                raise kx_files_refusal(f"--allow-path {given}", place, home,
                                       "name a folder that holds only documents, outside KX_HOME")
            roots.append(root)
        places = tuple(Path(os.path.realpath(p)) for p in (home, datasets))
        return Policy(allow_ingest, tuple(roots), max_document_bytes, places)

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
        self._check_place(given, resolved)
        return resolved

    def _check_place(self, given: str, resolved: Path) -> None:
        """PERMISSION_DENIED unless `resolved` lies in an allowed folder and outside kx's own folders."""
        if any(resolved == place or resolved.is_relative_to(place) for place in self.kx_places):
            raise KxError(Status.PERMISSION_DENIED, f"{given} resolves to {resolved}, among kx's own files "
                                                    "(KX_HOME, the datasets); they are no one's documents")
        if not any(resolved.is_relative_to(root) for root in self.allow_paths):
            folders = ", ".join(str(r) for r in self.allow_paths)
            raise KxError(Status.PERMISSION_DENIED,
                          f"{given} resolves to {resolved}, outside the folders this server may read ({folders}); "
                          "copy the file into one of them, or restart with --allow-path naming its folder")

    def vet(self, given: str) -> Callable[[int, os.stat_result], None]:
        """What `from_file` runs on the opened descriptor of `given` before reading it (see the module head)."""
        def check(fd: int, st: os.stat_result) -> None:
            if st.st_nlink > 1:
                raise KxError(Status.PERMISSION_DENIED,
                              f"{given} has {st.st_nlink} names (hard links), and the others may lie outside the "
                              "folders this server may read, so it is not read; copy it into the folder instead "
                              "(a copy has one name)")
            where = f"/proc/self/fd/{fd}"
            if os.path.exists(where):  # Linux: where the opened file really lies, whatever happened on the way
                self._check_place(given, Path(os.readlink(where)))
        return check
