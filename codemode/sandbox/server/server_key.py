"""What a command server was started with: a command whose key differs needs another.

A server is reused only while nothing it was started with has changed: the options
(writable roots, the protected entries found in them, network, sockets) and the identity
(device, inode, type) of every path bound or covered (see ``command_servers``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

# Options that take a host path as their first argument (the bind source or the covered
# folder): their identity is part of the key.
_PATH_OPTIONS = frozenset({"--bind", "--ro-bind", "--tmpfs", "--remount-ro", "--dev-bind"})


def _identity(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode)


@dataclass(frozen=True)
class ServerKey:
    """What a server was started with; a command whose key differs needs another."""

    options: tuple[str, ...]
    prefix: tuple[str, ...]
    seccomp: bytes | None
    identities: tuple[tuple[int, int, int] | None, ...]

    @classmethod
    def of(cls, options: Sequence[str], prefix: Sequence[str], seccomp: bytes | None) -> ServerKey:
        paths = [options[i + 1] for i, o in enumerate(options[:-1]) if o in _PATH_OPTIONS]
        return cls(tuple(options), tuple(prefix), seccomp, tuple(_identity(p) for p in paths))

    def covers_gone(self) -> bool:
        """Whether a socket file this key covers has gone since the key was made.

        bubblewrap must then create the file to bind over, in a tree that is read-only
        by then, and fails: the sandbox cannot start, for a reason that is no fault of
        the machine (a program removed its socket meanwhile). A key made again lists
        only the sockets there now."""
        opts = self.options
        return any(
            opts[i] == "--ro-bind" and opts[i + 1] == "/dev/null"
            and not os.path.lexists(opts[i + 2])
            for i in range(len(opts) - 2)
        )  # fmt: skip
