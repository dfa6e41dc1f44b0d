"""Running one hook command, contained.

The command runs as the user's own command would: through ``/bin/sh -c`` (or directly
when it is one plain word list), outside the command sandbox, in the workspace, with
the session's environment minus the withheld secrets. It gets its input on stdin and
its own process group, and starts through the subreaper helper (``hook_tree``), so that
a timeout stops it *and everything it started*, ``setsid`` and double forks included. What it
prints is read up to ``OUTPUT_CAP`` bytes a stream: a hook that prints more is stopped
(its output could not be trusted whole anyway). A hook that exits while something it
left behind still holds its output open is not waited for past a short grace. A hook
still running when codemode's process exits (a third Ctrl-C, the event loop closed
under it) is stopped whole too, at exit: no hook outlives the session that started it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from codemode.hooks import hook_tree, script_folders
from codemode.locations import launcher

# Bytes kept of a hook's stdout, and of its stderr.
OUTPUT_CAP = 1 << 20
# After the hook's own process exits: how long its output may stay open (a background
# child it left) before its process group is stopped.
EXIT_GRACE_S = 0.5
# The hooks started and not yet stopped or reaped, by pid: stopped at exit.
_RUNNING: dict[int, subprocess.Popen[bytes]] = {}
# Characters that make a command line need a shell.
_SHELL_CHARS = set("|&;<>()$`\\\"'*?[]#~=%{}\n")


@dataclass
class ProcessResult:
    exit_code: int | None  # None: it did not exit on its own (timeout, flood, no start)
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    flooded: bool = False
    error: str | None = None  # it could not be started
    duration_ms: float = 0.0


def project_env(env: Mapping[str, str], cwd: Path | str) -> dict[str, str]:
    """``env`` with the variables that name the project for a hook (Claude Code's scripts
    find their project this way): what a hook in ``cwd`` gets, and what a ``$VAR`` of
    its command line is read from when the files it names are looked for."""
    out = dict(env)
    out.setdefault("CODEMODE_PROJECT_DIR", str(cwd))
    out.setdefault("CLAUDE_PROJECT_DIR", str(cwd))
    return out


def argv_for(command: str) -> list[str]:
    """The command as an argument vector: split directly when it is plain words (one
    process less to start), else given to ``/bin/sh -c``."""
    if not (_SHELL_CHARS & set(command)):
        words = command.split()
        if words:
            return words
    return ["/bin/sh", "-c", command]


def folders_refusal(trusted: Mapping[str, str] | None) -> str | None:
    """Why the hook may not start: a folder its scripts load from changed since it was
    trusted (``script_folders``); None when none did."""
    moved = script_folders.changed(trusted or {})
    if not moved:
        return None
    return (f"not started: {', '.join(moved)} changed since it was trusted (a command may "
            "have written a module there): not run until it is trusted again")


async def run_command(
    command: str,
    stdin: bytes,
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    trusted: Mapping[str, str] | None = None,
) -> ProcessResult:
    """Run one hook command. ``trusted``: the digests the person accepted for the files
    it names that a command could have written; the launcher refuses any other such file
    (and a program found in such a folder) before anything starts."""
    started = time.perf_counter()
    refused = folders_refusal(trusted)
    if refused is not None:
        return ProcessResult(exit_code=None, duration_ms=_ms(started), error=refused)
    # Byte code from codemode's own cache, never a .pyc a command left beside a source.
    env = {**env, script_folders.PYCACHE_VARIABLE: str(script_folders.pycache_prefix())}
    try:
        proc = launcher.popen(
            argv_for(command),
            trusted=trusted,
            prefix=hook_tree.helper(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,  # its own process group: stopped whole
        )
    except launcher.LaunchRefused as exc:
        return ProcessResult(exit_code=None, error=f"not started: {exc}",
                             duration_ms=_ms(started))
    except OSError as exc:
        return ProcessResult(
            exit_code=None,
            error=f"cannot start it: {exc.strerror or exc}",
            duration_ms=_ms(started),
        )
    _RUNNING[proc.pid] = proc
    # Driven from the event loop by its file descriptors (a pidfd says when it exits):
    # no thread, and its exit is seen even while a child it left holds its output.
    watch = _Watch(proc, stdin)
    result = ProcessResult(exit_code=None)
    stop = True  # unless it exits and lets go of its output
    try:
        ended = await watch.wait(timeout_s)
        if watch.flooded:
            result.flooded = True
        elif ended:
            result.exit_code = proc.returncode
            # Its output closes when it exits, unless a child it left holds it open:
            # then that child is stopped too. One that let go of it may go on.
            stop = not await watch.drained(EXIT_GRACE_S)
        else:
            result.timed_out = True
    finally:
        if stop:
            # At the timeout the hook still runs and holds its tree below it; after its
            # exit, what it left is found by the output it still holds.
            if proc.poll() is None:
                hook_tree.stop_tree(proc.pid)
            else:
                _stop_group(proc.pid)
                hook_tree.stop_holders(watch.output_fds())
        watch.close()
        if proc.returncode is None:
            # (itself too: a hook that moved to a group of its own left ours)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()  # killed: reaped at once
        _RUNNING.pop(proc.pid, None)
    result.stdout = b"".join(watch.out).decode("utf-8", "replace")
    result.stderr = b"".join(watch.err).decode("utf-8", "replace")
    result.duration_ms = _ms(started)
    return result


class _Watch:
    """A started hook's pipes and exit, on the running event loop."""

    def __init__(self, proc: subprocess.Popen[bytes], data: bytes) -> None:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self.proc = proc
        self.loop = asyncio.get_running_loop()
        self.out: list[bytes] = []
        self.err: list[bytes] = []
        self.flooded = False
        self._sizes = {proc.stdout.fileno(): 0, proc.stderr.fileno(): 0}
        self._open = set(self._sizes)
        self._changed = self.loop.create_future()
        self._pending = memoryview(data)
        self._stdin: int | None = proc.stdin.fileno()
        self._pidfd: int | None = None
        for fd in self._sizes:
            os.set_blocking(fd, False)
            self.loop.add_reader(fd, self._read, fd)
        os.set_blocking(self._stdin, False)
        self._write()
        try:
            self._pidfd = os.pidfd_open(proc.pid)
            self.loop.add_reader(self._pidfd, self._on_exit)
        except OSError:  # no pidfd (an old kernel): its exit is polled
            self._pidfd = None

    def output_fds(self) -> list[int]:
        """Our ends of its stdout and stderr pipes."""
        assert self.proc.stdout is not None and self.proc.stderr is not None
        return [self.proc.stdout.fileno(), self.proc.stderr.fileno()]

    def _wake(self) -> None:
        if not self._changed.done():
            self._changed.set_result(None)

    def _on_exit(self) -> None:
        # A pidfd stays readable once its process exits: watched no longer.
        if self._pidfd is not None:
            self.loop.remove_reader(self._pidfd)
        self._wake()

    def _read(self, fd: int) -> None:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.loop.remove_reader(fd)
            self._open.discard(fd)
        else:
            self._sizes[fd] += len(chunk)
            if self._sizes[fd] > OUTPUT_CAP:
                self.flooded = True
            else:
                assert self.proc.stdout is not None
                (self.out if fd == self.proc.stdout.fileno() else self.err).append(chunk)
        self._wake()

    def _write(self) -> None:
        fd = self._stdin
        if fd is None:
            return
        try:
            while self._pending:
                sent = os.write(fd, self._pending)
                self._pending = self._pending[sent:]
        except BlockingIOError:
            self.loop.add_writer(fd, self._write_more)
            return
        except OSError:
            pass  # it exited, or closed its input: not an error
        self._close_stdin()

    def _write_more(self) -> None:
        if self._stdin is not None:
            self.loop.remove_writer(self._stdin)
        self._write()

    def _close_stdin(self) -> None:
        if self._stdin is not None:
            self.loop.remove_writer(self._stdin)
            self._stdin = None
            assert self.proc.stdin is not None
            self.proc.stdin.close()

    def _exited(self) -> bool:
        return self.proc.poll() is not None

    async def wait(self, timeout_s: float) -> bool:
        """True when it exited within ``timeout_s``; False at the timeout or a flood."""
        deadline = self.loop.time() + timeout_s
        while not self.flooded:
            if self._exited():
                return True
            left = deadline - self.loop.time()
            if left <= 0:
                return False
            await self._next(min(left, 0.05) if self._pidfd is None else left)
        return False

    async def drained(self, grace_s: float) -> bool:
        """True when its output closed within ``grace_s`` of its exit."""
        deadline = self.loop.time() + grace_s
        while self._open and not self.flooded:
            left = deadline - self.loop.time()
            if left <= 0:
                return False
            await self._next(left)
        return not self.flooded

    async def _next(self, timeout_s: float) -> None:
        if self._changed.done():
            self._changed = self.loop.create_future()
        timer = self.loop.call_later(timeout_s, self._wake)
        try:
            await self._changed
        finally:
            timer.cancel()

    def close(self) -> None:
        self._close_stdin()
        for fd in self._open:
            self.loop.remove_reader(fd)
        self._open.clear()
        if self._pidfd is not None:
            self.loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdout.close()
        self.proc.stderr.close()


@atexit.register
def _stop_running() -> None:
    """At exit: every hook still running (its coroutine never resumed: the event loop
    was closed under it) is stopped with what it started."""
    for pid, proc in list(_RUNNING.items()):
        if proc.poll() is None:
            hook_tree.stop_tree(pid)
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            proc.wait(timeout=1)
    _RUNNING.clear()


def _stop_group(pid: int) -> None:
    """SIGKILL the hook's process group: what it started goes with it (a hook that has
    exited leaves its group behind only when something in it still runs)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
