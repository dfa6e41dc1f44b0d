"""``.codemode/`` folders (and ``.git`` entries) a command creates below a root's top.

A mount can hold the place of a missing ``.codemode/`` at the top of a root, but not at
every depth, and a later run started in ``sub/`` reads ``sub/.codemode/``. So the session
watches the writable roots with inotify: the folders that exist are walked once (their
``.codemode/`` folders are then bound read-only like the top one), every folder
created or moved in later is walked when its event arrives, and a ``.codemode`` entry
that appears is moved aside (``.codemode-refused-N``) once the command ends, with a line
in its output. Without inotify (no instance or watch left) every check walks the roots.

The same watch finds the ``.git`` entries below the tops (nested repositories): those
that exist are protected like the top one, new ones are checked by ``git_sanity``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from codemode.hostfs.writer import Refused, writer_at
from codemode.sandbox.protection.protected import CODEMODE_DIR, GIT_DIR
from codemode.tool_terms.errors import ToolError

IN_MODIFY, IN_MOVED_TO, IN_CREATE = 0x2, 0x80, 0x100
IN_DELETE_SELF, IN_MOVE_SELF, IN_Q_OVERFLOW, IN_IGNORED = 0x400, 0x800, 0x4000, 0x8000
IN_ONLYDIR, IN_DONT_FOLLOW, IN_ISDIR = 0x01000000, 0x02000000, 0x40000000
IN_NONBLOCK, IN_CLOEXEC = 0o4000, 0o2000000
_MASK = IN_CREATE | IN_MOVED_TO | IN_ONLYDIR | IN_DONT_FOLLOW
_EVENT = struct.Struct("iIII")


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


class CodemodeWatch:
    """Watches ``roots`` for new ``.codemode`` entries below their top level."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots = [Path(r) for r in roots]
        self.existing: set[Path] = set()  # .codemode folders below the tops, found so far
        self.git: set[Path] = set()  # .git entries below the tops, found so far
        self.new_git: set[Path] = set()  # found by the last drain()
        self._wd: dict[int, Path] = {}
        self._fd = -1
        self.complete = True  # False: inotify could not cover everything; walk each time
        libc = _libc()
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            self.complete = False
        else:
            self._fd = fd
            self._finalizer = weakref.finalize(self, os.close, fd)
        for root in self.roots:
            self.existing.update(self._walk(root, watch=self.complete))
        self.new_git.clear()  # those existing before the session are the user's

    def close(self) -> None:
        if self._fd >= 0:
            self._fd = -1
            # Closing an inotify instance that has watches waits for the kernel to retire
            # them (a grace period: 5-25 ms here) with nothing for us to do meanwhile: it
            # is done in the background while the rest of the session closes.
            threading.Thread(
                target=self._finalizer, name="codemode-inotify-close", daemon=True
            ).start()

    def _watch(self, d: Path, fd: int) -> None:
        if not self.complete or self._fd < 0:
            return
        # By the open descriptor (the folder just checked), not by its path again.
        wd = _libc().inotify_add_watch(self._fd, f"/proc/self/fd/{fd}".encode(),
                                       _MASK & ~IN_DONT_FOLLOW)
        if wd < 0:
            self.complete = False  # out of watches: fall back to walking
            return
        self._wd[wd] = d

    def _walk(self, top: Path, *, watch: bool) -> Iterator[Path]:
        """``.codemode`` entries at or below ``top`` (not the roots' own), adding watches.

        Each folder is opened by its path and kept only if it is the very folder its
        parent's listing showed (device and inode): one swapped meanwhile for a symlink,
        or reached through a folder above it that was, is never walked. (Resolving each
        path's links instead costs a look at every folder above it: a tree a command
        made 1500 deep took a million lstat calls, 35 s after each command.)"""
        if os.path.islink(top) or os.path.realpath(top) != str(top):
            return  # swapped for a symlink meanwhile: never follow one out
        stack: list[tuple[Path, tuple[int, int] | None]] = [(top, None)]
        while stack:
            d, expected = stack.pop()
            try:
                fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                st = os.fstat(fd)
                if expected is not None and (st.st_dev, st.st_ino) != expected:
                    continue
                if watch:
                    self._watch(d, fd)
                yield from self._entries(d, fd, stack)
            except OSError:
                continue
            finally:
                os.close(fd)

    def _entries(self, d: Path, fd: int, stack: list[tuple[Path, tuple[int, int] | None]],
                 ) -> Iterator[Path]:
        with os.scandir(fd) as listing:
            for e in listing:
                path = d / e.name
                if e.name == CODEMODE_DIR:
                    if d not in self.roots:
                        yield path
                    continue
                if e.name == GIT_DIR:
                    if d not in self.roots and path not in self.git:
                        self.git.add(path)
                        self.new_git.add(path)
                    continue  # .codemode is never read from inside a git directory
                with contextlib.suppress(OSError):
                    if e.is_dir(follow_symlinks=False):
                        st = e.stat(follow_symlinks=False)
                        stack.append((path, (st.st_dev, st.st_ino)))

    def drain(self) -> list[Path]:
        """New ``.codemode`` entries since the last call (folders created since are
        walked and watched as well)."""
        if not self.complete:
            found: set[Path] = set()
            self.git = {g for g in self.git if os.path.lexists(g)}
            for root in self.roots:
                found.update(self._walk(root, watch=False))
            walked = sorted(found - self.existing)
            self.existing = found - set(walked)
            return walked
        new: list[Path] = []
        for path, mask in self._events():
            if mask & IN_Q_OVERFLOW:
                self.complete = False
                return self.drain()
            if path.name == CODEMODE_DIR and path.parent not in self.roots:
                new.append(path)
            elif path.name == GIT_DIR:
                if path.parent not in self.roots:
                    self.git.add(path)
                    self.new_git.add(path)
            elif mask & IN_ISDIR:
                new.extend(self._walk(path, watch=True))
        if not self.complete:  # ran out of watches while adding the new folders
            return sorted(set(new) | set(self.drain()))
        return sorted(set(new))

    def _events(self) -> Iterable[tuple[Path, int]]:
        buf = bytearray()
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            buf += chunk
        i = 0
        while i + _EVENT.size <= len(buf):
            wd, mask, _cookie, length = _EVENT.unpack_from(buf, i)
            name = bytes(buf[i + _EVENT.size : i + _EVENT.size + length]).rstrip(b"\0")
            i += _EVENT.size + length
            if mask & IN_IGNORED:
                self._wd.pop(wd, None)
                continue
            if mask & IN_Q_OVERFLOW:
                yield Path("/"), mask
                continue
            parent = self._wd.get(wd)
            if parent is not None and name:
                yield parent / os.fsdecode(name), mask


def set_aside(paths: Iterable[Path], roots: Sequence[Path]) -> list[str]:
    """Move each new ``.codemode`` entry aside; one line per entry. Each is reached from
    the root of ``roots`` it lies under with no link followed (``writer``): a folder on
    the way that is a link now means the entry is not where it was found."""
    notes = []
    for p in paths:
        try:
            writer, rel = writer_at(p, roots)
            dest = writer.set_aside(rel, "-refused-")
        except (Refused, FileNotFoundError, NotADirectoryError):
            continue
        except (OSError, ToolError) as exc:
            notes.append(f"the command created {p}, which could not be moved aside: {exc}")
            continue
        notes.append(
            f"the command created {p}; moved it to {dest} (.codemode/ is read-only "
            "at every depth: the agent's own rules and settings)"
        )
    return notes
