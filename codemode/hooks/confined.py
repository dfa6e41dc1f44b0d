"""Hooks that run a project's own tool, run in the session's sandbox.

``make fmt``, ``npx prettier``, ``uv run``, ``pytest``: such a tool runs what the
workspace holds (the Makefile's recipes, ``node_modules``, ``.venv``, ``conftest.py``),
which a confined command could have written, and which no trust of the hook's line can
cover (``project_runners``). Run outside the sandbox, the hook would hand that code the
user's every right. So the session runs such a hook as it runs the model's commands:
confined by its sandbox (same backend, writable roots, withheld environment), in the
workspace, without its policy or approvals (the person trusted the hook). A formatter
still rewrites the workspace's files; what it cannot do is what a command cannot.

The sandbox gives a command no stdin and one output, so a small trampoline runs inside
it: it reads the hook's input from a file in the sandbox's scratch folder (made 0600
with a random name, removed once read; a command of the same session could read or
change it meanwhile, as it could the files the hook formats), starts the hook with
pipes, and sends back its stdout and stderr in frames, then its exit status. What the
hook prints is bounded as an unconfined hook's is (``process.OUTPUT_CAP`` a stream: a
hook that prints more is stopped, ``flooded``); at the time limit the whole confined
tree is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from codemode.hooks.process import (
    EXIT_GRACE_S,
    OUTPUT_CAP,
    ProcessResult,
    argv_for,
    folders_refusal,
)
from codemode.locations import launcher

if TYPE_CHECKING:
    from codemode.sandbox.session import SandboxSession

# Frames from the trampoline: a kind byte (O stdout, E stderr, X exit status, F the
# hook printed past the cap) and a 4-byte length, then that many bytes.
_HEAD = struct.Struct(">cI")
_TRAMPOLINE = f"""\
import os, struct, subprocess, sys, threading
path, argv = sys.argv[1], sys.argv[2:]
with open(path, "rb") as f:
    data = f.read()
os.unlink(path)
out = os.fdopen(1, "wb", buffering=0)
lock = threading.Lock()
def frame(kind, body=b""):
    with lock:
        out.write(struct.pack(">cI", kind, len(body)) + body)
child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, close_fds=True, start_new_session=True)
def stop():  # the hook and what it started in its group
    try:
        os.killpg(child.pid, 9)
    except OSError:
        pass
def pump(stream, kind):
    seen = 0
    while chunk := stream.read1(65536):
        seen += len(chunk)
        if seen > {OUTPUT_CAP}:
            frame(b"F")
            stop()
            return
        frame(kind, chunk)
readers = [threading.Thread(target=pump, args=(child.stdout, b"O"), daemon=True),
           threading.Thread(target=pump, args=(child.stderr, b"E"), daemon=True)]
for r in readers:
    r.start()
try:
    child.stdin.write(data)
    child.stdin.close()
except OSError:
    pass
code = child.wait()
for r in readers:  # (what it left holding its output: a short grace, then stopped)
    r.join({EXIT_GRACE_S})
stop()
for r in readers:
    r.join(1)
frame(b"X", str(code).encode())
"""
# Characters of an exit status frame at most (the trampoline's: "-9", "255").
_STATUS_DIGITS = 12
# Bytes of frames read at most: both streams to the cap, and the frames' heads.
_MOST = 2 * OUTPUT_CAP + (1 << 20)


async def run_confined(
    sandbox: SandboxSession,
    command: str,
    stdin: bytes,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    trusted: Mapping[str, str] | None = None,
) -> ProcessResult:
    """Run one hook command in ``sandbox`` (see the module docstring). The launcher's
    checks hold as for an unconfined hook: a named file not trusted, or changed, and
    the hook does not start."""
    from codemode.tools.shell import kill_group

    started = time.perf_counter()
    refused = folders_refusal(trusted)
    if refused is not None:
        return ProcessResult(exit_code=None, error=refused, duration_ms=_ms(started))
    try:
        argv = launcher.resolve(argv_for(command), cwd=cwd, trusted=trusted, env=env)
    except launcher.LaunchRefused as exc:
        return ProcessResult(exit_code=None, error=f"not started: {exc}", duration_ms=_ms(started))
    fd, path = tempfile.mkstemp(prefix=".hook-input-", dir=sandbox.scratch_dir())
    with os.fdopen(fd, "wb") as f:
        f.write(stdin)
    read_fd, write_fd = os.pipe()
    try:
        proc = await sandbox.spawn_trusted(
            [sys.executable, "-I", "-c", _TRAMPOLINE, path, *argv],
            cwd=cwd, env=env, output_fd=write_fd, tool="hook",
        )
    except Exception as exc:  # (no confinement here, a refused root: said, not raised)
        os.close(read_fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        return ProcessResult(exit_code=None, error=f"not started in the sandbox: {exc}",
                             duration_ms=_ms(started))
    finally:
        os.close(write_fd)
    reading = asyncio.ensure_future(_read(read_fd))
    result = ProcessResult(exit_code=None)
    try:
        async with asyncio.timeout(timeout_s):
            await proc.wait()
            frames = await reading
    except TimeoutError:
        result.timed_out = True
        frames = b""
    finally:
        kill_group(proc)
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(proc.wait()), 5)
        sandbox.after_command(proc)
        if not reading.done():
            reading.cancel()
        with contextlib.suppress(OSError):
            os.unlink(path)  # (a hook stopped before the trampoline read it)
    _fill(result, frames)
    result.duration_ms = _ms(started)
    return result


async def _read(fd: int) -> bytes:
    """The frames, up to ``_MOST`` bytes; closes ``fd``."""
    loop = asyncio.get_running_loop()
    os.set_blocking(fd, False)
    got = bytearray()
    done: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk and len(got) < _MOST:
            got.extend(chunk)
        elif not chunk and not done.done():
            done.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await done
    finally:
        loop.remove_reader(fd)
        os.close(fd)
    return bytes(got)


def _fill(result: ProcessResult, frames: bytes) -> None:
    out, err = bytearray(), bytearray()
    i = 0
    while i + _HEAD.size <= len(frames):
        kind, length = _HEAD.unpack_from(frames, i)
        body = frames[i + _HEAD.size : i + _HEAD.size + length]
        i += _HEAD.size + length
        if kind == b"O":
            out += body
        elif kind == b"E":
            err += body
        elif kind == b"F":
            result.flooded = True
        elif kind == b"X" and len(body) <= _STATUS_DIGITS and body.lstrip(b"-").isdigit():
            # (bounded: the hook can write frames itself, through its parent's fd 1 in
            # /proc, and `int` refuses thousands of digits with an exception)
            result.exit_code = int(body)
    result.stdout = out.decode("utf-8", "replace")
    result.stderr = err.decode("utf-8", "replace")
    if result.exit_code is None and not (result.timed_out or result.flooded):
        result.error = "it stopped in the sandbox before it said how it ended"


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
