"""``mcp-server`` over stdio answers the handshake before the MCP SDK has loaded.

Importing the official SDK and building the host (tools, declarations, sandbox) takes
about a second on a quiet machine and several on a loaded one, longer than some clients
wait for the handshake. So the server takes the wire first (``EarlyStdio.start``, before
any heavy import): a thread reads fd 0 and, when the first message is ``initialize``
(or ``server/discover``, which the official client sends first), answers it at once
with the result the SDK would give (the same server info, capabilities, instructions
and versions). Everything read, that first message included, is then fed to the SDK
(``reader()``), so its session starts as usual; its own answer to that first message is
dropped from the wire (``writer()``) after a check that it says the same (a difference
is reported on stderr). Later requests
(``tools/list``...) wait in the pipe until the SDK serves them.

Like the SDK's own stdio transport, fds 0 and 1 are taken off the process while it
serves: 0 reads the null device and 1 goes to stderr, so a stray ``print`` or a child
process cannot corrupt the wire.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import re
import sys
import threading
from collections.abc import Callable
from typing import Any

INSTRUCTIONS = "Run JavaScript programs against the host's tools with `execute`."
# What the SDK's MCPServer declares for a server with tools (and no resources or
# prompts of its own), in the handshake era and in the per-request era (answering
# `server/discover`, which the official client sends first); ``EarlyStdio`` checks each
# against the SDK's own answer.
CAPABILITIES: dict[str, Any] = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}
DISCOVER_CAPABILITIES: dict[str, Any] = {
    "prompts": {"listChanged": True},
    "resources": {"listChanged": True, "subscribe": True},
    "tools": {"listChanged": True},
}


def _versions() -> Any:
    """The SDK's protocol versions (its ``mcp_types/version.py``), read without
    importing the package (whose ``__init__`` loads every model)."""
    spec = importlib.util.find_spec("mcp_types")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("mcp_types (the MCP SDK) is not installed")
    path = os.path.join(next(iter(spec.submodule_search_locations)), "version.py")
    module_spec = importlib.util.spec_from_file_location("_codemode_mcp_versions", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def initialize_result(requested: object, version: str) -> dict[str, Any]:
    """The answer to ``initialize`` (the handshake era)."""
    versions = _versions()
    known = versions.HANDSHAKE_PROTOCOL_VERSIONS
    return {
        "capabilities": CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "protocolVersion": requested if requested in known else versions.LATEST_HANDSHAKE_VERSION,
        "serverInfo": {"name": "codemode", "version": version},
    }


def discover_result(version: str) -> dict[str, Any]:
    """The answer to ``server/discover`` (the per-request era)."""
    return {
        "cacheScope": "private",
        "capabilities": DISCOVER_CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "resultType": "complete",
        "supportedVersions": list(_versions().MODERN_PROTOCOL_VERSIONS),
        "ttlMs": 0,
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "codemode", "version": version}},
    }


class EarlyStdio:
    """The stdio wire, taken at start-up; see the module's docstring."""

    def __init__(self, version: str) -> None:
        self.version = version
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._answered: tuple[object, dict[str, Any]] | None = None  # (id, result)
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
    def start(cls, version: str) -> EarlyStdio:
        early = cls(version)
        threading.Thread(target=early._read, name="mcp-stdin", daemon=True).start()
        return early

    def _send(self, data: bytes) -> None:
        with self._write_lock:
            view = memoryview(data)
            while view:
                view = view[os.write(self._out, view) :]

    def _read(self) -> None:
        pending = b""
        first = True
        try:
            while True:
                chunk = os.read(self._in, 65536)
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    if first:
                        first = False
                        self._answer(raw)
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

    def _answer(self, raw: bytes) -> None:
        try:
            message = json.loads(raw)
        except ValueError:
            return
        if not isinstance(message, dict) or "id" not in message:
            return
        method = message.get("method")
        params = message.get("params")
        try:
            if method == "initialize":
                requested = params.get("protocolVersion") if isinstance(params, dict) else None
                result = initialize_result(requested, self.version)
            elif method == "server/discover":
                result = discover_result(self.version)
            else:
                return
        except ImportError:
            return  # the SDK will say what is missing
        self._answered = (message["id"], result)
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        self._send(json.dumps(reply, separators=(",", ":")).encode() + b"\n")

    def reader(self) -> _LineReader:
        """Text lines for the SDK's transport (``anyio.wrap_file``)."""
        return _LineReader(self._lines, self._drained)

    def writer(self) -> _Writer:
        """Where the SDK's transport writes; drops its answer to an early initialize."""
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
        answered = self._answered
        if answered is not None:
            try:
                message = json.loads(text)
            except ValueError:
                message = None
            if isinstance(message, dict) and message.get("id") == answered[0] and (
                "result" in message or "error" in message
            ):
                self._answered = None
                if message.get("result") != answered[1]:
                    print(
                        "codemode mcp-server: the early handshake answer differs from the "
                        f"SDK's: {json.dumps(message)[:500]}",
                        file=sys.stderr,
                    )
                return
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
    def __init__(self, early: EarlyStdio) -> None:
        self._early = early
        self._buffer = ""

    def write(self, text: str) -> int:
        self._buffer += text
        while "\n" in self._buffer:
            line, self._buffer = self._buffer.split("\n", 1)
            self._early._from_sdk(line + "\n")
        return len(text)

    def flush(self) -> None:
        pass
