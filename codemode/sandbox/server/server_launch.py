"""Starting a command server: its bubblewrap and Python started now (``launch``, from
any thread), and the ``CommandServer`` once it says it is ready (``Launch.poll`` /
``Launch.ready``, on the event loop's thread); ``start`` does both.

A session starts its server ahead of its first command, from its warm-up thread
(``SandboxSession.prewarm``): by the time the model's first program makes its calls,
the server has had the first model request's time to get ready. Whoever comes first
takes it: the command waiting for it, or one arriving meanwhile (``CommandServers``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from codemode.sandbox.helpers import compiled
from codemode.sandbox.server import pidfd_process, server_program
from codemode.sandbox.server.server_handle import CommandServer, ServerUnavailable, stop

if TYPE_CHECKING:
    from codemode.sandbox.server.server_key import ServerKey

_READY_TIMEOUT_S = 10.0


def settle(future: concurrent.futures.Future[Launch | None], launch: Launch | None) -> None:
    """Hand ``launch`` (None: none was started) to whoever waits on ``future``, from any
    thread; stopped instead when nobody will (the future was cancelled)."""
    try:
        future.set_result(launch)
    except concurrent.futures.InvalidStateError:
        if launch is not None:
            launch.discard()


async def start(key: ServerKey, python: str = sys.executable) -> CommandServer:
    """Start a server and wait until it is ready; raises ServerUnavailable saying why
    it could not."""
    return await launch(key, python).ready()


def launch(key: ServerKey, python: str = sys.executable) -> Launch:
    """Start a server's bubblewrap and Python now, from any thread, without waiting for
    an event loop or for the server to be ready (``Launch.ready``); raises
    ServerUnavailable. bubblewrap dies with the *thread* that started it
    (``--die-with-parent``): start it from one that lives as long as the session."""
    subreaper = compiled.path("subreaper.c") or ""  # "": the server uses a preexec_fn
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    passed: list[int] = []
    try:
        source_fd = _pipe_holding(server_program.program())
        passed.append(source_fd)
        opts = list(key.options)
        if key.seccomp is not None:
            passed.append(_pipe_holding(key.seccomp))
            opts += ["--seccomp", str(passed[-1])]
        argv = [
            *opts, "--as-pid-1", "--chdir", "/", "--", *key.prefix,
            python, "-I", "-S", "-c", server_program.BOOT,
            str(theirs.fileno()), str(source_fd), subreaper,
        ]  # fmt: skip
        err_r, err_w = os.pipe()  # the server's own stderr: read if it fails to start
        try:
            spawned = pidfd_process.spawn(
                argv,
                cwd=Path("/"),
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                output_fd=err_w,
                pass_fds=[theirs.fileno(), *passed],
            )
        finally:
            os.close(err_w)
    except OSError as exc:
        ours.close()
        raise ServerUnavailable(f"cannot start bubblewrap: {exc}") from None
    finally:
        theirs.close()
        for fd in passed:
            os.close(fd)
    if spawned is None:
        ours.close()
        os.close(err_r)
        raise ServerUnavailable("this kernel offers no pidfds")
    ours.setblocking(False)
    return Launch(key, spawned, ours, err_r)


class Launch:
    """A command server started and not yet ready (``launch``, from any thread);
    ``poll`` and ``ready`` on the event loop's thread."""

    def __init__(
        self, key: ServerKey, spawned: tuple[subprocess.Popen[bytes], int], sock: socket.socket,
        err_r: int,
    ) -> None:  # fmt: skip
        self.key, self.sock, self.err_r = key, sock, err_r
        self._spawned: tuple[subprocess.Popen[bytes], int] | None = spawned
        self._proc: pidfd_process.PidfdProcess | None = None
        self._waiter: asyncio.Future[None] | None = None
        self.server: CommandServer | None = None
        self._why = "the command server was stopped"  # (said again by a later poll)

    def poll(self) -> CommandServer | None:
        """The server, if it has said it is ready (read now: no wait, no turn of the
        loop); None while it has not. Raises ServerUnavailable when it said something
        else or ended."""
        if self.server is not None:
            return self.server
        if self._spawned is not None:  # (watched by this loop from now on)
            self._proc = pidfd_process.PidfdProcess(*self._spawned)
            self._spawned = None
        if self._proc is None:
            raise ServerUnavailable(self._why)
        try:
            hello = self.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            hello = b""
        try:
            said = json.loads(hello or b"null")
        except ValueError:
            said = None
        if said != {"ready": True}:
            self._fail()
        self._close_err()
        self._wake()  # (the socket's reader is the server's from now on)
        self.server = CommandServer(self.key, self._proc, self.sock)
        return self.server

    async def ready(self) -> CommandServer:
        """The server, once it says it is ready; raises ServerUnavailable saying why it
        did not. Cancelled, it is stopped (unless another caller took it meanwhile)."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(_READY_TIMEOUT_S):
                while (server := self.poll()) is None:
                    self._waiter = loop.create_future()
                    loop.add_reader(self.sock.fileno(), _settle, self._waiter)
                    await self._waiter
        except TimeoutError:
            self._fail()
        except ServerUnavailable:
            raise
        except BaseException:
            if self.server is None:
                self.discard()
            raise
        return server

    def _wake(self) -> None:
        if self._waiter is not None:
            with contextlib.suppress(ValueError, RuntimeError):  # (a loop already closed)
                asyncio.get_running_loop().remove_reader(self.sock.fileno())
            _settle(self._waiter)
            self._waiter = None

    def _fail(self) -> NoReturn:
        if self.err_r >= 0:
            self._why = _failure(self.err_r)
        self.discard()
        raise ServerUnavailable(self._why)

    def discard(self) -> None:
        """Stop it, from any thread, while no server was made of it: nothing uses it."""
        if self.server is not None:
            return
        self._wake()  # (on the loop's thread: it had a waiter only there)
        if self._proc is not None:
            stop(self._proc)
            self._proc = None
        elif self._spawned is not None:
            popen, pidfd = self._spawned
            self._spawned = None
            pidfd_process.kill_group(popen)  # (not yet reaped: waited for below)
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            popen.wait()  # (killed: at once)
            os.close(pidfd)
        self.sock.close()
        self._close_err()

    def _close_err(self) -> None:
        if self.err_r >= 0:
            os.close(self.err_r)
            self.err_r = -1


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _pipe_holding(data: bytes) -> int:
    """The read end of a pipe that holds ``data`` (at most the pipe buffer, 64 KiB)."""
    r, w = os.pipe()
    try:
        os.write(w, data)
    finally:
        os.close(w)
    return r


def _failure(err_fd: int) -> str:
    os.set_blocking(err_fd, False)
    try:
        text = os.read(err_fd, 4096).decode(errors="replace").strip()
    except OSError:
        text = ""
    last = text.splitlines()[-1] if text else "it did not answer"
    return f"the command server did not start ({last})"
