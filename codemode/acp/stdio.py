"""stdin/stdout as asyncio streams for the ACP connection, whatever they are.

The SDK's own helper hands both to the event loop's pipe transports, which refuse a
regular file and cannot poll ``/dev/null`` (epoll says EPERM): ``interpreter acp
</dev/null`` then printed an asyncio traceback and hung. Pipes, sockets and terminals
still go through the loop; anything else is read by a thread and written directly.

What the client can make the agent hold is bounded (docs/threat-model.md, family 6):
the SDK gathers a line longer than its reader's limit piece by piece with no end, and
decodes whatever it gathered. ``BoundedLines`` hands it lines of at most ``MAX_LINE``
bytes that ``json_cost.too_costly`` lets pass (elements, an integer's digits); another
is answered with a JSON-RPC error where its id can be read (said on stderr) and the SDK
sees an empty line.
"""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from collections.abc import Callable
from typing import Any

from codemode.process.json_cost import refused_answer, too_costly

_CHUNK = 1 << 16
MAX_LINE = 64 << 20  # bytes in one message
# What the reader holds before it stops reading (the pipe then holds the client): the
# unit a long line is gathered in, not a bound on the line.
_READ_AHEAD = 1 << 20


class BoundedLines(asyncio.StreamReader):
    """A stream reader whose ``readuntil`` gives no line past ``MAX_LINE`` bytes or the
    element bound: such a line is refused (``answer`` gets the error response, when its
    id can be read) and an empty line is given in its place."""

    answer: Callable[[bytes], object] = staticmethod(lambda data: None)

    async def readuntil(self, separator: Any = b"\n") -> bytes:
        separator = bytes(separator)
        parts: list[bytes] = []
        size, head, over, ended = 0, b"", False, False
        while True:
            try:
                piece = await super().readuntil(separator)
                done = True
            except asyncio.LimitOverrunError as exc:
                piece, done = await super().readexactly(exc.consumed), False
            except asyncio.IncompleteReadError as exc:
                piece, done, ended = exc.partial, True, True
            if len(head) < 4096:
                head += piece[: 4096 - len(head)]  # (what a refusal reads the id from)
            size += len(piece)
            over = over or size > MAX_LINE
            if over:
                parts.clear()  # past the bound: dropped as it comes
            else:
                parts.append(piece)
            if done:
                break
        line = separator
        if over:
            self._refuse(head, f"longer than {MAX_LINE} bytes")
        elif (why := too_costly(joined := b"".join(parts))) is not None:
            self._refuse(head, f"holding {why}")
        else:
            line = joined
        if ended:
            raise asyncio.IncompleteReadError(b"" if line == separator else line, None)
        return line

    def _refuse(self, head: bytes, why: str) -> None:
        os.write(2, f"acp: refused a message {why}\n".encode())
        answer = refused_answer(head, why)
        if answer is not None:
            self.answer(answer)


_STDIN, _STDOUT = 0, 1  # the descriptors, not sys.stdin/stdout: those are None when closed


def _pollable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _feed_from_thread(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader) -> None:
    fd = _STDIN

    def read() -> None:
        try:
            while True:
                data = os.read(fd, _CHUNK)
                if not data:
                    break
                loop.call_soon_threadsafe(reader.feed_data, data)
        except OSError:
            pass  # a closed or unreadable stdin ends the connection like EOF
        finally:
            loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=read, name="acp-stdin", daemon=True).start()


class _Drain(asyncio.Protocol):
    """The protocol half a StreamWriter needs: flow control it can wait on."""

    def __init__(self) -> None:
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        self._waiter = None

    async def _drain_helper(self) -> None:
        if self._paused:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter


class _DirectWriter(asyncio.WriteTransport):
    """Writes straight to a file descriptor (a regular file: never blocks for long)."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self._closing = False

    def write(self, data: Any) -> None:
        if self._closing:
            return
        view = memoryview(bytes(data))
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:
            self._closing = True  # the reader went away; nothing left to tell

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True

    def can_write_eof(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


async def stdio_streams() -> tuple[asyncio.StreamWriter, asyncio.StreamReader]:
    """(writer to stdout, reader from stdin), in the order ``acp.run_agent`` takes them."""
    loop = asyncio.get_running_loop()
    reader = BoundedLines(limit=_READ_AHEAD)
    if not _open(_STDIN):
        reader.feed_eof()  # started with stdin closed: nothing will ever come
    elif _pollable(_STDIN):
        stdin = open(_STDIN, "rb", buffering=0, closefd=False)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    else:
        _feed_from_thread(loop, reader)
    protocol = _Drain()
    transport: asyncio.BaseTransport
    if _pollable(_STDOUT):
        stdout = open(_STDOUT, "wb", buffering=0, closefd=False)
        transport, _ = await loop.connect_write_pipe(lambda: protocol, stdout)
    else:
        transport = _DirectWriter(_STDOUT)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    reader.answer = writer.write
    return writer, reader
