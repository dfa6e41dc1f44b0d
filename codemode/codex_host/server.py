"""Where the host listens: ``grpc://HOST:PORT`` (TCP), ``grpc+stdio://`` (HTTP/2 over
this process's stdin and stdout, as Codex 0.169 starts its host) or ``stdio`` (the framed
JSON protocol Codex 0.148 speaks to a host started with no arguments).

For ``grpc+stdio://`` grpc's server listens on a unix socket in a private folder (0700)
and two threads copy bytes between it and stdin/stdout: grpc does the HTTP/2, the relay
only moves bytes. In both stdio modes fd 1 is kept for the protocol alone: anything
else that writes to stdout (a library, a child process) goes to stderr instead. The
host ends when stdin closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import tempfile
import threading
from pathlib import Path

from codemode.codex_host.listen import Listen
from codemode.codex_host.runtime import SessionLimits


def take_stdout() -> int:
    """A private copy of fd 1 for the protocol; fd 1 itself then points at stderr."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    return fd


async def serve(listen: Listen, limits: SessionLimits) -> int:
    from codemode.js_runtime.worker_process import POOL

    if os.environ.get("CODEMODE_HOST_TRACE"):
        import faulthandler
        import signal

        faulthandler.register(signal.SIGUSR1, all_threads=True)

    # In the stdio modes fd 1 is the protocol's before any process is started.
    out_fd = take_stdout() if listen.kind != "tcp" else -1

    def prestart() -> None:
        # The engine worker the command line started before its imports (when it did;
        # else one boots now, once the host answers: its start is what a client waits
        # for) is adopted by the pool: the first exec finds it ready.
        POOL.prestart(limits.engine, limits.memory_mb * 1024 * 1024)

    if listen.kind == "framed-stdio":
        # lazy: the framed protocol needs no grpc
        from codemode.codex_host.framed import serve_framed

        prestart()
        return await serve_framed(0, out_fd, limits)
    import grpc  # lazy: only the gRPC transports need it

    from codemode.codex_host.grpc_service import CodeModeHostService

    service = CodeModeHostService(limits)
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((service.handler(),))
    if listen.kind == "tcp":
        port = server.add_insecure_port(f"{listen.host}:{listen.port}")
        if port == 0:
            raise OSError(f"cannot listen on {listen.host}:{listen.port}")
        await server.start()
        prestart()
        print(
            f"code-mode host listening on grpc://{listen.host}:{port}", file=sys.stderr, flush=True
        )
        try:
            await server.wait_for_termination()
        finally:
            await service.close()
            await server.stop(0.5)
        return 0
    with tempfile.TemporaryDirectory(prefix="codemode-host-") as private:
        os.chmod(private, 0o700)
        path = Path(private) / "grpc.sock"
        server.add_insecure_port(f"unix:{path}")
        await server.start()
        prestart()
        try:
            await _relay(path, 0, out_fd)
        finally:
            await service.close()
            await server.stop(0.5)
    return 0


async def _relay(path: Path, in_fd: int, out_fd: int) -> None:
    """Copy bytes stdin -> socket and socket -> stdout until either side ends."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(path))
    loop = asyncio.get_running_loop()
    ended = asyncio.Event()

    def done() -> None:
        loop.call_soon_threadsafe(ended.set)

    def inbound() -> None:
        try:
            while data := os.read(in_fd, 65536):
                sock.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
            done()

    def outbound() -> None:
        try:
            while data := sock.recv(65536):
                view = memoryview(data)
                while view:
                    view = view[os.write(out_fd, view) :]
        except OSError:
            pass
        finally:
            done()

    threads = [
        threading.Thread(target=inbound, name="stdin-relay", daemon=True),
        threading.Thread(target=outbound, name="stdout-relay", daemon=True),
    ]
    for t in threads:
        t.start()
    try:
        await ended.wait()
    finally:
        with contextlib.suppress(OSError):
            sock.close()
