"""Which local user is on the other end of a loopback TCP connection (Linux).

Loopback is no boundary on a shared machine: every local user can connect to a port on
127.0.0.1. The kernel lists each TCP socket with the user that created it in
``/proc/net/tcp`` (``tcp6``), so a server can see whose a connection from this machine
is without the client carrying anything (Codex's ``--code-mode-host`` URL carries no
credential: docs/codex-host.md). The client's socket is listed in this network
namespace because a loopback connection can only come from it.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from collections.abc import Callable

Address = tuple[str, int]


def client_uid(client: Address, server: Address) -> int | None:
    """The uid that owns the client's socket of the connection from ``client`` to
    ``server`` (host, port), or None where it is not listed (a peer beyond this
    machine, or one gone already)."""
    # The client's socket: its local address is the client, its remote one the server.
    # A client on an IPv6 socket reaches an IPv4 listener as ::ffff:a.b.c.d (grpc's does).
    tables: list[tuple[str, Callable[[str], str]]] = [("/proc/net/tcp6", str)]
    if _ip(client[0]).version == 4:
        tables = [("/proc/net/tcp", str), ("/proc/net/tcp6", lambda a: f"::ffff:{a}")]
    for name, spell in tables:
        want = (_entry(spell(client[0]), client[1]), _entry(spell(server[0]), server[1]))
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


def is_own_user_at(client: Address, server: Address) -> bool:
    """Whether the connection from ``client`` to ``server`` comes from this process's
    own user on this machine. A client beyond loopback cannot be told apart: True (a
    server that listens beyond loopback has accepted that)."""
    try:
        address = _ip(client[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    if not (address.is_loopback or (mapped is not None and mapped.is_loopback)):
        return True
    return client_uid(client, server) == os.geteuid()


def is_own_user(conn: socket.socket) -> bool:
    """``is_own_user_at`` for an accepted socket."""
    try:
        theirs, ours = conn.getpeername(), conn.getsockname()
    except OSError:
        return False
    return is_own_user_at((theirs[0], theirs[1]), (ours[0], ours[1]))


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(host.split("%", 1)[0])


def _entry(host: str, port: int) -> str:
    """An address as ``/proc/net/tcp*`` writes it: each 32-bit word of the address in
    the machine's byte order, in hex, then the port."""
    packed = _ip(host).packed
    words = struct.unpack(f"={len(packed) // 4}I", packed)
    return "".join(f"{w:08X}" for w in words) + f":{port:04X}"
