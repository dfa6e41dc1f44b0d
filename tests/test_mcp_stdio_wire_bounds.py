"""What one client of `interpreter mcp-server` over stdio can make the server hold or
spend reading its lines (docs/threat-model.md, family 6). A line with no end was once
gathered by copying all of it again for every 64 KiB that came (100 MiB: minutes of CPU);
a line of tiny JSON elements was decoded whole, twice; and lines the SDK had not taken
yet were held without a bound while the client wrote on. Now: a line past ``MAX_LINE`` is
dropped as it comes, one past the element bound is answered with an error unread, and
past ``QUEUED`` bytes the server stops reading until the SDK takes lines."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from typing import Any

from codemode.mcp.stdio_wire import MAX_LINE, QUEUED
from codemode.process.json_cost import MAX_ELEMENTS
from tests.codex_host_support import INTERPRETER
from tests.stdio_peers import answer as _answer
from tests.stdio_peers import cpu_s as _cpu_s
from tests.stdio_peers import peak_mb as _peak_mb


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n"


_INITIALIZE = _line({"id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "bounds-test", "version": "1"},
}})  # fmt: skip


def _server() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [INTERPRETER, "mcp-server"], env=dict(os.environ, CODEMODE_WARM="0"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def test_a_line_with_no_end_costs_its_bytes_once_and_is_dropped_past_the_bound() -> None:
    proc = _server()
    assert proc.stdin is not None
    try:
        proc.stdin.write(_INITIALIZE)
        proc.stdin.flush()
        _answer(proc, 1)
        cpu, peak = _cpu_s(proc.pid), _peak_mb(proc.pid)
        chunk = b"x" * (1 << 20)
        for _ in range((MAX_LINE >> 20) + 36):  # past the bound, then on
            proc.stdin.write(chunk)
        proc.stdin.write(b"\n" + _line({"id": 2, "method": "ping"}))
        proc.stdin.flush()
        assert "result" in _answer(proc, 2, timeout_s=120)
        spent, grown = _cpu_s(proc.pid) - cpu, _peak_mb(proc.pid) - peak
        # Gathered by copying it again for every 64 KiB, 100 MiB cost minutes of CPU.
        assert spent < 10, f"the server spent {spent:.1f} s of CPU on one line"
        assert grown < 2.5 * (MAX_LINE >> 20), f"its peak memory grew {grown:.0f} MiB"
    finally:
        proc.stdin.close()
        proc.wait(60)
    assert proc.stderr is not None
    said = proc.stderr.read()
    assert b"refused a message longer than" in said and b"Traceback" not in said, said[-2000:]


def test_a_request_of_tiny_elements_is_answered_with_an_error_unread() -> None:
    proc = _server()
    assert proc.stdin is not None
    try:
        proc.stdin.write(_INITIALIZE)
        proc.stdin.flush()
        _answer(proc, 1)
        cpu = _cpu_s(proc.pid)
        flood = b"[" + b"[]," * (4 * MAX_ELEMENTS) + b"[]]"
        proc.stdin.write(
            b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"execute",'
            b'"arguments":{"code":"1","x":' + flood + b"}}}\n"
        )
        proc.stdin.write(_line({"id": 6, "method": "ping"}))
        proc.stdin.flush()
        refused = _answer(proc, 5)
        assert f"more than {MAX_ELEMENTS} JSON elements" in refused["error"]["message"], refused
        assert "result" in _answer(proc, 6)
        assert _cpu_s(proc.pid) - cpu < 3
    finally:
        proc.stdin.close()
        proc.wait(60)


# The wire alone, its lines never taken: how much a client can write before it waits.
_NEVER_TAKEN = """
import time
from codemode.mcp.stdio_wire import StdioWire
wire = StdioWire.start()
time.sleep(600)
"""


def test_lines_the_server_has_not_taken_hold_the_client_past_the_bound() -> None:
    proc = subprocess.Popen([sys.executable, "-c", _NEVER_TAKEN], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    assert proc.stdin is not None
    try:
        fd = proc.stdin.fileno()
        os.set_blocking(fd, False)
        line = _line({"method": "notifications/x", "params": {"pad": "p" * (1 << 20)}})
        left = memoryview(b"")
        written = 0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if not left:
                left = memoryview(line)
            _, ready, _ = select.select([], [fd], [], 3)
            if not ready:
                break  # the pipe stayed full for 3 s: the server stopped reading
            n = os.write(fd, left)
            written, left = written + n, left[n:]
            assert written < 4 * QUEUED, f"{written >> 20} MiB taken in, no end"
        else:
            raise AssertionError(f"{written >> 20} MiB taken in, and it still reads")
        assert written < QUEUED + (8 << 20), f"{written >> 20} MiB taken in"
        assert _peak_mb(proc.pid) < 60 + 2.5 * (QUEUED >> 20)
    finally:
        proc.kill()
        proc.wait(10)
