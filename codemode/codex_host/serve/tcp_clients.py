"""The host's TCP clients (``--listen grpc://HOST:PORT``): who is served, how many at
once, and what goes when one goes.

Each accepted connection is checked before a byte is read from it: another local user's
connection is closed unanswered (``process/peer_user.py``), and so is one past
``--max-connections``. A served connection has a service of its own, so its sessions
are its client's alone; when the connection ends (the client hung up, or broke the
protocol) every session it opened is closed, its cells terminated and their engine
workers killed and reaped, as ``docs/codex-host.md`` promises: within a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from collections.abc import Callable

from codemode.codex_host.grpc.service import CodeModeHostService
from codemode.codex_host.serve.listen import Listen, is_loopback
from codemode.codex_host.session.limits import ClientBounds
from codemode.codex_host.session.runtime import SessionLimits
from codemode.codex_host.wire.h2_connection import Connection
from codemode.js_runtime.worker_process import reap_killed
from codemode.process.peer_user import is_own_user


async def serve_tcp(
    listen: Listen, limits: SessionLimits, bounds: ClientBounds, ready: Callable[[int], None]
) -> None:
    """Serve until cancelled; ``ready(port)`` once listening."""
    if not is_loopback(listen.host):  # said before the port opens, not after a client came
        _say(
            f"listening beyond loopback on {listen.host}: any client that can reach "
            "this port runs programs here, unauthenticated"
        )
    listeners = _listeners(listen.host, listen.port)
    clients: set[asyncio.Task[None]] = set()
    try:
        ready(listeners[0].getsockname()[1])
        await asyncio.gather(*(_accept(s, limits, bounds, clients) for s in listeners))
    finally:
        for listener in listeners:
            listener.close()
        for task in list(clients):
            task.cancel()
        await asyncio.gather(*clients, return_exceptions=True)


def _listeners(host: str, port: int) -> list[socket.socket]:
    """A listening socket per address ``host`` names (``localhost``: both families)."""
    found = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE | socket.AI_NUMERICSERV
    )
    if is_loopback(host):  # ``localhost`` as the resolver has it: loopback, or nothing
        found = [f for f in found if is_loopback(str(f[4][0]))]
        if not found:
            raise OSError(f"{host} names no loopback address")
    if port == 0:
        found = found[:1]  # one port chosen by the kernel, not one per address
    listeners: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in found:
            sock = socket.socket(family, kind, proto)
            listeners.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(64)
            sock.setblocking(False)
    except OSError:
        for sock in listeners:
            sock.close()
        raise
    return listeners


async def _accept(
    listener: socket.socket,
    limits: SessionLimits,
    bounds: ClientBounds,
    clients: set[asyncio.Task[None]],
) -> None:
    loop = asyncio.get_running_loop()
    while True:
        conn, peer = await loop.sock_accept(listener)
        if not is_own_user(conn):
            conn.close()
            _say(f"hung up on {peer[0]}:{peer[1]}: a connection of another user")
            continue
        if len(clients) >= bounds.max_connections:
            conn.close()
            _say(
                f"hung up on {peer[0]}:{peer[1]}: {len(clients)} clients already "
                f"(--max-connections {bounds.max_connections})"
            )
            continue
        task = asyncio.ensure_future(_serve_client(conn, limits, bounds))
        clients.add(task)
        task.add_done_callback(clients.discard)


async def _serve_client(conn: socket.socket, limits: SessionLimits, bounds: ClientBounds) -> None:
    loop = asyncio.get_running_loop()
    service = CodeModeHostService(limits, bounds)
    transport = None
    try:
        transport, connection = await loop.connect_accepted_socket(
            lambda: Connection(service.methods()), conn
        )
        await connection.done
    finally:
        # Everything the client started goes with it, even where a stream of it was
        # still being answered.
        await asyncio.shield(service.close())
        if transport is not None:
            transport.close()
        else:
            conn.close()
        with contextlib.suppress(Exception):
            await reap_killed()


def _say(text: str) -> None:
    print(f"code-mode host: {text}", file=sys.stderr, flush=True)
