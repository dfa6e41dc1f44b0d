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

``tests/test_host_write_guard.py`` fails on any write-family call elsewhere in
``codemode/`` that is not on its commented allow-list.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from codemode.tools.fs import beneath
from codemode.tools.fs.beneath import Missing, Refused, Spot, Tree, default_mode, write_atomic

__all__ = ["Refused", "Writer", "default_mode"]

_FLAGS_NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Writer:
    """Writes below ``root`` (its real path), following no symlink.

    ``guard`` also applies the file tools' protected-path rule (``guard.write_refusal``:
    no ``.git`` or ``.codemode`` component); callers with their own rule leave it off.
    Paths are given relative to the root, in POSIX form. Refused (a symlink on the way,
    a protected name), Missing (a folder on the way does not exist), and OSError from the
    operation itself are raised as they are.
    """

    def __init__(self, root: Path, *, guard: bool = False) -> None:
        self.root = Path(os.path.realpath(root))
        self._tree = Tree([self.root], follow=False, writing=guard)

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

    def look(self, rel: str) -> tuple[os.stat_result | None, bytes | None, str | None]:
        """What is at ``rel``, in one walk: its ``lstat`` (None: nothing, or a folder on
        the way missing), a regular file's bytes, a symlink's target."""
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
            fd = os.open(spot.name, _FLAGS_NOFOLLOW, dir_fd=spot.parent)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the look
                raise OSError(errno.EINVAL, "not a regular file", rel)
            chunks = []
            while chunk := os.read(fd, 1 << 20):
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

    def mkdir(self, rel: str, mode: int = 0o777) -> None:
        with self.spot(rel) as spot:
            beneath.mkdir(spot, mode)

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
