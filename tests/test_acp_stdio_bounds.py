"""What an ACP client can make `interpreter acp` hold or spend reading its stdin
(docs/threat-model.md, family 6). The SDK gathers a line longer than its reader's limit
piece by piece with no end, and decodes whatever it gathered: a line with no newline
grew the agent without a bound, and a line of tiny JSON elements cost a decoder object
each. Now a line past ``MAX_LINE`` is dropped as it comes and one past the element bound
is answered with an error unread; the connection serves on."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest
from agent_support import INTERPRETER

from codemode.acp.stdio import MAX_LINE
from codemode.process.json_cost import MAX_ELEMENTS
from tests.stdio_peers import answer as _answer
from tests.stdio_peers import peak_mb as _peak_mb

_INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}}  # fmt: skip


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _agent() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(INTERPRETER), "acp"], env=dict(os.environ, CODEMODE_WARM="0"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def test_a_line_with_no_end_is_dropped_past_the_bound_and_the_agent_serves_on() -> None:
    proc = _agent()
    assert proc.stdin is not None
    try:
        proc.stdin.write(_line(_INITIALIZE))
        proc.stdin.flush()
        assert "result" in _answer(proc, 1)
        peak = _peak_mb(proc.pid)
        proc.stdin.write(b'{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"x":"')
        chunk = b"x" * (1 << 20)
        for _ in range((MAX_LINE >> 20) * 2):
            proc.stdin.write(chunk)
        proc.stdin.write(b'"}}\n' + _line({**_INITIALIZE, "id": 3}))
        proc.stdin.flush()
        refused = _answer(proc, 2)
        assert "longer than" in refused["error"]["message"], refused
        assert "result" in _answer(proc, 3)
        grown = _peak_mb(proc.pid) - peak
        # The SDK alone gathered the whole line: 128 MiB and more, twice over.
        assert grown < 1.5 * (MAX_LINE >> 20), f"the agent's peak memory grew {grown:.0f} MiB"
    finally:
        proc.stdin.close()
        proc.wait(60)
    assert proc.stderr is not None
    said = proc.stderr.read()
    assert b"refused a message longer than" in said and b"Traceback" not in said, said[-2000:]


@pytest.mark.parametrize("shape", ["elements", "digits"])
def test_a_request_costly_to_decode_is_answered_with_an_error_unread(shape: str) -> None:
    proc = _agent()
    assert proc.stdin is not None
    try:
        proc.stdin.write(_line(_INITIALIZE))
        proc.stdin.flush()
        _answer(proc, 1)
        # Tiny elements past the count, or integers whose conversion costs the square
        # of their digits (a few thousand of 4,000 digits: seconds), well within it.
        flood = (
            b"[" + b"[]," * (4 * MAX_ELEMENTS) + b"[]]"
            if shape == "elements"
            else b"[" + b",".join([b"7" * 4000] * 3000) + b"]"
        )
        proc.stdin.write(b'{"jsonrpc":"2.0","id":5,"method":"session/new","params":{"x":'
                         + flood + b"}}\n")  # fmt: skip
        proc.stdin.write(_line({**_INITIALIZE, "id": 6}))
        proc.stdin.flush()
        refused = _answer(proc, 5)
        said = refused["error"]["message"]
        assert ("JSON elements" if shape == "elements" else "digits") in said, refused
        assert "result" in _answer(proc, 6)
    finally:
        proc.stdin.close()
        proc.wait(60)
