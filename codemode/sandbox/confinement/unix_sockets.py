"""Unix sockets a confined command may reach.

By default none: the seccomp filter denies ``socket(AF_UNIX, ...)`` in the restricted
modes, which covers sockets by path and abstract ones alike. ``[sandbox]
allow_unix_sockets`` lifts that rule; bubblewrap then covers every *other* socket file
the kernel lists as bound (``/proc/net/unix``) with an empty read-only file, so only the
listed ones stay reachable, and its network namespace keeps abstract sockets out unless
``network_access`` is on.

The kernel lists the name a socket was *bound* as: one renamed or hard-linked to
another name afterwards (a server that binds ``x.sock.PID`` and renames it over
``x.sock``; OpenSSH's control sockets) keeps its old name there. So the rule is by
folder, not by name: every socket file in a folder where a socket was bound is covered,
whatever its name now. The list is made again for every command (a socket bound since
the last one is covered from the next; a command server whose covers differ is
replaced).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path


def bound_socket_paths() -> list[Path]:
    """Paths of the Unix sockets bound in this network namespace."""
    try:
        lines = Path("/proc/net/unix").read_text(errors="replace").splitlines()[1:]
    except OSError:
        return []
    out: list[Path] = []
    for line in lines:
        fields = line.split(maxsplit=7)
        if len(fields) == 8 and fields[7].startswith("/"):
            out.append(Path(fields[7]))
    return out


def socket_files() -> list[str]:
    """Every socket file (real path) in the folders where the kernel lists a socket as
    bound: the bound names, and whatever a socket bound there was renamed or linked to
    beside it."""
    folders = dict.fromkeys(os.path.realpath(p.parent) for p in bound_socket_paths())
    out: dict[str, None] = {}
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            try:
                # files, folders and links are told apart by the listing itself (no
                # system call each: /tmp can hold thousands); the rest is looked at
                if e.is_file(follow_symlinks=False) or e.is_dir(follow_symlinks=False):
                    continue
                if e.is_symlink():
                    continue
                if stat.S_ISSOCK(e.stat(follow_symlinks=False).st_mode):
                    out[os.path.join(folder, e.name)] = None
            except OSError:
                continue
    return list(out)


def to_hide(allowed: Iterable[Path]) -> list[Path]:
    """Socket files to cover so that only ``allowed`` stay reachable."""
    keep = {os.path.realpath(os.path.expanduser(p)) for p in allowed}
    seen: set[str] = set()
    out: list[Path] = []
    for real in socket_files():
        if real in keep or real in seen:
            continue
        try:
            if not stat.S_ISSOCK(os.lstat(real).st_mode) or not _reachable(Path(real)):
                continue
        except OSError:
            continue
        seen.add(real)
        out.append(Path(real))
    return out


def _reachable(sock: Path) -> bool:
    """Whether a process with this uid and groups but no capabilities could connect to
    ``sock`` (search permission on every folder above it, write permission on it).
    Unreachable ones need no cover, and bubblewrap could not bind over them. An ACL
    anywhere on the way counts as reachable, to err on the side of covering."""
    uid, gids = os.getuid(), {os.getgid(), *os.getgroups()}

    def allows(p: Path, bit: int) -> bool:
        st = os.stat(p)
        if _has_acl(p):
            return True
        shift = 6 if st.st_uid == uid else 3 if st.st_gid in gids else 0
        return bool((st.st_mode >> shift) & bit)

    try:
        return all(allows(d, 1) for d in sock.parents) and allows(sock, 2)
    except OSError:
        return True


def _has_acl(p: Path) -> bool:
    try:
        return "system.posix_acl_access" in os.listxattr(p)
    except OSError:
        return False
