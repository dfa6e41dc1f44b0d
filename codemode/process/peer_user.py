"""Which local user is on the other end of a loopback TCP connection (Linux).

Loopback is no boundary on a shared machine: every local user can connect to a port on
127.0.0.1. The kernel lists each TCP socket with the user that created it in
``/proc/net/tcp`` (``tcp6``), so for a connection from this machine the host can see
whose it is without the client carrying anything: Codex's ``--code-mode-host`` URL
carries no credential we could check (docs/codex-host.md). The client's socket is listed
in this network namespace because a loopback connection can only come from it.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from collections.abc import Callable


def peer_uid(conn: socket.socket) -> int | None:
    """The uid that owns the client's end of ``conn``, or None where it is not listed
    (a peer beyond this machine, or one gone already)."""
    try:
        ours, theirs = conn.getsockname(), conn.getpeername()
    except OSError:
        return None
    # The client's socket: its local address is our peer, its remote address is us. A
    # client on an IPv6 socket reaches an IPv4 listener as ::ffff:a.b.c.d (grpc's does).
    tables: list[tuple[str, Callable[[str], str]]] = []
    if conn.family == socket.AF_INET6:
        tables = [("/proc/net/tcp6", str)]
    if conn.family == socket.AF_INET:
        tables = [("/proc/net/tcp", str), ("/proc/net/tcp6", lambda a: f"::ffff:{a}")]
    for name, spell in tables:
        want = (_entry(spell(theirs[0]), theirs[1]), _entry(spell(ours[0]), ours[1]))
        try:
            with open(name) as table:
                next(table, None)  # the header
                for line in table:
                    fields = line.split()
                    if len(fields) > 7 and (fields[1], fields[2]) == want:
                        return int(fields[7])
        except OSError:
            continue
    return None


def is_own_user(conn: socket.socket) -> bool:
    """Whether ``conn`` comes from this process's own user on this machine. A peer
    beyond loopback cannot be told apart (that is what ``NETWORK_FLAG`` accepts)."""
    try:
        address = ipaddress.ip_address(conn.getpeername()[0].split("%", 1)[0])
    except (OSError, ValueError):
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    if not (address.is_loopback or (mapped is not None and mapped.is_loopback)):
        return True
    return peer_uid(conn) == os.geteuid()


def _entry(host: str, port: int) -> str:
    """An address as ``/proc/net/tcp*`` writes it: each 32-bit word of the address in
    the machine's byte order, in hex, then the port."""
    packed = ipaddress.ip_address(host.split("%", 1)[0]).packed
    words = struct.unpack(f"={len(packed) // 4}I", packed)
    return "".join(f"{w:08X}" for w in words) + f":{port:04X}"
