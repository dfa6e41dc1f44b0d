"""Where the host listens: ``grpc://HOST:PORT`` (TCP), ``grpc+stdio://`` (HTTP/2 over
this process's stdin and stdout, as Codex 0.169 starts its host) or ``stdio`` (the framed
JSON protocol Codex 0.148 speaks to a host started with no arguments).

Both gRPC transports are served by ``h2_connection.Connection`` in this event loop: over
``grpc+stdio://`` one connection reads stdin and writes stdout; over TCP one per
client, each with its own sessions (``serve/tcp_clients.py``: who is served, and what goes
when a client goes). In both stdio modes fd 1 is kept for the protocol alone: anything else that
writes to stdout (a library, a child process) goes to stderr instead. The host ends
when stdin closes.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TYPE_CHECKING

from codemode.codex_host.serve.listen import Listen
from codemode.codex_host.session.limits import ClientBounds
from codemode.codex_host.session.runtime import SessionLimits
from codemode.codex_host.wire.stdio import pump, through_loop, writer

if TYPE_CHECKING:
    from codemode.codex_host.wire.h2_connection import Connection


def take_stdout() -> int:
    """A private copy of fd 1 for the protocol; fd 1 itself then points at stderr."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    return fd


async def serve(listen: Listen, limits: SessionLimits, bounds: ClientBounds | None = None) -> int:
    from codemode.js_runtime.worker_pool import POOL

    bounds = bounds or ClientBounds()

    if os.environ.get("CODEMODE_HOST_TRACE"):
        import faulthandler
        import signal

        faulthandler.register(signal.SIGUSR1, all_threads=True)

    # In the stdio modes fd 1 is the protocol's before anything here can write to it (an
    # engine worker started earlier has its own fd 1: its reply pipe).
    out_fd = take_stdout() if listen.kind != "tcp" else -1

    def prestart() -> None:
        # The engine worker the command line started before its imports (when it did;
        # else one boots now, once the host answers: its start is what a client waits
        # for) is adopted by the pool: the first exec finds it ready.
        POOL.prestart(limits.engine, limits.memory_mb * 1024 * 1024)

    if listen.kind == "framed-stdio":
        # lazy: the framed protocol needs no protobuf
        from codemode.codex_host.framed.protocol import serve_framed

        prestart()
        _collect_later()
        return await serve_framed(0, out_fd, limits, bounds)
    if listen.kind == "tcp":
        from codemode.codex_host.serve.tcp_clients import serve_tcp

        def listening(port: int) -> None:
            prestart()
            _collect_later()
            host = f"[{listen.host}]" if ":" in listen.host else listen.host
            print(
                f"code-mode host listening on grpc://{host}:{port}",
                file=sys.stderr,
                flush=True,
            )

        await serve_tcp(listen, limits, bounds, listening)
        return 0
    from codemode.codex_host.grpc.service import CodeModeHostService
    from codemode.codex_host.wire.h2_connection import Connection

    service = CodeModeHostService(limits, bounds)
    try:
        connection = Connection(service.methods())
        await _attach_stdio(connection, 0, out_fd)
        prestart()
        _collect_later()
        await connection.done
        return 0
    finally:
        await service.close()


def _collect_later() -> None:
    """The objects start-up made are kept out of every later collection (they live as
    long as the host), and the collector, off while they were made, is on again."""
    import gc

    gc.freeze()
    gc.enable()


async def _attach_stdio(connection: Connection, in_fd: int, out_fd: int) -> None:
    """``connection`` reads stdin and writes ``out_fd`` (the protocol's stdout) through
    the loop, not reading while its client does not read (``wire/stdio.py``)."""
    loop = asyncio.get_running_loop()
    out = await writer(
        out_fd, connection.connection_lost, connection.pause_writing, connection.resume_writing
    )
    connection.attach(out.write, out.close)
    if through_loop(in_fd):
        await loop.connect_read_pipe(lambda: connection, os.fdopen(in_fd, "rb", buffering=0))
    else:
        pump(loop, in_fd, connection.data_received, lambda: connection.connection_lost(None))
