"""An entry point's event loop ends its wait for any Ctrl-C (``process.interruptible``).

``asyncio.run`` handles Ctrl-C with a handler written in Python, which runs only when
the interpreter next looks: a SIGINT that landed after the loop's last look and before
its wait began was handled when that wait ended, and a loop waiting on what the Ctrl-C
was to stop waited on. Here the signal is made to land so every time: the main thread
blocks SIGINT and a helper thread takes it, so the main thread's wait is never
interrupted by it (only a wake-up pipe can end that wait)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

_PROGRAM = r"""
import asyncio, signal, sys, threading, time
from codemode.process import interruptible


def helper() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    time.sleep(300)


async def main() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
    threading.Thread(target=helper, daemon=True).start()
    print("waiting", flush=True)
    await asyncio.get_running_loop().create_future()  # (nothing else ever wakes the loop)


run = asyncio.run if sys.argv[1] == "plain" else interruptible.run
try:
    run(main())
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def _until_waiting(pid: int) -> None:
    """Until the main thread sleeps in the loop's epoll wait: a signal that lands before
    (while it still runs Python) is handled by any loop, and shows nothing."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/wchan") as f:
            wchan = f.read()
        if wchan in ("", "0"):  # not shown to us: give it time instead
            time.sleep(0.5)
            return
        if "epoll" in wchan:
            return
        time.sleep(0.005)
    raise AssertionError(f"the loop never waited (wchan {wchan!r})")


def _interrupted(how: str, within: float) -> tuple[int, str] | None:
    proc = subprocess.Popen([sys.executable, "-c", _PROGRAM, how], stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "waiting\n"
    _until_waiting(proc.pid)
    proc.send_signal(2)
    try:
        out, _ = proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None
    return proc.returncode, out


def test_a_ctrl_c_that_does_not_interrupt_the_loops_wait_still_ends_it() -> None:
    assert _interrupted("woken", 60) == (130, "interrupted\n")


def test_without_the_wake_up_pipe_that_ctrl_c_is_held() -> None:
    """What the test above guards against, shown on plain ``asyncio.run`` (if a Python
    release makes it wake up by itself, this says so and the helper can go)."""
    if _interrupted("plain", 3) is not None:
        pytest.fail("plain asyncio.run now ends its wait for such a Ctrl-C: "
                    "process.interruptible is no longer needed")  # fmt: skip
