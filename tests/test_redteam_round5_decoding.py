"""What a client can make the servers' decoders spend within the element bound
(docs/threat-model.md, family 6). Python converts an integer's digits in time that grows
with their square: 60 MiB of 4,000-digit numbers is 16,000 elements, far under
``MAX_ELEMENTS``, and cost the code-mode host (and the MCP server, twice: its wire and
the SDK) about 2 s of CPU per frame. A JSON text nested thousands deep raised
RecursionError in the MCP server's reading thread, which then ended: the server read
nothing more. CPU is read from /proc (the server's own, not the wall clock's)."""

from __future__ import annotations

import json
import time

from codemode.mcp.stdio_wire import _held
from codemode.process.json_cost import MAX_INT_DIGITS, TooCostly, loads
from tests.test_codex_host_framed import HELLO
from tests.test_codex_host_framed_decode_cost import _cpu_s, cold_host
from tests.test_mcp_stdio_wire_bounds import _INITIALIZE, _answer, _line, _server

# 60 MiB of integers of 4,000 digits (Python's own limit is 4,300).
_DIGITS = b"9" * 4000
_LONG_INTS = b"[" + b",".join([_DIGITS] * ((60 << 20) // 4001)) + b"]"


def test_integers_of_thousands_of_digits_are_refused_by_the_framed_host() -> None:
    with cold_host() as peer:
        peer.send(HELLO)
        peer.read()
        peer.request(1, {"method": "session/open", "sessionId": "s"})
        peer.until(lambda m: m.get("id") == 1)
        pid = peer.proc.pid
        cpu = _cpu_s(pid)
        head = b'{"type":"operation/request","id":7,"request":'
        peer.send_raw(head + b'{"method":"session/open","sessionId":"t","x":' + _LONG_INTS + b"}}")
        refused = peer.until(lambda m: m.get("id") == 7)
        assert refused["result"]["status"] == "error", refused
        assert f"more than {MAX_INT_DIGITS} digits" in refused["result"]["message"], refused
        spent = _cpu_s(pid) - cpu
        # Converting them took ~2 s of CPU; refusing them, the bytes' speed.
        assert spent < 1.0, f"the host spent {spent:.2f} s of CPU on one frame"
        peer.request(8, {"method": "session/open", "sessionId": "u"})
        assert peer.until(lambda m: m.get("id") == 8)["result"]["status"] == "ok"


def test_integers_of_thousands_of_digits_are_refused_by_the_mcp_server() -> None:
    proc = _server()
    assert proc.stdin is not None
    try:
        proc.stdin.write(_INITIALIZE)
        proc.stdin.flush()
        _answer(proc, 1)
        cpu = _cpu_s(proc.pid)
        line = (
            b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x",'
            b'"arguments":{"a":' + _LONG_INTS + b"}}}\n"
        )
        proc.stdin.write(line)
        proc.stdin.flush()
        refused = _answer(proc, 2)
        assert f"more than {MAX_INT_DIGITS} digits" in refused["error"]["message"], refused
        spent = _cpu_s(proc.pid) - cpu
        # (its wire's decoder and the SDK's each took ~1 s of CPU converting them)
        assert spent < 1.0, f"the server spent {spent:.2f} s of CPU on one line"
    finally:
        proc.kill()
        proc.wait(10)


def test_a_line_nested_too_deeply_leaves_the_mcp_server_reading() -> None:
    proc = _server()
    assert proc.stdin is not None
    try:
        proc.stdin.write(_INITIALIZE)
        proc.stdin.flush()
        _answer(proc, 1)
        deep = b"[" * 100_000 + b"]" * 100_000
        proc.stdin.write(b'{"jsonrpc":"2.0","id":2,"method":"ping","params":' + deep + b"}\n")
        proc.stdin.write(_line({"id": 3, "method": "ping"}))
        proc.stdin.flush()
        assert "result" in _answer(proc, 3, timeout_s=30), "the server stopped reading"
    finally:
        proc.kill()
        proc.wait(10)


def test_an_integer_in_a_string_and_an_ordinary_number_still_decode() -> None:
    text = json.dumps({"id": 2**63, "hash": "9" * 10_000, "n": -(10**MAX_INT_DIGITS - 1)})
    assert loads(text.encode()) == json.loads(text)
    started = time.process_time()
    try:
        loads(b'{"a": -' + b"9" * (MAX_INT_DIGITS + 1) + b"}")
    except TooCostly:
        pass
    else:
        raise AssertionError("a long negative integer was decoded")
    assert time.process_time() - started < 1


def test_lines_held_are_counted_in_the_memory_they_take() -> None:
    """The queue's bound was counted in characters: 64 Mi characters with one past
    U+FFFF are 256 MiB."""
    line = "a" * 1_000_000 + "\U0001f600"
    assert _held(line) >= 4 * len(line)
