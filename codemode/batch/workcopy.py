"""The isolated copy a repository's script runs in.

A batch script never runs in the repository itself: it runs in a copy, and what it
changed there comes back as a journal (``changes.py``) that the driver applies to the
repository all or nothing. A script that fails, a worker that dies and a Ray task that
is retried all leave the repository exactly as it was, whatever wrote the files (file
tools, commands, or programs those commands started).

The copy holds every file and symlink of the working copy, timestamps and modes kept
(so comparing stat results finds the unchanged ones cheaply). A git repository's
``.git`` is copied except its object store, which the copy borrows through git's own
``objects/info/alternates``: the objects are immutable, git in the copy reads them
from the original and writes new ones into the copy. Its ``hooks`` folder is left out:
git commands a script runs in the copy run no hook of the repository's. FIFOs, sockets
and devices are not copied.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

VCS_DIRS = frozenset({".git", ".hg", ".svn", ".jj"})


def make_copy(source: Path, dest: Path) -> None:
    """Copy the working copy at ``source`` to ``dest`` (which must not exist)."""
    os.makedirs(dest.parent, exist_ok=True)
    os.mkdir(dest)
    with os.scandir(source) as entries:
        for entry in entries:
            target = os.path.join(dest, entry.name)
            if entry.name == ".git" and entry.is_dir(follow_symlinks=False):
                _copy_git_dir(entry, target)
            else:
                _copy_entry(entry, target)
    _copy_stat(dest, os.stat(source))


# Written with os calls rather than shutil.copy2/copystat: a small repository's copy is
# a good part of its overhead in a batch, and those cost twice as much (path objects,
# extended attributes, which no script's result depends on).


def _copy_tree(source: str, dest: str, skip: frozenset[str] = frozenset()) -> None:
    with os.scandir(source) as entries:
        for entry in entries:
            if entry.name not in skip:
                _copy_entry(entry, os.path.join(dest, entry.name))


def _copy_entry(entry: os.DirEntry[str], target: str) -> None:
    info = entry.stat(follow_symlinks=False)
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        os.symlink(os.readlink(entry.path), target)
    elif stat.S_ISDIR(mode):
        os.mkdir(target, 0o700)
        _copy_tree(entry.path, target)
        _copy_stat(target, info)
    elif stat.S_ISREG(mode):
        _copy_file(entry.path, target, info)
    # FIFOs, sockets and devices: nothing a script edits, and copying one could block.


def _copy_file(source: str, target: str, info: os.stat_result) -> None:
    """The file's bytes, mode and timestamps (a symlink swapped in meanwhile fails)."""
    src = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            _copy_data(src, dst, info.st_size)
            # No setuid/setgid bit: the copy is owned by the user running the batch, its
            # bytes are the repository's (another user's, perhaps).
            os.fchmod(dst, stat.S_IMODE(info.st_mode) & 0o777)
            os.utime(dst, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _copy_data(src: int, dst: int, size: int) -> None:
    """The file's data, hole for hole: a sparse file of terabytes in a repository (a
    command of an earlier session can leave one) costs the copy no disk, where copying
    every byte would fill it."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(src, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                break  # a hole to the end
            raise
        end = min(os.lseek(src, start, os.SEEK_HOLE), size)
        os.lseek(dst, start, os.SEEK_SET)
        while start < end:
            sent = os.sendfile(dst, src, start, end - start)
            if sent == 0:  # shrunk meanwhile
                return
            start += sent
        offset = end
    os.ftruncate(dst, size)


def _copy_stat(path: str | Path, info: os.stat_result) -> None:
    # After the folder's entries: creating them changed its timestamps.
    os.chmod(path, stat.S_IMODE(info.st_mode))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


def _copy_git_dir(source: os.DirEntry[str], dest: str) -> None:
    os.mkdir(dest, 0o700)
    _copy_tree(source.path, dest, skip=frozenset({"objects", "hooks"}))
    info = os.path.join(dest, "objects", "info")
    os.makedirs(info)
    os.mkdir(os.path.join(dest, "objects", "pack"))
    with open(os.path.join(info, "alternates"), "w", encoding="utf-8") as alternates:
        alternates.write(str(Path(source.path, "objects").resolve()) + "\n")
    _copy_stat(dest, source.stat(follow_symlinks=False))
