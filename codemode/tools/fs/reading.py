"""Reading a file for the tools: regular files only, never more than a byte cap.

The type is checked before opening (so a device's open has no side effect) and again
on the open descriptor (so a swap in between changes nothing); ``O_NONBLOCK`` keeps
the open of a FIFO from waiting for a writer. At most ``cap + 1`` bytes are read, so a
file that grows, or lies about its size (``/proc``), cannot make a read unbounded.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from codemode.hostfs.beneath import Spot, Tree
from codemode.tool_terms.errors import ToolError
from codemode.tools.fs import guard

_CHUNK = 1 << 20


class NotRegular(ToolError):
    """The path is a device, FIFO, socket or directory; the message says which."""

    def __init__(self, shown: str | Path, mode: int) -> None:
        self.kind = kind_of(mode)
        self.is_dir = stat.S_ISDIR(mode)
        super().__init__(f"{shown} is {self.kind}, not a regular file")


class TooBig(ToolError):
    """The file holds more than the cap."""


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def locate_for_reading(path: Path, shown: str | Path) -> Spot:
    """The spot of ``path`` with every symlink resolved, read-refusals applied."""
    spot = Tree(None).locate(path, shown=shown)
    reason = guard.read_refusal(spot.real)
    if reason is not None:
        spot.close()
        raise ToolError(f"refusing to read {shown}: {reason}")
    return spot


def read_spot(spot: Spot, cap: int, shown: str | Path) -> bytes:
    """The bytes of the regular file at ``spot``; raises FileNotFoundError, NotRegular
    or TooBig (when it holds more than ``cap`` bytes)."""
    return read_in(spot.parent, spot.name, cap, shown)


def read_in(dir_fd: int, name: str, cap: int, shown: str | Path) -> bytes:
    """The bytes of the regular file ``name`` in the directory open as ``dir_fd``,
    never following a symlink there (one raises NotRegular): one open, however deep the
    directory. Raises as ``read_spot`` does."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "no such file", str(shown)) from None
    if not stat.S_ISREG(st.st_mode):
        raise NotRegular(shown, st.st_mode)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ToolError(f"{shown} changed while it was being opened; try again") from None
        raise
    try:
        return _read_open(fd, cap, shown)
    finally:
        os.close(fd)


def _read_open(fd: int, cap: int, shown: str | Path) -> bytes:
    """The bytes of the regular file open as ``fd``, at most ``cap``."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegular(shown, st.st_mode)
    chunks: list[bytes] = []
    total = 0
    while total <= cap:
        chunk = os.read(fd, min(_CHUNK, cap + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > cap:
        raise TooBig(f"{shown} is over the {cap} byte limit")
    return b"".join(chunks)


def read_regular(path: Path, cap: int, shown: str | Path | None = None) -> bytes:
    """Read the regular file at ``path`` (anywhere), at most ``cap`` bytes; see
    ``read_spot`` for what it raises."""
    shown = path if shown is None else shown
    with locate_for_reading(path, shown) as spot:
        return read_spot(spot, cap, shown)


def read_resolved(path: Path | str, cap: int, shown: str | Path | None = None) -> bytes:
    """``read_regular``, with the kernel resolving the path instead of a walk down from
    ``/`` in Python: what a search reads file after file, at a cost that does not grow
    with the file's depth (else a tree thousands of folders deep, a file in each, costs
    the square of its depth).

    The path is opened ``O_PATH`` (which opens no device and waits for no FIFO), the
    file it reached is named by ``/proc/self/fd`` (every symlink resolved: the refusals
    apply to that name, as ``read_regular``'s do), and only a regular file is opened for
    reading, through that same descriptor, so a path swapped meanwhile changes nothing.
    Without ``/proc``, or for a path longer than the kernel takes, it is
    ``read_regular``."""
    shown = path if shown is None else shown
    try:
        handle = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            return read_regular(Path(path), cap, shown)
        raise
    try:
        link = f"/proc/self/fd/{handle}"
        try:
            real = os.readlink(link)
        except OSError:
            return read_regular(Path(path), cap, shown)
        if not real.startswith("/"):
            return read_regular(Path(path), cap, shown)
        reason = guard.read_refusal(real)
        if reason is not None:
            raise ToolError(f"refusing to read {shown}: {reason}")
        st = os.fstat(handle)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(shown, st.st_mode)
        fd = os.open(link, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    finally:
        os.close(handle)
    try:
        return _read_open(fd, cap, shown)
    finally:
        os.close(fd)
