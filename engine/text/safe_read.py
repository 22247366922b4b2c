"""Reading a user's file safely: regular files only, and never more than the limit.

`stat` before `open` is not enough: a device reports size 0 and then reads
forever (/dev/zero), a FIFO blocks the open until some writer appears, and a
file can be swapped or grow between the stat and the read. So the file is
opened without blocking (O_NONBLOCK: a FIFO's open returns at once), the
*opened* descriptor is fstat-ed, anything but a regular file is refused with
what it is, and the read stops at `max_bytes + 1` whatever the size said.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO, Callable

from ..errors import KxError, invalid

_LIMIT_HINT = "split it or raise the limit"

# Told the opened descriptor and its fstat before a byte is read; raises KxError to refuse the file
# (`kx mcp` checks where the descriptor really lies and how many names the file has).
Vet = Callable[[int, os.stat_result], None]

# What a non-regular file is, in words a user recognises.
_KINDS = (
    (stat.S_ISDIR, "a directory; pass the files inside it"),
    (stat.S_ISCHR, "a character device, not a regular file"),
    (stat.S_ISBLK, "a block device, not a regular file"),
    (stat.S_ISFIFO, "a FIFO (named pipe), not a regular file"),
    (stat.S_ISSOCK, "a socket, not a regular file"),
)


def describe_kind(mode: int) -> str | None:
    """What a non-regular file is ("a FIFO (named pipe), ..."); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


def not_regular(path: Path | str, mode: int) -> KxError:
    return invalid(f"{path} is {describe_kind(mode)}; kx reads only regular files (copy the data into a file)")


def too_large(path: Path | str, size: str, max_bytes: int) -> KxError:
    return invalid(f"{path} is {size}, over the {max_bytes:,}-byte limit (KX_MAX_DOCUMENT_BYTES); {_LIMIT_HINT}")


def open_regular_file(path: Path | str, *, follow_symlinks: bool = True,
                      vet: Vet | None = None) -> tuple[int, os.stat_result]:
    """An open descriptor on the regular file at `path`, and its fstat; the caller closes it.

    Raises INVALID_ARGUMENT for a device, FIFO, socket or directory (without
    reading or blocking) and for a symlink when `follow_symlinks` is False; `vet`, when given, hears the
    descriptor before anything is read and may refuse it.
    OSError (missing, permission) propagates for the caller to word.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        # a socket cannot be opened (ENXIO); O_NOFOLLOW on a link gives ELOOP: say what it is
        if exc.errno in (errno.ENXIO, errno.ELOOP, errno.EOPNOTSUPP):
            try:
                st = os.lstat(path)
            except OSError:
                raise exc from None
            if stat.S_ISLNK(st.st_mode) and not follow_symlinks:
                raise invalid(f"{path} is a symbolic link and is not followed here; pass the file it points to") \
                    from None
            if stat.S_ISLNK(st.st_mode):  # followed, and ELOOP: the links go round in a circle
                raise invalid(f"{path} is a symbolic link that never reaches a file (the links lead in a loop, "
                              "or through too many others); fix the link or pass the file itself") from None
            if not stat.S_ISREG(st.st_mode):
                raise not_regular(path, st.st_mode) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(path, st.st_mode)
        if vet is not None:
            vet(fd, st)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def open_regular_binary(path: Path | str) -> BinaryIO:
    """`open(path, "rb")` for regular files only (see `open_regular_file`)."""
    fd, _st = open_regular_file(path)
    return os.fdopen(fd, "rb")


def read_regular_file(path: Path | str, max_bytes: int, *, follow_symlinks: bool = True,
                      vet: Vet | None = None) -> bytes:
    """The bytes of the regular file at `path`, at most `max_bytes` of them.

    Raises as `open_regular_file` does, and INVALID_ARGUMENT for a file over
    `max_bytes`: by its size, or by what the read found when the size lied.
    """
    fd, st = open_regular_file(path, follow_symlinks=follow_symlinks, vet=vet)
    try:
        if st.st_size > max_bytes:
            raise too_large(path, f"{st.st_size:,} bytes", max_bytes)
        chunks: list[bytes] = []
        total = 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:  # it grew after the stat, or its size was not the truth
            raise too_large(path, f"more than {max_bytes:,} bytes", max_bytes)
        return b"".join(chunks)
    finally:
        os.close(fd)
