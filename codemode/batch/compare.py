"""Comparing the repository with the copy a script ran in, by descriptor.

``compute`` (``changes.compute``) walks both trees at once from their top folders'
descriptors: each folder is opened relative to the one above it with ``O_NOFOLLOW``,
every file is read and every link read from the folder's descriptor, and the walk
climbs back by ``..``, checking it reached the very folder it came down from. So the
cost of a folder does not grow with its depth (a walk by full path pays the square of
it), a folder past ``PATH_MAX`` is compared like any other (a walk by path cannot name
it, and left its changes out of the journal without a word), and a link a script or the
repository put on the way is never followed. Only the folders being compared are held
open; a subtree on one side only (a folder made, or removed) is walked the same way.

Both trees were shaped by something hostile (the script; whatever wrote the
repository), so the walk is bounded: ``MAX_DEPTH`` folders deep, ``MAX_ENTRIES``
entries, ``COMPARE_BYTES`` read to tell a touched file from a changed one, and the
journal's own ``JOURNAL_BYTES`` (new contents and the paths that name them). Past one,
``TooLarge`` says which: the repository fails with ``error_kind: "limit"``, nothing
applied.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import zip_longest
from typing import TYPE_CHECKING, Literal

from codemode.batch.journal_entry import JOURNAL_BYTES, Change, Kind, TooLarge
from codemode.batch.workcopy import VCS_DIRS

if TYPE_CHECKING:
    from pathlib import Path

# Deeper than any real project (a hostile one can go on for ever: each level of a
# change costs the apply one more descriptor step, a change per level the square).
MAX_DEPTH = 2048
# Files, links and folders listed, both trees together (a listing is held while its
# folder is compared: tens of millions of entries would hold gigabytes).
MAX_ENTRIES = 5_000_000
# Bytes read to compare files whose size matches but timestamp does not (`touch` over a
# terabyte sparse file would otherwise read it twice, at disk speed).
COMPARE_BYTES = 16 << 30

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_MIB = 1 << 20


@dataclass(frozen=True)
class _Seen:
    kind: Literal["file", "symlink", "dir"]
    mode: int
    size: int
    mtime_ns: int


def compute(base: Path, work: Path) -> list[Change]:
    """The journal that turns ``base`` into ``work``: deletions (deepest first), then
    new directories (shallowest first), then files and symlinks (in path order)."""
    walk = _Compare()
    fds = [os.open(base, _DIR & ~os.O_NOFOLLOW), -1]
    try:
        fds[1] = os.open(work, _DIR & ~os.O_NOFOLLOW)
    except BaseException:
        os.close(fds[0])
        raise
    walk.walk(fds, [], walk.both)
    deleted = sorted(walk.deleted, key=lambda c: (-_depth(c.path), c.path))
    made = sorted(walk.made, key=lambda c: (_depth(c.path), c.path))
    return deleted + made + sorted(walk.written, key=lambda c: c.path)


def _depth(path: str) -> int:
    return path.count("/")


class _Compare:
    def __init__(self) -> None:
        self.deleted: list[Change] = []
        self.made: list[Change] = []
        self.written: list[Change] = []
        self.budget = JOURNAL_BYTES  # new bytes (contents, paths) the journal may take
        self.compare_left = COMPARE_BYTES
        self.entries = 0

    # --- the walk ---------------------------------------------------------------

    def walk(
        self, fds: list[int], prefix: list[str],
        visit: Callable[[list[int], list[str]], list[str]],
    ) -> None:  # fmt: skip
        """Walk the folders open as ``fds`` (owned: closed here), the same folder of
        one or both trees: ``visit`` handles a folder's entries and returns the
        subfolders to enter (present in every one of ``fds``)."""
        prefix = list(prefix)
        levels: list[tuple[list[tuple[int, int]], list[str]]] = []
        try:
            levels.append((_ids(fds), visit(fds, prefix)))
            while levels:
                pending = levels[-1][1]
                if pending:
                    child = pending.pop()
                    self._deeper(prefix, child)
                    inner = _open_all(child, fds)
                    _close(fds)
                    fds[:] = inner
                    prefix.append(child)
                    levels.append((_ids(fds), visit(fds, prefix)))
                    continue
                levels.pop()
                if not levels:
                    return
                up = _open_all("..", fds)
                _close(fds)
                fds[:] = up
                prefix.pop()
                if _ids(fds) != levels[-1][0]:
                    raise OSError(errno.ESTALE, "a folder was moved while it was compared")
        finally:
            _close(fds)

    def _deeper(self, prefix: list[str], child: str) -> None:
        if len(prefix) + 1 > MAX_DEPTH:
            where = "/".join([*prefix[:3], "...", child])
            raise TooLarge(f"the tree is more than {MAX_DEPTH} folders deep (at {where}): "
                           "too deep to compare and apply")  # fmt: skip

    def _list(self, fd: int) -> dict[str, _Seen]:
        found: dict[str, _Seen] = {}
        with os.scandir(fd) as listing:
            for entry in listing:
                self.entries += 1
                if self.entries > MAX_ENTRIES:
                    raise TooLarge(f"the repository and its copy hold more than {MAX_ENTRIES}"
                                   " files and folders: too many to compare")  # fmt: skip
                if entry.name in VCS_DIRS:
                    continue
                st = entry.stat(follow_symlinks=False)
                kind = _kind(st.st_mode)
                if kind is not None:
                    found[entry.name] = _Seen(kind, st.st_mode, st.st_size, st.st_mtime_ns)
        return found

    def both(self, fds: list[int], prefix: list[str]) -> list[str]:
        """A folder present in both trees: every difference in it; the subfolders
        present in both, to enter."""
        b, w = fds
        old, new = self._list(b), self._list(w)
        folders: list[str] = []
        for name in sorted(old.keys() | new.keys()):
            o, n = old.get(name), new.get(name)
            if o is not None and n is not None and o.kind == n.kind == "dir":
                folders.append(name)
                continue
            if o is not None and n is not None and self._same(b, w, name, o, n):
                continue
            path = "/".join([*prefix, name])
            if (o is not None and o.kind == "dir") or (n is not None and n.kind == "dir"):
                self._deeper(prefix, name)
            if o is not None and o.kind == "dir":
                self.walk([os.open(name, _DIR, dir_fd=b)], [*prefix, name], self.removed)
                self.deleted.append(self._change(path, "rmdir"))
            elif o is not None and (n is None or n.kind == "dir"):
                self.deleted.append(self._change(path, "deleted", base=_print(b, name)))
            if n is None:
                continue
            if n.kind == "dir":
                self.made.append(self._change(path, "mkdir"))
                self.walk([os.open(name, _DIR, dir_fd=w)], [*prefix, name], self.added)
                continue
            old_print = _print(b, name) if o is not None and o.kind != "dir" else None
            self.written.append(self._new(w, name, n, path, old_print))
        return folders

    def removed(self, fds: list[int], prefix: list[str]) -> list[str]:
        """A folder of the repository that the copy no longer has: all of it goes."""
        folders: list[str] = []
        for name, seen in sorted(self._list(fds[0]).items()):
            path = "/".join([*prefix, name])
            if seen.kind == "dir":
                folders.append(name)
                self.deleted.append(self._change(path, "rmdir"))
            else:
                self.deleted.append(self._change(path, "deleted", base=_print(fds[0], name)))
        return folders

    def added(self, fds: list[int], prefix: list[str]) -> list[str]:
        """A folder only the copy has: all of it is new."""
        folders: list[str] = []
        for name, seen in sorted(self._list(fds[0]).items()):
            path = "/".join([*prefix, name])
            if seen.kind == "dir":
                folders.append(name)
                self.made.append(self._change(path, "mkdir"))
            else:
                self.written.append(self._new(fds[0], name, seen, path, None))
        return folders

    # --- the entries --------------------------------------------------------------

    def _change(self, path: str, kind: Kind, *, base: str | None = None) -> Change:
        self._charge(len(path), path)
        return Change(path, kind, base=base)

    def _charge(self, size: int, path: str) -> None:
        self.budget -= size
        if self.budget < 0:
            raise TooLarge(f"the changes are too large to apply: more than {JOURNAL_BYTES >> 20} "
                           f"MiB of new file contents (at {_short(path)})")  # fmt: skip

    def _new(self, w: int, name: str, seen: _Seen, path: str, base: str | None) -> Change:
        """The copy's file or link at ``name`` as a journal entry."""
        self._charge(len(path), path)
        if seen.kind == "symlink":
            target = os.fsencode(os.readlink(name, dir_fd=w))
            return Change(path, "symlink", target, base=base)
        kept: list[bytes] = []
        size = 0
        if seen.size <= self.budget:
            for chunk in _chunks(w, name):  # (it may have grown since it was listed)
                size += len(chunk)
                if size > self.budget:
                    break
                kept.append(chunk)
        self._charge(max(size, seen.size), path)
        return Change(path, "file", b"".join(kept), _exec_bit(seen.mode), base=base)

    def _same(self, b: int, w: int, name: str, old: _Seen, new: _Seen) -> bool:
        if old.kind != new.kind:
            return False
        if old.kind == "symlink":
            return os.readlink(name, dir_fd=b) == os.readlink(name, dir_fd=w)
        if _exec_bit(old.mode) != _exec_bit(new.mode) or old.size != new.size:
            return False
        if old.mtime_ns == new.mtime_ns:
            return True  # the copy keeps timestamps; a write changes them
        self.compare_left -= old.size
        if self.compare_left < 0:
            raise TooLarge(f"more than {COMPARE_BYTES >> 30} GiB of files were touched "
                           f"without being rewritten (at {name}): too much to compare")  # fmt: skip
        # A MiB at a time: a large file touched but not changed costs no memory.
        return all(x == y for x, y in zip_longest(_chunks(b, name), _chunks(w, name)))


