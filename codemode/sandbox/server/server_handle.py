"""The host's handle on one running command server, and the commands running in it.

``server_launch`` starts ``command_server`` in bubblewrap (``bwrap.options``: the
sandbox a command would have had of its own) and makes a ``CommandServer`` of it once
it says it is ready; ``run`` sends it a command and returns a ``ServerProcess``, which
the shell tool waits on and kills like any child. What the server says is not trusted:
it is parsed as the small JSON it must be, a job id the host did not hand out is
ignored, and nothing it reports is used as a host pid.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import marshal
import os
import signal
import socket
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from codemode.sandbox.server import pidfd_process

if TYPE_CHECKING:
    from codemode.sandbox.server.server_key import ServerKey

# The largest request sent to a server (a SOCK_SEQPACKET message must fit the socket
# buffer); a command whose argv and environment are larger runs in a sandbox of its own.
MAX_REQUEST = 160 << 10  # (one argument can be 128 KiB: MAX_ARG_STRLEN)
# After a kill request, how long the server gets to report the command's end before the
# whole server (and whatever still runs in it) is killed instead.
_KILL_GRACE_S = 1.0
_READS_PER_WAKEUP = 64
# How many new servers one command is handed on to (each said it could not start it)
# before it fails as killed: a fault that follows it from server to server ends there.
_MAX_MOVES = 2
# How long closing waits for the server to exit by itself before killing it.
_CLOSE_GRACE_S = 0.5

log = logging.getLogger("codemode.sandbox")


class ServerUnavailable(RuntimeError):
    """A command server cannot be used here (or for this command); run it on its own."""


class CoversChanged(ServerUnavailable):
    """A server could not start because a socket file its key covers went away while it
    started (``ServerKey.covers_gone``): make the key again and retry; nothing is broken."""


class ServerProcess:
    """One command running in a server: what ``pidfd_process.ChildProcess`` offers.

    ``pid`` is the host pid of the server's bubblewrap (the command's own pid lives in
    the sandbox's namespace); signalling goes through ``kill_tree``, never that pid."""

    def __init__(self, server: CommandServer, job: int, request: bytes, output_fd: int) -> None:
        self._server = server
        self.job = job
        self.pid = server.pid
        self.returncode: int | None = None
        self.killed = False
        self._done: asyncio.Future[int] = server.loop.create_future()
        # Kept until the command has started and ended, for a server that answers that
        # it did not start it (it could not be made clean): it runs in a new one.
        self.request = request
        self.output_fd = os.dup(output_fd)
        self.moves = 0  # servers it was handed on to

    def exited(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            with contextlib.suppress(RuntimeError):  # its event loop is already closed
                self._done.set_result(code)
        if self.output_fd >= 0:
            os.close(self.output_fd)
            self.output_fd = -1

    async def wait(self) -> int:
        return await asyncio.shield(self._done)

    def kill_tree(self) -> None:
        """End the command and every process it started."""
        self.killed = True
        if self.returncode is None:
            self._server.kill(self)

    def send_signal(self, sig: int) -> None:
        # A server only kills: every signal the shell tool sends is there to end it.
        self.kill_tree()

    def kill(self) -> None:
        self.kill_tree()

    def terminate(self) -> None:
        self.kill_tree()


class CommandServer:
    """A running ``command_server`` in its bubblewrap sandbox, bound to one event loop."""

    def __init__(
        self, key: ServerKey, proc: pidfd_process.PidfdProcess, sock: socket.socket
    ) -> None:
        self.key = key
        self.pid = proc.pid
        self.loop = asyncio.get_running_loop()
        self._proc = proc
        self._sock = sock
        self._jobs: dict[int, ServerProcess] = {}
        self._next = 0
        self.alive = True
        self.retiring = False  # replaced: ends once its last command has
        # Said it could not be made clean for the next command: replaced at once.
        self.dirty = False
        # Given the commands this server did not start (``CommandServers`` reruns them).
        self.on_unstarted: Callable[[ServerProcess], None] | None = None
        self.loop.add_reader(sock.fileno(), self._readable)


    async def run(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], output_fd: int
    ) -> ServerProcess:
        """Start ``argv`` in the sandbox, stdout and stderr ``output_fd``, stdin /dev/null."""
        if not self.alive:
            raise ServerUnavailable("the command server has ended")
        self._next += 1
        request = {"op": "run", "id": self._next, "argv": list(argv), "cwd": str(cwd),
                   "env": dict(env)}  # fmt: skip
        data = marshal.dumps(request)  # (the server reads marshal; it trusts the host)
        if len(data) > MAX_REQUEST:
            raise ServerUnavailable("the command is too large for the command server")
        if any("\0" in w for w in (*argv, str(cwd), *env, *env.values())):
            # cannot be run either way: it fails as it does in a sandbox of its own
            raise ServerUnavailable("the command holds a NUL byte")
        proc = ServerProcess(self, self._next, data, output_fd)
        self._jobs[proc.job] = proc
        try:
            await self._send(data, [output_fd])
        except OSError:
            self._jobs.pop(proc.job, None)
            proc.exited(-signal.SIGKILL)  # (not reported: the caller runs it elsewhere)
            self._lost()
            raise ServerUnavailable("the command server has ended") from None
        return proc

    async def adopt(self, proc: ServerProcess) -> None:
        """Run ``proc``'s request here: another server answered it did not start it."""
        proc.moves += 1
        if not self.alive or proc.killed or proc.output_fd < 0 or proc.moves > _MAX_MOVES:
            proc.exited(-signal.SIGKILL)
            return
        self._next += 1
        request = marshal.loads(proc.request)  # (what this process made)
        request["id"] = self._next
        proc._server, proc.job, proc.pid = self, self._next, self.pid
        proc.request = marshal.dumps(request)
        self._jobs[proc.job] = proc
        try:
            await self._send(proc.request, [proc.output_fd])
        except OSError:
            self._lost()

    async def _send(self, data: bytes, fds: list[int]) -> None:
        while True:
            try:
                socket.send_fds(self._sock, [data], fds)
                return
            except BlockingIOError:
                ready = self.loop.create_future()
                self.loop.add_writer(self._sock.fileno(), ready.set_result, None)
                try:
                    await ready
                finally:
                    self.loop.remove_writer(self._sock.fileno())

    def kill(self, proc: ServerProcess) -> None:
        """Ask the server to end ``proc``'s command; end the whole server if it does not
        report the command's end within a second."""
        try:
            self._sock.send(marshal.dumps({"op": "kill", "id": proc.job}))
        except OSError:
            self._lost()
            return
        self.loop.call_later(_KILL_GRACE_S, self._check_killed, proc)

    def _check_killed(self, proc: ServerProcess) -> None:
        if proc.returncode is None and self.alive:
            log.warning("sandbox: the command server did not end a command; ending it")
            self._lost()

    @property
    def idle(self) -> bool:
        return not self._jobs

    def _readable(self) -> None:
        for _ in range(_READS_PER_WAKEUP):  # then back to the loop: no flood can hold it
            try:
                data = self._sock.recv(4096)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self._lost()
                return
            self._report(data)

    def _report(self, data: bytes) -> None:
        try:
            message = json.loads(data)
            job, code, stuck = message.get("id"), message.get("exit"), message.get("stuck")
            dirty = message.get("dirty")
        except (ValueError, TypeError, AttributeError):
            return  # not something a server says: ignored
        if dirty and not self.dirty:
            # What a command changed could not be undone (``baseline.Baseline``,
            # ``tidy``): no command starts here any more.
            self.dirty = True
            log.info("sandbox: replacing the command server (%s)", str(dirty)[:200])
        if job is None:
            if self.dirty and not self._jobs:  # ``tidy``'s word after a report
                self.close()
            return
        if message.get("unstarted") is True and type(job) is int:
            proc = self._jobs.pop(job, None)
            self.dirty = True
            if proc is not None and self.on_unstarted is not None:
                self.on_unstarted(proc)
            elif proc is not None:
                proc.exited(-signal.SIGKILL)
            if not self._jobs:
                self.close()
            return
        if type(job) is int and type(code) is int and -64 <= code <= 255:
            proc = self._jobs.pop(job, None)
            if proc is not None:
                proc.exited(code)
                if stuck is not False:
                    log.warning("sandbox: a command left processes that would not end; "
                                "ending its sandbox")
                    self._lost()
                elif (self.retiring or self.dirty) and not self._jobs:
                    self.close()

    def _lost(self, graceful: bool = False) -> None:
        """The server ended, or is to: every command still in it ends as killed.

        ``graceful``: the server exits by itself once its socket closes (PID 1 exiting
        ends the whole namespace); that is waited for, briefly, so that nothing of the
        session outlives it and the CPU time of its commands reaches this process's
        accounts. Otherwise bubblewrap is killed."""
        if not self.alive:
            return
        self.alive = False
        with contextlib.suppress(ValueError, OSError):
            self.loop.remove_reader(self._sock.fileno())
        self._sock.close()
        if not (graceful and self._proc.wait_blocking(_CLOSE_GRACE_S)):
            # In a running loop the process's own reader reaps it once it is gone.
            stop(self._proc, wait=not self.loop.is_running())
        for proc in self._jobs.values():
            proc.exited(-signal.SIGKILL)
        self._jobs.clear()

    def close(self) -> None:
        """End the server and everything running in it."""
        self._lost(graceful=True)


def stop(proc: pidfd_process.ChildProcess, wait: bool = True) -> None:
    """Kill bubblewrap (its sandbox dies with it) and what is still in its process group
    (``kill_group``; with a pidfd only: without one a reaped pid is not known for sure);
    reap it now when ``wait``."""
    if isinstance(proc, pidfd_process.PidfdProcess):
        pidfd_process.kill_group(proc)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    if wait and isinstance(proc, pidfd_process.PidfdProcess):
        proc.reap_now()
