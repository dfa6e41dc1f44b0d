"""``mcp-server``'s stdio wire: the process's fds 0 and 1, handed to the MCP SDK.

Like the SDK's own stdio transport, fds 0 and 1 are taken off the process while it
serves: 0 reads the null device and 1 goes to stderr, so a stray ``print`` or a child
process cannot corrupt the wire. A thread reads the client's lines for the SDK
(``reader()``); what the SDK writes goes to the client (``writer()``). At the end of
the input the SDK hears of it only once every request read has been answered (or
cancelled, or ``drain_s`` has passed), so a client that writes its last request and
closes its end at once (a pipe) still gets every answer.
"""

from __future__ import annotations

import json
import os
import queue
import re
import threading
from collections.abc import Callable


class StdioWire:
    """The stdio wire; see the module's docstring."""

    def __init__(self) -> None:
        self._lines: queue.Queue[str | None] = queue.Queue()
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
        pending = b""
        try:
            while True:
                chunk = os.read(self._in, 65536)
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    self._track(raw)
                    self._lines.put(raw.decode("utf-8", "replace") + "\n")
            if pending:
                self._lines.put(pending.decode("utf-8", "replace"))
        finally:
            self._lines.put(None)

    def _track(self, raw: bytes) -> None:
        try:
            message = json.loads(raw)
        except ValueError:
            return
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
        """Text lines for the SDK's transport (``anyio.wrap_file``)."""
        return _LineReader(self._lines, self._drained)

    def writer(self) -> _Writer:
        """Where the SDK's transport writes."""
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


class _LineReader:
    def __init__(self, lines: queue.Queue[str | None], drained: Callable[[], None]) -> None:
        self._lines = lines
        self._drained = drained
        self._done = False

    def readline(self) -> str:
        if self._done:
            return ""
        line = self._lines.get()
        if line is None:
            self._drained()  # the end of the input, once what was asked is answered
            self._done = True
            return ""
        return line

    def __iter__(self) -> _LineReader:
        return self

    def __next__(self) -> str:
        line = self.readline()
        if not line:
            raise StopIteration
        return line


class _Writer:
    def __init__(self, wire: StdioWire) -> None:
        self._wire = wire
        self._buffer = ""

    def write(self, text: str) -> int:
        self._buffer += text
        while "\n" in self._buffer:
            line, self._buffer = self._buffer.split("\n", 1)
            self._wire._from_sdk(line + "\n")
        return len(text)

    def flush(self) -> None:
        pass
