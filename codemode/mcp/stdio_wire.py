"""``mcp-server``'s stdio wire: the process's fds 0 and 1, handed to the MCP SDK.

Like the SDK's own stdio transport, fds 0 and 1 are taken off the process while it
serves: 0 reads the null device and 1 goes to stderr, so a stray ``print`` or a child
process cannot corrupt the wire. A thread reads the client's lines; the SDK's transport
awaits them (``reader()``) and writes its answers (``writer()``) on its event loop, with
no thread hop per message (the SDK's own files hop to a worker thread for every line
read and every write: milliseconds of a warm start's handshake). At the end of
the input the SDK hears of it only once every request read has been answered (or
cancelled, or ``drain_s`` has passed), so a client that writes its last request and
closes its end at once (a pipe) still gets every answer.

What a client can make it hold is bounded: a line of more than ``MAX_LINE`` bytes, or
one holding more JSON elements or a longer integer than ``process/json_cost.py`` allows,
is refused before the SDK decodes it (answered with an error where its id can be read,
said on stderr); lines read and not yet taken are held up to ``QUEUED`` bytes of memory
(a line with one character past U+FFFF takes four for each character), past which the
thread stops reading and the client waits on its pipe.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import threading
from collections import deque

from codemode.process.json_cost import TooCostly, elements_over, loads, refusal, refused_answer

MAX_LINE = 64 << 20  # bytes in one message
QUEUED = 64 << 20  # bytes of lines read and not yet taken by the SDK


class StdioWire:
    """The stdio wire; see the module's docstring."""

    def __init__(self) -> None:
        # Lines read and not yet taken (None: the end of the input), and the future the
        # SDK's reader awaits when there are none (resolved on its loop by the thread).
        self._lines: deque[str | None] = deque()
        self._lines_lock = threading.Lock()
        self._queued = 0  # their bytes, against QUEUED
        self._room = threading.Condition(self._lines_lock)
        self._waiter: asyncio.Future[None] | None = None
        # Requests read and not answered yet (their ids as JSON text): at the end of
        # the input the SDK hears of it only once they are, so a client that writes
        # its last request and closes its end still gets every answer.
        self._open: set[str] = set()
        self._settled = threading.Condition()
        self.drain_s = 60.0  # the longest that may take (the server sets its time limit)
        self._in = os.dup(0)
        self._out = os.dup(1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        self._write_lock = threading.Lock()

    @classmethod
    def start(cls) -> StdioWire:
        wire = cls()
        threading.Thread(target=wire._read, name="mcp-stdin", daemon=True).start()
        return wire

    def _send(self, data: bytes) -> None:
        with self._write_lock:
            view = memoryview(data)
            while view:
                view = view[os.write(self._out, view) :]

    def _read(self) -> None:
        # A line is looked for in what came since the last look (a long line costs its
        # bytes once, not once per chunk), and one past MAX_LINE is dropped as it comes.
        buffer, looked, skipping = bytearray(), 0, False
        try:
            while True:
                chunk = os.read(self._in, 65536)
                if not chunk:
                    break
                buffer += chunk
                while (end := buffer.find(b"\n", looked)) >= 0:
                    raw = bytes(buffer[:end])
                    del buffer[: end + 1]
                    looked = 0
                    if skipping:  # the end of a line already refused
                        skipping = False
                    else:
                        self._line(raw)
                looked = len(buffer)
                if len(buffer) > MAX_LINE:
                    if not skipping:
                        self._refuse(bytes(buffer[:4096]), f"longer than {MAX_LINE} bytes")
                    buffer, looked, skipping = bytearray(), 0, True
            if buffer and not skipping:
                self._line(bytes(buffer))
        finally:
            self._put(None)

    def _line(self, raw: bytes) -> None:
        if elements_over(raw):
            self._refuse(raw[:4096], f"holding {refusal()}")
            return
        try:
            message = loads(raw)
        except TooCostly as exc:  # (the SDK's decoder would pay for it too, and the tool)
            self._refuse(raw[:4096], f"holding {exc}")
            return
        except (ValueError, RecursionError):  # (the SDK answers it: not JSON-RPC)
            message = None
        self._track(message)
        self._put(raw.decode("utf-8", "replace") + "\n")

    def _refuse(self, head: bytes, why: str) -> None:
        """A message refused unread: its request answered with an error, where its id
        comes before its first nested value (as JSON-RPC clients write it)."""
        os.write(2, f"mcp-server: refused a message {why}\n".encode())
        answer = refused_answer(head, why)
        if answer is not None:
            self._send(answer)

    def _put(self, line: str | None) -> None:
        with self._lines_lock:
            # Past QUEUED the reader waits for the SDK to take lines (the end of input,
            # None, is never held back).
            while line is not None and self._queued > QUEUED:
                self._room.wait()
            self._lines.append(line)
            self._queued += _held(line)
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            try:
                waiter.get_loop().call_soon_threadsafe(_wake, waiter)
            except RuntimeError:  # its loop has closed: nobody reads any more
                pass

    async def _take(self) -> str | None:
        """The next line (None at the end of the input), awaited on the running loop."""
        while True:
            with self._lines_lock:
                if self._lines:
                    line = self._lines.popleft()
                    if line is not None:
                        self._queued -= _held(line)
                        self._room.notify()
                    return line
                waiter = self._waiter = asyncio.get_running_loop().create_future()
            await waiter

    def _track(self, message: object) -> None:
        if not isinstance(message, dict):
            return
        with self._settled:
            if "method" in message and "id" in message:
                self._open.add(json.dumps(message["id"]))
            elif message.get("method") == "notifications/cancelled":
                params = message.get("params")
                if isinstance(params, dict) and "requestId" in params:
                    self._open.discard(json.dumps(params["requestId"]))
                    self._settled.notify_all()

    def _drained(self) -> None:
        """Wait (up to ``drain_s``) until every request read has been answered."""
        with self._settled:
            self._settled.wait_for(lambda: not self._open, timeout=self.drain_s)

    def reader(self) -> _LineReader:
        """Text lines for the SDK's transport (its ``stdin``: ``async for``)."""
        return _LineReader(self)

    def writer(self) -> _Writer:
        """Where the SDK's transport writes (its ``stdout``: awaited ``write``, ``flush``).
        Written at once, from the loop: a client that does not read its answers holds up
        only its own server."""
        return _Writer(self)

    def _from_sdk(self, text: str) -> None:
        replied = _REPLY.match(text)
        if replied is not None or self._open:
            reply_id = (
                json.dumps(json.loads(replied.group(1))) if replied is not None else _reply_id(text)
            )
            if reply_id is not None:
                with self._settled:
                    self._open.discard(reply_id)
                    self._settled.notify_all()
        self._send(text.encode("utf-8"))


# How the SDK writes an answer: its id comes first (checked without parsing the result).
_REPLY = re.compile(r'\{"jsonrpc":"2\.0","id":(-?\d+|"(?:[^"\\]|\\.)*"),"(?:result|error)"')


def _reply_id(text: str) -> str | None:
    """The id (as JSON text) of an answer the regular expression did not recognise."""
    try:
        message = json.loads(text)
    except ValueError:
        return None
    if isinstance(message, dict) and "id" in message and ({"result", "error"} & message.keys()):
        return json.dumps(message["id"])
    return None


def _held(line: str | None) -> int:
    """What ``line`` holds of memory: a line with one character past U+FFFF takes four
    bytes for each of its characters."""
    return sys.getsizeof(line) if line is not None else 0


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _LineReader:
    def __init__(self, wire: StdioWire) -> None:
        self._wire = wire
        self._done = False

    def __aiter__(self) -> _LineReader:
        return self

    async def __anext__(self) -> str:
        if self._done:
            raise StopAsyncIteration
        line = await self._wire._take()
        if line is None:
            # The end of the input, once what was asked is answered (a wait off the
            # loop, which is answering meanwhile).
            await asyncio.to_thread(self._wire._drained)
            self._done = True
            raise StopAsyncIteration
        return line


class _Writer:
    def __init__(self, wire: StdioWire) -> None:
        self._wire = wire
        self._buffer = ""

    async def write(self, text: str) -> int:
        self._buffer += text
        while "\n" in self._buffer:
            line, self._buffer = self._buffer.split("\n", 1)
            self._wire._from_sdk(line + "\n")
        return len(text)

    async def flush(self) -> None:
        pass
