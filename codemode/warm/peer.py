"""Who a warm server serves: a process it could not tell from itself.

A forked process has the server's credentials, namespaces and confinement, not the
caller's. So the caller must be of this user (``SO_PEERCRED``) and have exactly the
server's groups, capabilities, priority, scheduling policy, I/O priority, namespaces and
confinement (seccomp filters, no-new-privileges), CPU and memory-node affinity, control
group, OOM score and personality: a process inside a sandbox (its own namespaces, a
seccomp filter) that reached the socket gets refused, and starts cold, still confined, as
it would have without a server. The same for a process that dropped a group or a
capability, or was started with `taskset`, `choom`, `chrt`, `ionice` or `setarch -R`.
"""

from __future__ import annotations

import os
import socket
import struct

from codemode.warm import place

# What of a process is compared (``place.process_facts``: the caller's client compares
# the server's with its own likewise).
facts = place.process_facts


def peer_pid(conn: socket.socket) -> tuple[int, int]:
    """The peer's (pid, uid)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    pid, uid, _ = struct.unpack("3i", creds)
    return pid, uid


def other_user(conn: socket.socket) -> str | None:
    """Why the peer may not be served by its user alone (one call: asked first, before
    anything of the connection is handed on), or None."""
    try:
        _, uid = peer_pid(conn)
    except OSError as exc:
        return f"no peer credentials ({exc})"
    return None if uid == os.geteuid() else f"another user (uid {uid})"


def differs(conn: socket.socket, ours: dict[str, str]) -> str | None:
    """Why a peer of this user (``other_user`` found none) may not be served: its
    process differs from the server's in what a fork would take from the server; else
    None."""
    try:
        pid, _ = peer_pid(conn)
    except OSError as exc:
        return f"no peer credentials ({exc})"
    pidfd = _peer_pidfd(conn)
    try:
        theirs = facts(pid)
        if theirs is None:
            return "the peer's process cannot be read"
        if pidfd is not None:
            import signal

            try:  # still the peer: the pid was not reused while we read
                signal.pidfd_send_signal(pidfd, 0)
            except OSError:
                return "the peer ended"
        differ = sorted(k for k in ours if ours[k] != theirs.get(k))
        if differ:
            return "the peer differs from the server: " + ", ".join(differ)
        return None
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _peer_pidfd(conn: socket.socket) -> int | None:
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, place.SO_PEERPIDFD, 4)
    except OSError:
        return None
    (fd,) = struct.unpack("i", raw)
    return fd if fd >= 0 else None
