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


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# a folder still to copy: its name and what it was
Subfolder = tuple[str, os.stat_result]


def make_copy(source: Path, dest: Path) -> None:
    """Copy the working copy at ``source`` to ``dest`` (which must not exist)."""
    os.makedirs(dest.parent, exist_ok=True)
    os.mkdir(dest)
    src = os.open(source, _DIR & ~os.O_NOFOLLOW)
    try:
        dst = os.open(dest, _DIR)
        try:
            _copy_tree(src, dst, git=(str(source), str(dest)))
        finally:
            os.close(dst)
    finally:
        os.close(src)
    _copy_stat(dest, os.stat(source))


# Written with os calls rather than shutil.copy2/copystat: a small repository's copy is
# a good part of its overhead in a batch, and those cost twice as much (path objects,
# extended attributes, which no script's result depends on).
#
# A loop, not recursion, and by descriptor, not by path: a command of an earlier session
# can leave a chain of folders thousands deep in a repository, which a recursive copy
# ends in RecursionError and a copy by path pays for with the square of its depth (and
# past PATH_MAX cannot name). One pair of descriptors is held, the folders being
# copied; the loop climbs back by "..", checking it reached the folder it came from.


def _copy_tree(
    src: int, dst: int, skip: frozenset[str] = frozenset(), git: tuple[str, str] | None = None
) -> None:
    """Copy the entries of the folder open as ``src`` into the one open as ``dst``
    (the caller's descriptors, left open). ``skip``: names left out at the top;
    ``git``: the top folders' paths, when a ``.git`` there is copied as a git
    directory (``_copy_git_dir``)."""
    s, d = os.dup(src), os.dup(dst)
    # from the top down: the folder's name and stat, its identity, subfolders to copy
    levels: list[tuple[str, os.stat_result | None, tuple[int, int], list[Subfolder]]] = []
    try:
        levels.append(("", None, _identity(s), _copy_entries(s, d, skip, git)))
        while True:
            pending = levels[-1][3]
            if pending:
                name, info = pending.pop()
                _copy_entry(name, info, s, d)  # the folder, made 0700 until it is done
                inner_s = os.open(name, _DIR, dir_fd=s)
                inner_d = os.open(name, _DIR, dir_fd=d)
                os.close(s)
                os.close(d)
                s, d = inner_s, inner_d
                levels.append((name, info, _identity(s), _copy_entries(s, d)))
                continue
            done, done_info, _, _ = levels.pop()
            if done_info is None:
                return
            up_s, up_d = os.open("..", _DIR, dir_fd=s), os.open("..", _DIR, dir_fd=d)
            os.close(s)
            os.close(d)
            s, d = up_s, up_d
            if _identity(s) != levels[-1][2]:
                raise OSError(errno.ESTALE, "the repository changed while it was copied")
            _copy_stat(done, done_info, d)
    finally:
        os.close(s)
        os.close(d)


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino)


def _copy_entries(
    src: int, dst: int, skip: frozenset[str] = frozenset(), git: tuple[str, str] | None = None
) -> list[Subfolder]:
    """Copy every entry of ``src`` but its subfolders into ``dst``; the subfolders."""
    with os.scandir(src) as listing:
        entries = list(listing)
    folders: list[Subfolder] = []
    for entry in entries:
        if entry.name in skip:
            continue
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            if git is not None and entry.name == ".git":
                _copy_git_dir(src, dst, info, *git)
            else:
                folders.append((entry.name, info))
        else:
            _copy_entry(entry.name, info, src, dst)
    return folders


def _copy_entry(name: str, info: os.stat_result, src: int, dst: int) -> None:
    """Copy ``name`` from the folder ``src`` to ``dst``; a folder is made empty."""
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        os.symlink(os.readlink(name, dir_fd=src), name, dir_fd=dst)
    elif stat.S_ISDIR(mode):
        os.mkdir(name, 0o700, dir_fd=dst)
    elif stat.S_ISREG(mode):
        _copy_file(name, info, src, dst)
    # FIFOs, sockets and devices: nothing a script edits, and copying one could block.


def _copy_file(name: str, info: os.stat_result, src_dir: int, dst_dir: int) -> None:
    """The file's bytes, mode and timestamps (a symlink swapped in meanwhile fails; a
    FIFO is not waited on, and left out)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    src = os.open(name, flags, dir_fd=src_dir)
    try:
        if not stat.S_ISREG(os.fstat(src).st_mode):
            return
        dst = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=dst_dir
        )
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


def _copy_stat(path: str | Path, info: os.stat_result, dir_fd: int | None = None) -> None:
    # After the folder's entries: creating them changed its timestamps.
    os.chmod(path, stat.S_IMODE(info.st_mode), dir_fd=dir_fd)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns), dir_fd=dir_fd)


def _copy_git_dir(src: int, into: int, info: os.stat_result, source: str, dest: str) -> None:
    """Copy the ``.git`` folder of ``src`` (at ``source``) into ``into`` (at ``dest``)."""
    os.mkdir(".git", 0o700, dir_fd=into)
    git_src = os.open(".git", _DIR, dir_fd=src)
    try:
        git_dst = os.open(".git", _DIR, dir_fd=into)
        try:
            _copy_tree(git_src, git_dst, skip=frozenset({"objects", "hooks"}))
        finally:
            os.close(git_dst)
    finally:
        os.close(git_src)
    git_dest = os.path.join(dest, ".git")
    objects_info = os.path.join(git_dest, "objects", "info")
    os.makedirs(objects_info)
    os.mkdir(os.path.join(git_dest, "objects", "pack"))
    with open(os.path.join(objects_info, "alternates"), "w", encoding="utf-8") as alternates:
        alternates.write(str(Path(source, ".git", "objects").resolve()) + "\n")
    _copy_stat(git_dest, info)
