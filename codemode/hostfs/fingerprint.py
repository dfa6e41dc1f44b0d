"""What a path holds, as one string: the ``base`` a batch journal records of each path it
changes (``batch/changes.py``), compared again before it is applied and by the recovery
of a publish killed partway (``tools/store/publish_marker.py``)."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path


def chunks(path: Path) -> Iterator[bytes]:
    """A regular file's bytes a MiB at a time (a file of any size costs no more memory),
    never through a symlink or from a FIFO swapped in since it was looked at."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as source:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: no longer a regular file")
        while chunk := source.read(1 << 20):
            yield chunk


def of_bytes(data: bytes, symlink: bool = False) -> str:
    """What ``fingerprint`` says of a file holding ``data`` (a symlink's: its target,
    ``os.fsencode``d)."""
    return ("link:" if symlink else "file:") + hashlib.sha256(data).hexdigest()


def fingerprint(path: Path) -> str | None:
    """What ``path`` holds, as a journal's ``base``: None when nothing (or a directory)."""
    try:
        st = path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(st.st_mode):
        return of_bytes(os.fsencode(os.readlink(path)), symlink=True)
    if stat.S_ISREG(st.st_mode):
        digest = hashlib.sha256()
        for chunk in chunks(path):
            digest.update(chunk)
        return "file:" + digest.hexdigest()
    if stat.S_ISDIR(st.st_mode):
        return None
    return "other"
