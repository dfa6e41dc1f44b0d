"""The host side of the command server: one bubblewrap sandbox for a session's commands.

Starting bubblewrap is most of what a confined command costs (new namespaces, a fresh
``/dev`` and ``/proc``, the binds, the capability drop: ~3-4 ms, where the command itself
takes one). So a session starts one sandbox running ``command_server`` and has it fork
each command inside; the sandbox is exactly the one a command would have had of its own
(``bwrap.options``: same binds, namespaces, seccomp filter, no capabilities), and each
command's processes still end with it (see ``command_server``).

A server is reused only while nothing it was started with has changed: the options
(writable roots, the protected entries found in them, network, sockets) and the identity
(device, inode, type) of every path bound or covered. A protected entry replaced on the
host since (git rewrites ``.git/config`` by renaming a new file over it, which detaches
the old bind) gives another identity, so the next command gets a new sandbox built from
what is there now. Commands differing only in argv, working folder and environment
share one; those arrive with each request.

What the server says is not trusted: it is parsed as the small JSON it must be, a job
id the host did not hand out is ignored, and nothing it reports is used as a host pid.
Where a server cannot start (no pidfds, an old bubblewrap, no Python to run it) the
session falls back to one bubblewrap per command, as before, and says why once.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

from codemode.sandbox.server.server_handle import (
    CommandServer,
    CoversChanged,
    ServerProcess,
    ServerUnavailable,
)
from codemode.sandbox.server.server_key import ServerKey

log = logging.getLogger("codemode.sandbox")


class CommandServers:
    """A session's command servers: the one for the current key, and earlier ones
    still running a command (ended once idle)."""

    def __init__(self) -> None:
        self._current: CommandServer | None = None
        self._retired: list[CommandServer] = []
        self._lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self.broken: str | None = None  # why servers are not used in this session
        self.closed = False
        self._reruns: set[asyncio.Task[None]] = set()

    async def run(
        self,
        key: ServerKey,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        output_fd: int,
    ) -> ServerProcess:
        """Run ``argv`` in the server for ``key`` (started if needed); raises
        ServerUnavailable when it must run in a sandbox of its own."""
        if self.broken is not None:
            raise ServerUnavailable(self.broken)
        server = await self._server(key)
        return await server.run(argv, cwd=cwd, env=env, output_fd=output_fd)

    async def prestart(self, key: ServerKey) -> None:
        """Start the server for ``key`` now, before a command needs it."""
        if self.broken is None:
            await self._server(key)

    async def _server(self, key: ServerKey) -> CommandServer:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        async with self._lock[1]:
            current = self._current
            if current is not None and current.alive and current.key == key and (
                current.loop is loop and not current.dirty
            ):
                return current
            if current is not None:
                self._retire(current)
            try:
                server = await CommandServer.start(key)
            except ServerUnavailable as exc:
                if key.covers_gone():
                    raise CoversChanged(str(exc)) from None
                self.broken = str(exc)
                log.warning("sandbox: %s; one bubblewrap per command instead", exc)
                raise
            if self.closed:  # the session ended while it started
                server.close()
                raise ServerUnavailable("the session has ended")
            server.on_unstarted = functools.partial(self._rerun, key)
            self._current = server
            return server

    def _rerun(self, key: ServerKey, proc: ServerProcess) -> None:
        """Run a command its server did not start (it could not be made clean) in a
        new one."""

        async def rerun() -> None:
            try:
                server = await self._server(key)
            except ServerUnavailable:
                proc.exited(-signal.SIGKILL)
                return
            await server.adopt(proc)

        task = asyncio.get_running_loop().create_task(rerun())
        self._reruns.add(task)
        task.add_done_callback(self._reruns.discard)

    def _retire(self, server: CommandServer) -> None:
        self._current = None
        self._retired = [s for s in self._retired if s.alive]
        if server.alive and not server.idle and server.loop.is_running():
            server.retiring = True  # its commands finish first; it ends after the last
            self._retired.append(server)
        else:
            server.close()

    def close(self) -> None:
        self.closed = True
        for server in [*self._retired, *([self._current] if self._current else [])]:
            server.close()
        self._retired.clear()
        self._current = None

