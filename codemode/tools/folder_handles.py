"""The open descriptors of the folders a depth-first walk is inside.

Each folder is opened relative to its parent's descriptor, one name looked up, instead
of by its whole path, which the kernel looks up one component at a time: in a tree
thousands of folders deep, opening every folder by path costs the square of the depth.
Holding a descriptor for every folder on the way down would run out of them (the usual
limit is 1,024), so only the innermost ``_RECENT`` are held, and above them one level in
``_EVERY``: a folder whose descriptor was let go is opened again from the nearest held
one, at most ``_EVERY`` names away.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

_RECENT = 16
_EVERY = 16


@dataclass
class _Held:
    key: object
    level: int
    name: str
    fd: int  # -1: let go


class FolderHandles:
    """The chain of folders from the walk's root to the one being walked."""

    def __init__(self, flags: int) -> None:
        self._flags = flags
        self._chain: list[_Held] = []

    def enter(self, key: object, parent: object | None, name: str, path: str) -> int:
        """A descriptor of the folder ``key`` (named ``name`` in ``parent``, at ``path``),
        held until the walk leaves it; ``parent`` None: the walk's root, opened by
        ``path``. Below the root a symlink is not followed (a folder swapped for one
        since it was listed is skipped). Raises OSError."""
        while self._chain and self._chain[-1].key is not parent:
            self._close(self._chain.pop())
        if not self._chain:
            fd = os.open(path, self._flags if parent is None else self._flags | os.O_NOFOLLOW)
            self._chain.append(_Held(key, 0, name, fd))
            return fd
        fd = os.open(name, self._flags | os.O_NOFOLLOW, dir_fd=self._parent_fd())
        self._chain.append(_Held(key, self._chain[-1].level + 1, name, fd))
        if len(self._chain) > _RECENT:
            older = self._chain[-_RECENT - 1]
            if older.level % _EVERY:
                self._close(older)
        return fd

    def _parent_fd(self) -> int:
        top = self._chain[-1]
        if top.fd < 0:
            at = len(self._chain) - 1
            while self._chain[at].fd < 0:  # the root is always held
                at -= 1
            names = "/".join(held.name for held in self._chain[at + 1 :])
            top.fd = os.open(names, self._flags | os.O_NOFOLLOW, dir_fd=self._chain[at].fd)
        return top.fd

    def close(self) -> None:
        while self._chain:
            self._close(self._chain.pop())

    @staticmethod
    def _close(held: _Held) -> None:
        if held.fd >= 0:
            os.close(held.fd)
            held.fd = -1
