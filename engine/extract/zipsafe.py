"""Reading members of an untrusted ZIP (DOCX, EPUB) without letting a ZIP bomb eat memory.

Before anything is inflated, the declared sizes are checked: the whole
archive may not claim more than `Limits.max_unpacked_bytes`, and no large
member may claim a compression ratio no real document has. The declared
sizes can lie, so every read is also capped: a member that inflates past
what it declared, or past the limit, is refused mid-read.
"""

from __future__ import annotations

import io
import zipfile

from ..config import ENV
from ..errors import KxError, Status, invalid
from .base import Limits

_MAX_RATIO = 200  # XML compresses ~5-20x; a bomb of zeros ~1000x
_RATIO_FLOOR = 4 * 2**20  # small members may be as repetitive as they like


class SafeZip:
    """An opened archive whose reads are bounded; raises KxError saying what is wrong."""

    def __init__(self, data: bytes, label: str, kind: str, limits: Limits) -> None:
        self.label, self.kind, self.limits = label, kind, limits
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self._zip.infolist()
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            raise invalid(f"{label} is not a readable {kind}: its ZIP container is damaged or truncated "
                          f"({exc}); re-save or re-download it") from None
        total = sum(i.file_size for i in infos)
        if total > limits.max_unpacked_bytes:
            raise self._bomb(f"it would unpack to {total:,} bytes, over the {limits.max_unpacked_bytes:,}-byte limit")
        for info in infos:
            if info.file_size > _RATIO_FLOOR and info.file_size > _MAX_RATIO * max(info.compress_size, 1):
                raise self._bomb(f"{info.filename} claims {info.file_size:,} bytes from {info.compress_size:,} "
                                 "compressed (a ZIP bomb?)")
        self.names = {i.filename for i in infos}
        self._budget = limits.max_unpacked_bytes

    def read(self, name: str) -> bytes | None:
        """The member's bytes, None when absent; refuses one that inflates past its declared size."""
        if name not in self.names:
            return None
        info = self._zip.getinfo(name)
        cap = min(info.file_size, self._budget)
        try:
            with self._zip.open(info) as member:
                data = member.read(cap + 1)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
            raise invalid(f"{self.label} is not a readable {self.kind}: {name} cannot be unpacked ({exc}); "
                          "re-save or re-download it") from None
        if len(data) > cap:
            raise self._bomb(f"{name} inflates past the size it declares")
        self._budget -= len(data)
        return data

    def _bomb(self, why: str) -> KxError:
        return KxError(Status.RESOURCE_EXHAUSTED,
                       f"{self.label} was refused before unpacking: {why}; kx reads at most "
                       f"{self.limits.max_unpacked_bytes:,} bytes from a {self.kind} ({ENV.extract_max_unpacked_mb})")

    def close(self) -> None:
        self._zip.close()
