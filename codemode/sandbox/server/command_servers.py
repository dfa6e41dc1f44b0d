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
import concurrent.futures
import contextlib
import functools
import logging
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

from codemode.sandbox.server import server_launch
from codemode.sandbox.server.server_handle import (
    CommandServer,
    CoversChanged,
    ServerProcess,
    ServerUnavailable,
)
from codemode.sandbox.server.server_key import ServerKey
from codemode.sandbox.server.server_launch import Launch

log = logging.getLogger("codemode.sandbox")


class CommandServers:
    """A session's command servers: the one for the current key, and earlier ones
    still running a command (ended once idle)."""

    def __init__(self) -> None:
        self._current: CommandServer | None = None
        self._retired: list[CommandServer] = []
        # A server being started in another thread ahead of the first command, for the
        # key that command will likely have (``launching``): used when its key is the
        # same, else stopped.
        self._launch: concurrent.futures.Future[Launch | None] | None = None
        self._waiting: Launch | None = None  # what ``_launched_for`` waits for
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
        """Start the server for ``key`` now, before a command needs it; one started
        ahead for the same key (``launching``) is left for the first command to take."""
        if self.broken is not None:
            return
        if self._launch is not None:
            # (the thread starting it; shielded: a cancelled wait leaves it to close())
            await asyncio.shield(asyncio.wrap_future(self._launch))
            launched = self._launch.result() if self._launch is not None else None
            if launched is not None and launched.key == key:
                return
        await self._server(key)

    def launching(self) -> concurrent.futures.Future[Launch | None] | None:
        """Where no server is started yet, a future for another thread to set to the
        server it starts ahead of the first command (``server_launch.launch``; None:
        it did not), which that command then uses if its key is the same."""
        if self.broken is not None or self._current is not None or self._launch is not None:
            return None
        self._launch = concurrent.futures.Future()
        return self._launch

    async def _launched_for(self, key: ServerKey) -> CommandServer | None:
        """The server started ahead (``launching``) when it was for ``key``; waits for
        the thread starting it, then for the server."""
        future, self._launch = self._launch, None
        if future is None:
            return None
        if not future.done():
            try:
                await asyncio.shield(asyncio.wrap_future(future))
            except asyncio.CancelledError:
                future.add_done_callback(_discard)  # (nobody else will take it)
                raise
        launch = future.result()
        if launch is None:
            return None
        if launch.key != key:
            launch.discard()
            return None
        self._waiting = launch
        try:
            return await launch.ready()
        finally:
            self._waiting = None

    async def _server(self, key: ServerKey) -> CommandServer:
        loop = asyncio.get_running_loop()
        current = self._current
        if current is not None and self._serves(current, key, loop):
            return current
        # A command that comes while the first waits for the server started ahead looks
        # for its word itself: many come in one turn of the loop (``Promise.all``), and
        # the waiting one only hears it once the loop has seen to them all.
        waiting = self._waiting
        if waiting is not None and waiting.key == key:
            with contextlib.suppress(ServerUnavailable):  # (the waiting one says why)
                server = waiting.poll()
                if server is not None:
                    return self._adopt(server, key)
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        async with self._lock[1]:
            current = self._current
            if current is not None and self._serves(current, key, loop):
                return current
            if current is not None:
                self._retire(current)
            try:
                server = await self._launched_for(key) or await server_launch.start(key)
            except ServerUnavailable as exc:
                if key.covers_gone():
                    raise CoversChanged(str(exc)) from None
                self.broken = str(exc)
                log.warning("sandbox: %s; one bubblewrap per command instead", exc)
                raise
            return self._adopt(server, key)

    @staticmethod
    def _serves(server: CommandServer, key: ServerKey, loop: asyncio.AbstractEventLoop) -> bool:
        return server.alive and server.key == key and server.loop is loop and not server.dirty

    def _adopt(self, server: CommandServer, key: ServerKey) -> CommandServer:
        """``server`` becomes the current one (already, when a command took it while it
        was being waited for)."""
        if server is self._current:
            return server
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
        if self._launch is not None:  # stopped once its thread has started it
            self._launch.add_done_callback(_discard)
            self._launch = None
        for server in [*self._retired, *([self._current] if self._current else [])]:
            server.close()
        self._retired.clear()
        self._current = None


def _discard(future: concurrent.futures.Future[Launch | None]) -> None:
    if future.cancelled():
        return
    launch = future.result()
    if launch is not None:
        launch.discard()