def _kind(mode: int) -> Literal["file", "symlink", "dir"] | None:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return None  # FIFOs, sockets, devices: never copied, never part of a journal


def _exec_bit(mode: int) -> bool:
    return bool(mode & stat.S_IXUSR)


def _chunks(dir_fd: int, name: str) -> Iterator[bytes]:
    """A regular file's bytes a MiB at a time, never through a link or from a FIFO
    swapped in since it was listed."""
    fd = os.open(name, _FILE, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as source:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "no longer a regular file", name)
        while chunk := source.read(_MIB):
            yield chunk


def _print(dir_fd: int, name: str) -> str | None:
    """What ``hostfs.fingerprint`` says of ``name`` in the folder ``dir_fd``."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return "link:" + hashlib.sha256(os.fsencode(os.readlink(name, dir_fd=dir_fd))).hexdigest()
    if stat.S_ISREG(st.st_mode):
        digest = hashlib.sha256()
        for chunk in _chunks(dir_fd, name):
            digest.update(chunk)
        return "file:" + digest.hexdigest()
    return None if stat.S_ISDIR(st.st_mode) else "other"


def _open_all(name: str, fds: list[int]) -> list[int]:
    opened: list[int] = []
    try:
        for fd in fds:
            opened.append(os.open(name, _DIR, dir_fd=fd))
    except OSError as exc:
        _close(opened)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            raise OSError(errno.ESTALE, f"{name} changed while it was compared") from None
        raise
    return opened


def _ids(fds: list[int]) -> list[tuple[int, int]]:
    return [(st.st_dev, st.st_ino) for st in map(os.fstat, fds)]


def _close(fds: list[int]) -> None:
    for fd in fds:
        if fd >= 0:
            os.close(fd)
    fds[:] = []


def _short(path: str) -> str:
    return path if len(path) <= 200 else f"{path[:90]}...{path[-90:]}"
