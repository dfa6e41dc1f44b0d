"""``asyncio.run`` for the entry points, with no Ctrl-C held up.

``asyncio.run`` handles Ctrl-C with a handler written in Python, and Python runs a
handler only when the interpreter next looks: a SIGINT that lands after the event
loop's last look and before its wait (epoll) begins is handled when that wait ends,
which for a loop waiting on what the Ctrl-C was to stop (a program, a command, a
client) may be much later, or never. Python's signal wake-up pipe, watched by the
loop, ends that wait for every signal, so the handler runs at once
(tests/test_interruptible.py makes a signal land so every time).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, its loop woken by every signal."""
    return asyncio.run(_woken(main))


async def _woken(main: Coroutine[Any, Any, T]) -> T:
    if threading.current_thread() is not threading.main_thread():
        return await main  # (only the main thread takes Python's signals)
    loop = asyncio.get_running_loop()
    wake, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    previous = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    loop.add_reader(wake, _drain, wake)
    try:
        return await main
    finally:
        loop.remove_reader(wake)
        # Whoever replaced the pipe meanwhile (asyncio's add_signal_handler puts its
        # own) keeps theirs; else the one before comes back.
        if (current := signal.set_wakeup_fd(previous)) != wake_w:
            signal.set_wakeup_fd(current)
        os.close(wake)
        os.close(wake_w)


def _drain(fd: int) -> None:
    """The wake-up is what counts; the bytes (signal numbers) are Python's to handle."""
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass
