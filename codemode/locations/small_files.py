"""Reading a small settings or instructions file that a repository (or a command of an
earlier session) may have shaped: hooks files, skills, rules, config.

Read plainly, such a file hangs or exhausts the reader, and it is read by codemode's own
process when a session starts: a FIFO in its place waits for a writer for good, and a
symlink to ``/dev/zero`` or a sparse file of terabytes is read until memory runs out.
``read_text`` opens it without waiting (``O_NONBLOCK``), takes a regular file only
(links followed: ``CLAUDE.md`` may well link to ``AGENTS.md``) that is not the kernel's
(``/proc/self/environ`` is a regular file: a link to it would be this process's keys),
reads at most ``cap`` bytes, and raises ``OSError`` like any unreadable file, with a
reason the caller's message shows ("not a regular file", "larger than 1 MiB").
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

CAP = 1 << 20


def read_text(path: Path | str, cap: int = CAP, errors: str = "strict") -> str:
    """The UTF-8 text of ``path``; raises OSError (FileNotFoundError when absent) or
    UnicodeDecodeError (with ``errors="strict"``)."""
    return read_bytes(path, cap).decode("utf-8", errors)


def read_bytes(path: Path | str, cap: int = CAP, *, truncate: bool = False) -> bytes:
    """The bytes of ``path``; past ``cap``, the first ``cap`` of them (``truncate``) or
    OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        # /proc/self/environ is a regular file too: a link to it would hand the reader
        # this process's environment (its keys).
        if _KERNEL.match(_real(fd, path)):
            raise OSError(errno.EACCES, "a file of the kernel's, not a settings file",
                          str(path))
        data = f.read(cap + 1)
    if len(data) > cap:
        if truncate:
            return data[:cap]
        raise OSError(errno.EFBIG, f"larger than {_size(cap)}", str(path))
    return data


_KERNEL = re.compile(r"^/(proc|sys|dev)(/|$)")


def _real(fd: int, path: Path | str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")  # (every link resolved)
    except OSError:
        return os.path.realpath(path)  # (no /proc)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and not n % (1 << 20) else f"{n} bytes"
