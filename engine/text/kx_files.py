"""kx's own files are no one's documents: KX_HOME (the gateway's token lies there) and the datasets folder.

ONE rule for every door that reads files (a folder given to `kx datasets ingest`, a watched folder,
`kx mcp --allow-path`), and one last check every ingest makes whatever door it came through:

- A folder to read from is refused when it is kx's home or its datasets folder, holds either, or lies
  inside the datasets folder (`reaches_kx_files`). A walk skips dot-folders, so for a folder ingest a
  home reached only through one (the default, under ~/.local) is out of its reach; `kx mcp` reads any
  path a client names, so for it every overlap counts, lying inside KX_HOME too (`strict`). The watcher's
  default inbox, $KX_HOME/inbox/NAME, lies inside KX_HOME but neither holds nor is it: it stays allowed
  for the ingest and the watch.
- A document whose bytes hold the gateway's current token is refused, whatever door it came through
  (`refuse_the_token`): a copy, a hardlink or a link of the token file all carry its bytes, and no door
  then has to know every way a path can lead there.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Iterable

from ..errors import KxError, Status
from .inputs import DocumentInput

TOKEN_FILE = "gateway.token"
_LONGEST_TOKEN = 4096  # a token file is one short line; more than this is not one


def _resolved(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _through_dots(inner: Path, outer: Path) -> bool:
    """Whether the way from `outer` down to `inner` passes a dot-folder (which a walk skips)."""
    return any(part.startswith(".") for part in inner.relative_to(outer).parts)


def reaches_kx_files(folder: Path | str, home: Path, datasets: Path, *, strict: bool = False) -> Path | None:
    """The kx folder (home or datasets) that reading `folder` would reach; None when it reaches neither.

    Without `strict` (a walk: folder ingest, watch): `folder` is home or datasets, holds either where the
    walk goes (no dot-folder on the way), or lies inside datasets. With `strict` (`kx mcp --allow-path`):
    it is, holds or lies inside either, dot-folders or not.
    """
    root = _resolved(Path(folder))
    for place in (_resolved(home), _resolved(datasets)):
        if root == place:
            return place
        if root in place.parents and (strict or not _through_dots(place, root)):
            return place
        if place in root.parents and (strict or place == _resolved(datasets)):
            return place
    return None


def kx_files_refusal(folder: Path | str, place: Path, home: Path, then: str) -> KxError:
    """INVALID_ARGUMENT for `folder`, which reaches kx's folder `place` (see `reaches_kx_files`)."""
    return KxError(Status.INVALID_ARGUMENT,
                   f"the folder {folder} holds kx's datasets or its home ({place}) or lies inside them, and kx's own "
                   f"files (the gateway's token in {home} among them) are no one's documents; {then}")


def _token_bytes(home: Path) -> bytes | None:
    try:
        with open(Path(home) / TOKEN_FILE, "rb") as handle:
            token = handle.read(_LONGEST_TOKEN).strip()
    except OSError:  # none yet, a folder in its place, unreadable: nothing to compare with
        return None
    return token or None


def refuse_the_token(docs: Iterable[DocumentInput], home: Path) -> list[DocumentInput]:
    """`docs` with each one whose bytes hold the gateway's token refused (PERMISSION_DENIED).

    The bytes are compared, not the path: a hardlink, a copy or a symlink of the token file is caught at
    whatever door it came in by.
    """
    docs = list(docs)
    token = _token_bytes(home)
    if token is None:
        return docs
    return [replace(doc, data=b"", error=KxError(
        Status.PERMISSION_DENIED,
        f"{doc.source_path or doc.name} holds the gateway's token ({Path(home) / TOKEN_FILE}), a secret that "
        "must stay out of every dataset; nothing of it was stored. Leave the token file out"))
        if doc.error is None and token in doc.data else doc for doc in docs]
