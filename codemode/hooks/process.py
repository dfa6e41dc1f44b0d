"""Running one hook command, contained.

The command runs as the user's own command would: through ``/bin/sh -c`` (or directly
when it is one plain word list), outside the command sandbox, in the workspace, with
the session's environment minus the withheld secrets. It gets its input on stdin and
its own process group, so that a timeout stops it *and everything it started*. What it
prints is read up to ``OUTPUT_CAP`` bytes a stream: a hook that prints more is stopped
(its output could not be trusted whole anyway). A hook that exits while something it
left behind still holds its output open is not waited for past a short grace.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

# Bytes kept of a hook's stdout, and of its stderr.
OUTPUT_CAP = 1 << 20
# After the hook's own process exits: how long its output may stay open (a background
# child it left) before its process group is stopped.
EXIT_GRACE_S = 0.5
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


def argv_for(command: str) -> list[str]:
    """The command as an argument vector: split directly when it is plain words (one
    process less to start), else given to ``/bin/sh -c``."""
    if not (_SHELL_CHARS & set(command)):
        words = command.split()
        if words:
            return words
    return ["/bin/sh", "-c", command]


async def run_command(
    command: str,
    stdin: bytes,
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
) -> ProcessResult:
    started = time.perf_counter()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv_for(command),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,  # its own process group: stopped whole
        )
    except OSError as exc:
        return ProcessResult(
            exit_code=None,
            error=f"cannot start it: {exc.strerror or exc}",
            duration_ms=_ms(started),
        )
    result = ProcessResult(exit_code=None)
    flood = asyncio.Event()
    out: list[bytes] = []
    err: list[bytes] = []
    assert proc.stdout is not None and proc.stderr is not None and proc.stdin is not None
    readers = [
        asyncio.ensure_future(_read(proc.stdout, out, flood)),
        asyncio.ensure_future(_read(proc.stderr, err, flood)),
    ]
    feeder = asyncio.ensure_future(_feed(proc.stdin, stdin))
    waiter = asyncio.ensure_future(proc.wait())
    flooded = asyncio.ensure_future(flood.wait())
    stop = True  # unless it exits and lets go of its output
    try:
        done, _ = await asyncio.wait(
            [waiter, flooded], timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
        if flooded in done:
            result.flooded = True
        elif waiter in done:
            result.exit_code = waiter.result()
            # Its output closes when it exits, unless a child it left holds it open:
            # then that child is stopped too. One that let go of it may go on.
            _, open_ = await asyncio.wait(readers, timeout=EXIT_GRACE_S)
            stop = bool(open_)
        else:
            result.timed_out = True
    finally:
        if stop:
            _stop_group(proc.pid)
        for task in (feeder, flooded, *readers):
            task.cancel()
        if not waiter.done():
            with contextlib.suppress(asyncio.CancelledError, ProcessLookupError):
                await asyncio.shield(waiter)
    result.stdout = b"".join(out).decode("utf-8", "replace")
    result.stderr = b"".join(err).decode("utf-8", "replace")
    result.duration_ms = _ms(started)
    return result


async def _read(stream: asyncio.StreamReader, into: list[bytes], flood: asyncio.Event) -> None:
    size = 0
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return
        size += len(chunk)
        if size > OUTPUT_CAP:
            flood.set()
            return
        into.append(chunk)


async def _feed(stdin: asyncio.StreamWriter, data: bytes) -> None:
    # A hook that does not read its input (or exits first) is not an error.
    with contextlib.suppress(OSError, ConnectionError):
        stdin.write(data)
        await stdin.drain()
        stdin.close()


def _stop_group(pid: int) -> None:
    """SIGKILL the hook's process group: what it started goes with it (a hook that has
    exited leaves its group behind only when something in it still runs)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)

