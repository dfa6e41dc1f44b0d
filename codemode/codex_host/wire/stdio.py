"""The host's stdin and stdout, whatever they are.

The event loop can wait on a pipe, a socket or a terminal; not on a regular file or
``/dev/null``, which epoll refuses (asyncio then prints a traceback from inside the loop
and never reads at all: the host hung). Nor is a terminal left to it: asyncio makes what
it waits on non-blocking and leaves it so, and a terminal's flag is shared by every
process on it, the shell after us included. ``through_loop`` tells which it is before
anything is registered; ``pump`` reads the others on a thread, handing what it reads to
the loop, then the end of input.

``writer`` writes stdout through the loop when it can wait on it: a client that stops
reading then holds only the bytes written for it, and the loop goes on (time limits,
other sessions), told to stop reading that client (``pause``) until it reads again
(``resume``). A file the loop cannot wait on, or a terminal, is written directly.
"""

from __future__ import annotations

import asyncio
import os
import select
import threading
from collections.abc import Awaitable, Callable
from typing import NamedTuple

Write = Callable[[bytes], object]


def through_loop(fd: int) -> bool:
    """Whether the host reads or writes ``fd`` through the event loop: a pipe or socket
    (not a file the loop cannot wait on, nor a terminal)."""
    return _pollable(fd) and not os.isatty(fd)


def _pollable(fd: int) -> bool:
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


class Out(NamedTuple):
    """How to write stdout, close it, and wait until what was written has left."""

    write: Write
    close: Callable[[], object]
    flushed: Callable[[], Awaitable[None]]


async def writer(
    fd: int,
    lost: Callable[[Exception | None], object],
    pause: Callable[[], object],
    resume: Callable[[], object],
) -> Out:
    """``fd``'s ``Out``; ``lost`` runs when the reader closes its end."""
    if not through_loop(fd):
        return Out(lambda data: _write_all(fd, data), lambda: None, _nothing)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_write_pipe(
        lambda: _WriteEnd(lost, pause, resume), os.fdopen(fd, "wb", buffering=0)
    )

    async def flushed() -> None:
        # Once, at the end (no event says a buffer emptied): what the client has not
        # read yet still reaches it, as a blocking write would have; a client that has
        # closed its end is written no more.
        while transport.get_write_buffer_size() and not transport.is_closing():
            await asyncio.sleep(0.01)

    return Out(transport.write, transport.close, flushed)


async def _nothing() -> None:
    pass


class _WriteEnd(asyncio.BaseProtocol):
    def __init__(
        self,
        lost: Callable[[Exception | None], object],
        pause: Callable[[], object],
        resume: Callable[[], object],
    ) -> None:
        self._lost, self._pause, self._resume = lost, pause, resume

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost(exc)

    def pause_writing(self) -> None:
        self._pause()

    def resume_writing(self) -> None:
        self._resume()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
