"""The one writer codemode's own process uses for a workspace, repository or copy.

What the host writes into a folder a program shaped (a batch journal applied to a
repository, a copy set up for a script, an eval's workspace, a file restored by /undo)
goes through ``Writer``: every path is walked from the root's descriptor by
``beneath.Tree`` with no symlink followed, neither on the way nor in the last position
(a link there is replaced or removed, never written through), and every operation acts
on the held parent directory's descriptor, never on the path again. A file is written to
a temporary name that is random and created exclusively with ``O_NOFOLLOW`` (a name a
program planted first makes the write fail; it cannot redirect it), its mode is set on
that descriptor, and it is renamed over the target inside the same directory.

The same holds for what the host moves and removes after a confined command (a ``.git``
or ``.codemode`` set aside, a protected file put back, the scratch folder removed): a
move aside is a rename inside the held folder that never replaces what is there
(``renameat2(RENAME_NOREPLACE)``), a removal of a folder walks it by descriptor.
``writer_at`` gives the writer of the writable root an absolute path lies under.

The held folder is not looked up again after the operation. A program that renames it
aside meanwhile and puts a link in its place takes the write with it: the file lands in
that folder, wherever in the workspace it now is, never where the link leads (the
program can only move it where it may write itself, so it gains nothing it could not
do; ``tests/test_host_write_sandbox_attacks.py`` makes that swap before every step).

``tests/test_host_write_guard.py`` fails on any write-family call elsewhere in
``codemode/`` that is not on its commented allow-list.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from codemode.hostfs import beneath
from codemode.hostfs.beneath import (
    Missing,
    Refusal,
    Refused,
    Spot,
    Tree,
    default_mode,
    write_atomic,
)  # fmt: skip

__all__ = ["Refused", "Writer", "default_mode", "writer_at"]

_FLAGS_NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_NOFOLLOW = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_RENAME_NOREPLACE = 1
# Names tried by ``set_aside`` before giving up (a program planting them all first).
_MAX_ASIDE = 1000


class Writer:
    """Writes below ``root`` (its real path), following no symlink.

    ``refuse`` is asked about every path walked (a protected-path rule); callers with
    their own rule leave it off.
    Paths are given relative to the root, in POSIX form. Refused (a symlink on the way,
    a protected name), Missing (a folder on the way does not exist), and OSError from the
    operation itself are raised as they are.
    """

    def __init__(self, root: Path, *, refuse: Refusal | None = None) -> None:
        self.root = Path(os.path.realpath(root))
        self._tree = Tree([self.root], follow=False, refuse=refuse)

    def spot(
        self, rel: str, *, make_parents: bool = False, created: list[Path] | None = None
    ) -> Spot:
        """The held parent of ``rel`` and its last name (the caller closes it)."""
        return self._tree.locate(
            self.root / rel,
            follow_last=False,
            make_parents=make_parents,
            created=created,
            shown=rel,
        )

    def lstat(self, rel: str) -> os.stat_result | None:
        """What is at ``rel`` (a link itself), None if nothing or a folder on the way is
        missing or not a folder."""
        try:
            with self.spot(rel) as spot:
                return spot.lstat()
        except (Missing, NotADirectoryError):
            return None

    def look(
        self, rel: str, most: int | None = None
    ) -> tuple[os.stat_result | None, bytes | None, str | None]:
        """What is at ``rel``, in one walk: its ``lstat`` (None: nothing, or a folder on
        the way missing), a regular file's bytes, a symlink's target. A file of more
        than ``most`` bytes is not read: ``OSError(EFBIG)``."""
        try:
            spot = self.spot(rel)
        except (Missing, NotADirectoryError):
            return None, None, None
        with spot:
            st = spot.lstat()
            if st is not None and stat.S_ISLNK(st.st_mode):
                return st, None, os.readlink(spot.name, dir_fd=spot.parent)
            if st is None or not stat.S_ISREG(st.st_mode):
                return st, None, None
            if most is not None and st.st_size > most:
                raise OSError(errno.EFBIG, f"more than {most} bytes", rel)
            fd = os.open(spot.name, _FLAGS_NOFOLLOW, dir_fd=spot.parent)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the look
                raise OSError(errno.EINVAL, "not a regular file", rel)
            chunks, size = [], 0
            while chunk := os.read(fd, 1 << 20):
                size += len(chunk)
                if most is not None and size > most:  # (it may have grown since the lstat)
                    raise OSError(errno.EFBIG, f"more than {most} bytes", rel)
                chunks.append(chunk)
            return st, b"".join(chunks), None
        finally:
            os.close(fd)

    def write(
        self, rel: str, data: bytes, mode: int | None = None, *,
        make_parents: bool = False, created: list[Path] | None = None,
    ) -> bool:  # fmt: skip
        """Replace (or create) the file at ``rel`` with ``data``; True if it was new.
        ``mode`` None keeps an existing file's permission bits (else the umask's)."""
        with self.spot(rel, make_parents=make_parents, created=created) as spot:
            return write_atomic(spot, data, mode)

    def symlink(self, rel: str, target: str) -> None:
        """Create the symlink ``rel`` -> ``target`` (nothing may be at ``rel``)."""
        with self.spot(rel) as spot:
            beneath.symlink(spot, target)

    def mkdir(self, rel: str, mode: int = 0o777, *, make_parents: bool = False) -> None:
        """Create the folder ``rel`` (nothing may be there); ``mode`` is given to
        ``mkdir`` (the umask applies), ``make_parents`` makes the folders above it."""
        with self.spot(rel, make_parents=make_parents) as spot:
            beneath.mkdir(spot, mode)

    def names(self, rel: str) -> list[str]:
        """The entries of the folder ``rel`` (a symlink there is refused, not listed)."""
        with self.spot(rel) as spot:
            fd = os.open(spot.name, _DIR_NOFOLLOW, dir_fd=spot.parent)
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)

    def rename(self, rel: str, new_name: str) -> None:
        """Rename ``rel`` to ``new_name`` in the same folder; raises FileExistsError
        when something is there already (it is never replaced)."""
        if "/" in new_name or new_name in ("", ".", ".."):
            raise ValueError(f"not a name: {new_name!r}")
        with self.spot(rel) as spot:
            _rename_noreplace(spot.parent, spot.name, new_name)

    def set_aside(self, rel: str, mark: str) -> str:
        """Rename ``rel`` to the first free ``<name><mark><N>`` beside it (N from 1);
        returns that name. A name a program planted first is passed over, never
        replaced or followed."""
        with self.spot(rel) as spot:
            for n in range(1, _MAX_ASIDE + 1):
                dest = f"{spot.name}{mark}{n}"
                try:
                    _rename_noreplace(spot.parent, spot.name, dest)
                except FileExistsError:
                    continue
                return dest
        raise FileExistsError(errno.EEXIST, f"{_MAX_ASIDE} names taken beside it", rel)

    def remove_tree(self, rel: str) -> None:
        """Remove whatever is at ``rel``, a folder with everything below it (walked by
        descriptor: a link inside is removed, never followed); nothing there is not an
        error."""
        with self.spot(rel) as spot:
            st = spot.lstat()
            if st is None:
                return
            if stat.S_ISDIR(st.st_mode):
                remove_folder(spot.parent, spot.name)
            else:
                beneath.unlink(spot)

    def rmdir(self, rel: str) -> None:
        with self.spot(rel) as spot:
            beneath.rmdir(spot)

    def remove(self, rel: str) -> None:
        """Remove whatever entry is at ``rel`` (an empty folder included); nothing there
        is not an error."""
        with self.spot(rel) as spot:
            st = spot.lstat()
            if st is None:
                return
            if stat.S_ISDIR(st.st_mode):
                beneath.rmdir(spot)
            else:
                beneath.unlink(spot)

    def copy_in(self, source: Path) -> None:
        """Copy the folder ``source``'s contents into the root: files with their
        permission bits, folders, and symlinks as links (never followed, on either side;
        a FIFO, socket or device is left out)."""
        src = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self._copy_folder(src, "")
        finally:
            os.close(src)

    def _copy_folder(self, src: int, rel: str) -> None:
        for name in sorted(os.listdir(src)):
            below = f"{rel}/{name}" if rel else name
            st = os.stat(name, dir_fd=src, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                if self.lstat(below) is not None:
                    self.remove(below)
                self.symlink(below, os.readlink(name, dir_fd=src))
            elif stat.S_ISDIR(st.st_mode):
                old = self.lstat(below)
                if old is None or not stat.S_ISDIR(old.st_mode):
                    if old is not None:
                        self.remove(below)
                    self.mkdir(below)
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                             dir_fd=src)  # fmt: skip
                try:
                    self._copy_folder(fd, below)
                finally:
                    os.close(fd)
            elif stat.S_ISREG(st.st_mode):
                fd = os.open(name, _FLAGS_NOFOLLOW, dir_fd=src)
                try:
                    with os.fdopen(fd, "rb", closefd=False) as file:
                        data = file.read()
                finally:
                    os.close(fd)
                self.write(below, data, stat.S_IMODE(st.st_mode))


def writer_at(path: Path, roots: Sequence[Path]) -> tuple[Writer, str]:
    """The writer of the root ``path`` lies under (the deepest of ``roots``, which must
    be real paths no program can move: writable roots, codemode's own folders) and
    ``path`` relative to it. A path not under one as written (a home reached through a
    link, ``/home`` -> ``/usr/home``) is taken where its folder really is, if that is
    under one; else Refused: nothing is done outside the roots."""
    path = Path(os.path.normpath(path))
    found = _under(path, roots)
    if found is None:
        # The real folder is then walked from its root with no link followed, so a
        # link a program put on the way can at most lead to another place in a root.
        path = Path(os.path.realpath(path.parent)) / path.name
        found = _under(path, roots)
    if found is None:
        raise Refused(f"refusing to change {path}: outside the writable roots")
    return Writer(found), path.relative_to(found).as_posix()


def _under(path: Path, roots: Sequence[Path]) -> Path | None:
    best: Path | None = None
    for root in roots:
        root = Path(os.path.normpath(root))
        if path != root and path.is_relative_to(root):
            if best is None or len(root.parts) > len(best.parts):
                best = root
    return best


@cache
def _renameat2() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except AttributeError:  # a C library without it (glibc < 2.28)
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def _rename_noreplace(dir_fd: int, old: str, new: str) -> None:
    """Rename ``old`` to ``new`` inside the folder ``dir_fd``, failing with
    FileExistsError when ``new`` exists (whatever it is: a link, an empty folder)."""
    fn = _renameat2()
    if fn is not None:
        if fn(dir_fd, os.fsencode(old), dir_fd, os.fsencode(new), _RENAME_NOREPLACE) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.ENOSYS, errno.EINVAL):
            raise OSError(err, os.strerror(err), old)
    # No renameat2 here (or not on this file system): look, then rename. A name planted
    # between the two is replaced only when it is a file over a file or an empty folder
    # over a folder; a link is still never followed (rename acts on the entry).
    try:
        os.stat(new, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        os.rename(old, new, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return
    raise FileExistsError(errno.EEXIST, "exists", new)


def remove_folder(parent: int, name: str) -> None:
    """Remove the folder ``name`` in the directory open as ``parent``, everything below
    it included, walked by descriptor with no link followed (a link inside is removed).

    Not ``shutil.rmtree``: in Python 3.11 it recurses once per level, and a program can
    make a tree deeper than the interpreter's recursion limit (``RecursionError``).
    Here a loop holds one descriptor, that of the folder being emptied, and climbs back
    by ``..``, checking that it reached the very folder it came down from (a program
    that moves a folder meanwhile makes the removal fail, never act elsewhere). Each
    folder is listed once: its subfolders are remembered by name. Raises OSError (a
    folder that cannot be emptied, one filled again meanwhile: ENOTEMPTY)."""
    fd = os.open(name, _DIR_NOFOLLOW, dir_fd=parent)
    # from the top down: (name, (st_dev, st_ino), subfolders still to remove)
    levels: list[tuple[str, tuple[int, int], list[str]]] = []
    try:
        levels.append((name, _identity(fd), _empty_but_folders(fd)))
        while levels:
            below = levels[-1][2]
            if below:
                child = below.pop()
                try:
                    inner = os.open(child, _DIR_NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    os.unlink(child, dir_fd=fd)  # swapped for a link or file meanwhile
                    continue
                os.close(fd)
                fd = inner
                levels.append((child, _identity(fd), _empty_but_folders(fd)))
                continue
            done = levels.pop()[0]
            if not levels:
                os.close(fd)
                fd = -1
                os.rmdir(done, dir_fd=parent)
                return
            up = os.open("..", _DIR_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = up
            if _identity(fd) != levels[-1][1]:
                raise OSError(errno.ESTALE, "a folder was moved while it was being removed")
            os.rmdir(done, dir_fd=fd)
    finally:
        if fd >= 0:
            os.close(fd)


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino)


def _empty_but_folders(fd: int) -> list[str]:
    """Remove every entry of the folder open as ``fd`` but its subfolders; their names."""
    with os.scandir(fd) as listing:
        entries = list(listing)  # listed whole first: a folder changing under getdents
    folders: list[str] = []  # can skip entries
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            folders.append(entry.name)
        else:
            os.unlink(entry.name, dir_fd=fd)
    return folders
