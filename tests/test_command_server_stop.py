"""Stopping a command server's bubblewrap ends what is still in its process group too.

bubblewrap's first process in its sandbox stays in bubblewrap's process group until it
makes a session of its own (``--new-session``); killed before it has set itself to die
with bubblewrap, it was left waiting for ever on bubblewrap's word to go on (seen once:
a session closed while its server was being started ahead, ``test_command_server_ahead``).
These tests stand a shell in for bubblewrap: its background job is in its group the same
way. Real processes, no bubblewrap needed.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from codemode.sandbox.server import pidfd_process, server_handle

# The shell leads its own session (as bubblewrap does); its job stays in its group.
_SCRIPT = "sleep 300 & echo $!; wait"


def _gone(pid: int, seconds: float = 5.0) -> bool:
    """Whether ``pid`` has ended (a zombie nobody reaps counts: it runs no more)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.02)
    return False


def _read_pid(fd: int) -> int:
    data = b""
    deadline = time.monotonic() + 10
    while not data.endswith(b"\n"):
        assert time.monotonic() < deadline, "the shell never said its job's pid"
        data += os.read(fd, 64)
    return int(data)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


async def test_stopping_the_server_ends_what_is_still_in_its_group(tmp_path: Path) -> None:
    out_r, out_w = os.pipe()
    proc = await pidfd_process.start(
        ["sh", "-c", _SCRIPT], cwd=tmp_path, env={"PATH": os.environ["PATH"]}, output_fd=out_w
    )
    os.close(out_w)
    job = _read_pid(out_r)
    try:
        assert isinstance(proc, pidfd_process.PidfdProcess)
        assert os.getpgid(job) == proc.pid  # in the leader's group, as bubblewrap's child is
        server_handle.stop(proc)
        assert _gone(job), "a process of the stopped server's group outlived it"
        assert proc.returncode == -signal.SIGKILL
    finally:
        _kill(job)
        os.close(out_r)


def test_a_launch_discarded_from_its_thread_ends_its_group(tmp_path: Path) -> None:
    out_r, out_w = os.pipe()
    spawned = pidfd_process.spawn(
        ["sh", "-c", _SCRIPT], cwd=tmp_path, env={"PATH": os.environ["PATH"]}, output_fd=out_w
    )
    os.close(out_w)
    if spawned is None:
        os.close(out_r)
        pytest.skip("this kernel offers no pidfds: the launch thread spawns nothing itself")
    popen, pidfd = spawned
    job = _read_pid(out_r)
    try:
        pidfd_process.kill_group(popen)
        assert _gone(job)
        assert popen.wait(10) == -signal.SIGKILL
    finally:
        _kill(job)
        os.close(pidfd)
        os.close(out_r)


def test_a_reaped_leaders_number_is_never_signalled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    spawned = pidfd_process.spawn(["true"], cwd=tmp_path, env={}, output_fd=devnull)
    os.close(devnull)
    if spawned is None:
        pytest.skip("this kernel offers no pidfds")
    popen, pidfd = spawned
    os.close(pidfd)
    popen.wait(10)
    signalled: list[int] = []
    monkeypatch.setattr(os, "killpg", lambda pid, sig: signalled.append(pid))
    pidfd_process.kill_group(popen)  # its number may be another group's by now
    assert signalled == []

