"""Reading the host's stdin whatever it is.

The event loop can wait on a pipe, a socket or a terminal; not on a regular file or
``/dev/null``, which epoll refuses (asyncio then prints a traceback from inside the loop
and never reads at all: the host hung). ``pollable`` tells which it is before anything is
registered, and ``pump`` reads the others on a thread, handing what it reads to the loop,
then the end of input.
"""

from __future__ import annotations

import asyncio
import os
import select
import threading
from collections.abc import Callable


def pollable(fd: int) -> bool:
    """Whether the event loop can wait on ``fd`` (a pipe, socket or terminal)."""
    probe = select.epoll()
    try:
        probe.register(fd, select.EPOLLIN)
    except OSError:
        return False
    finally:
        probe.close()
    return True


def pump(
    loop: asyncio.AbstractEventLoop,
    fd: int,
    on_data: Callable[[bytes], object],
    on_end: Callable[[], object],
) -> None:
    """Read ``fd`` to its end on a daemon thread; ``on_data`` and ``on_end`` run in the
    loop."""

    def run() -> None:
        try:
            try:
                while data := os.read(fd, 65536):
                    loop.call_soon_threadsafe(on_data, data)
            except OSError:
                pass
            loop.call_soon_threadsafe(on_end)
        except RuntimeError:
            pass  # the loop closed first: the host ended without waiting for its input

    threading.Thread(target=run, name="stdin", daemon=True).start()
