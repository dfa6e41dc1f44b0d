"""A started subprocess whose exit the event loop sees through a pidfd.

Python 3.11's asyncio learns of a child's exit from a thread it starts per child
(``ThreadedChildWatcher``): starting that thread, and handing the exit back from it to
the loop, are two more waits for a CPU on every command, which on a busy machine cost
about as much as the command itself. A pidfd (Linux 5.3+) becomes readable when the
process exits, so the loop can wait for it like for any file descriptor, in its own
thread. Where ``os.pidfd_open`` is missing or fails, ``start`` uses asyncio's own
subprocess support as before.

Only what the shell tool uses of ``asyncio.subprocess.Process`` is offered: ``pid``,
``returncode``, ``wait()`` (which several callers may await at once), and
``send_signal``/``kill``/``terminate``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol


class ChildProcess(Protocol):
    """What ``start`` returns: a ``PidfdProcess`` or an ``asyncio.subprocess.Process``."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...

    def terminate(self) -> None: ...


class PidfdProcess:
    """A child started by ``start``; reaped by the event loop when it exits."""

    def __init__(self, popen: subprocess.Popen[bytes], pidfd: int) -> None:
        self._popen = popen  # kept until reaped, so that subprocess never reaps it itself
        self.pid = popen.pid
        self.returncode: int | None = None
        self._pidfd = pidfd
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future[int] = self._loop.create_future()
        self._loop.add_reader(pidfd, self._reap)

    def _reap(self, flags: int = os.WNOHANG) -> None:
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:  # reaped elsewhere: the status is lost
            pid, status = self.pid, 255 << 8
        if pid == 0:
            return  # not yet (a spurious wakeup)
        with contextlib.suppress(ValueError, RuntimeError):  # (a loop already closed)
            self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self.returncode = os.waitstatus_to_exitcode(status)
        self._popen.returncode = self.returncode  # subprocess must not wait for it again
        if not self._done.done():
            self._done.set_result(self.returncode)

    def wait_blocking(self, timeout: float) -> bool:
        """Wait here, blocking, up to ``timeout`` seconds for the process to exit and
        reap it; whether it did."""
        if self.returncode is None:
            poller = select.poll()
            poller.register(self._pidfd, select.POLLIN)
            if not poller.poll(timeout * 1000):
                return False
            self._reap(0)
        return True

    def reap_now(self) -> None:
        """Wait for the process here, blocking (for a caller that killed it and cannot
        await, such as a session's close)."""
        if self.returncode is None:
            self._reap(0)

    async def wait(self) -> int:
        """The exit code once the process has exited (negative: killed by that signal)."""
        return await asyncio.shield(self._done)

    def send_signal(self, sig: int) -> None:
        """Signal the process (through its pidfd: never a reused pid); no-op once reaped."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def kill_group(leader: PidfdProcess | subprocess.Popen[bytes]) -> None:
    """SIGKILL what is still in the process group a child of ours leads (``start`` and
    ``spawn`` make each the leader of a session of its own), while that child is not yet
    reaped, so its number cannot have gone to another group. What it forked and that has
    not left the group yet dies with it: bubblewrap's first process in its sandbox, killed
    before it has set itself to die with bubblewrap (a SIGKILL to bubblewrap alone left
    that one waiting, for ever, on bubblewrap's word to go on)."""
    if leader.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader.pid, signal.SIGKILL)


async def start(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    output_fd: int,
    pass_fds: Sequence[int] = (),
    preexec_fn: Callable[[], None] | None = None,
) -> ChildProcess:
    """Start ``argv`` in a new session, stdin /dev/null, stdout and stderr ``output_fd``.

    Returns a PidfdProcess, or an ``asyncio.subprocess.Process`` where pidfds are not
    available; both have ``pid``, ``returncode`` and ``wait()``."""
    kwargs = _options(cwd, env, output_fd, pass_fds)
    if preexec_fn is not None:
        kwargs["preexec_fn"] = preexec_fn
    if _pidfd_works():
        return PidfdProcess(*_spawn(argv, kwargs))
    return await asyncio.create_subprocess_exec(*argv, **kwargs)


def spawn(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], output_fd: int,
    pass_fds: Sequence[int] = (),
) -> tuple[subprocess.Popen[bytes], int] | None:
    """``start`` from any thread, without an event loop (a fork and an exec, here and
    now): the process and its pidfd, for ``PidfdProcess`` on the loop's thread; None
    where this kernel offers no pidfds (then ``start`` it)."""
    if not _pidfd_works():
        return None
    return _spawn(argv, _options(cwd, env, output_fd, pass_fds))


def _options(
    cwd: Path, env: Mapping[str, str], output_fd: int, pass_fds: Sequence[int]
) -> dict[str, Any]:
    """``Popen``'s options for a child of ours: a new session, stdin /dev/null, stdout
    and stderr ``output_fd``."""
    return {
        "cwd": cwd,
        "env": dict(env),
        "stdin": subprocess.DEVNULL,
        "stdout": output_fd,
        "stderr": output_fd,
        "start_new_session": True,
        "pass_fds": tuple(pass_fds),
    }


def _spawn(argv: Sequence[str], kwargs: dict[str, Any]) -> tuple[subprocess.Popen[bytes], int]:
    popen = subprocess.Popen(list(argv), **kwargs)
    try:
        pidfd = os.pidfd_open(popen.pid)
    except OSError:
        with contextlib.suppress(OSError):
            popen.kill()
        popen.wait()
        raise
    return popen, pidfd


_works: bool | None = None


def _pidfd_works() -> bool:
    """Whether this kernel and Python offer pidfds (tried once, on ourselves)."""
    global _works
    if _works is None:
        try:
            os.close(os.pidfd_open(os.getpid()))
            _works = True
        except (AttributeError, OSError):
            _works = False
    return _works
