"""`interpreter mcp-server` answers the handshake before it sets up its tool host
(``codemode.mcp.server.SetUpOnFirstUse``): a configured MCP server that is slow to start
no longer holds `initialize` up, the first request that needs the tools waits for the
set-up, and a set-up that fails fails the requests that need it, with its reason, while
the server stays up (no traceback; each request gets the reason)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from agent_support import INTERPRETER, cli_env
from mcp_support import server_command

PROBE = Path(__file__).parent / "mcp_servers" / "probe_server.py"
SLOW_S = 4.0


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode()


_INITIALIZE = _line({"id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"}}})  # fmt: skip


def test_initialize_is_answered_while_a_configured_server_is_still_starting(
    tmp_path: Path,
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    started = tmp_path / "probe-started"
    slow = ["/bin/sh", "-c", f"sleep {SLOW_S}; touch {shlex.quote(str(started))}; exec \"$@\"",
            "slow", *server_command(PROBE)]  # fmt: skip
    (home / "config.toml").write_text(
        f"[mcp_servers.probe]\ncommand = {json.dumps(slow[0])}\nargs = {json.dumps(slow[1:])}\n"
        'trust = "write"\n'
    )
    proc = subprocess.Popen([INTERPRETER, "mcp-server"], cwd=work, env=cli_env(home),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        t0 = time.monotonic()
        proc.stdin.write(_INITIALIZE)
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        answered_s = time.monotonic() - t0
        assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "codemode"
        # Answered before the configured server had even started (its wrapper sleeps).
        assert not started.exists(), f"initialize waited for the set-up ({answered_s:.1f} s)"
        proc.stdin.write(_line({"method": "notifications/initialized"}))
        proc.stdin.write(_line({"id": 2, "method": "tools/call", "params": {
            "name": "execute", "arguments": {"code": "return await tools.probe.add({a: 2, b: 3})"}
        }}))  # fmt: skip
        proc.stdin.flush()
        called = json.loads(proc.stdout.readline())
        # The first request that needs the tools waited for the set-up, server included.
        assert started.exists()
        assert called["id"] == 2 and called["result"]["structuredContent"]["ok"], called
        assert "5" in json.dumps(called["result"]["structuredContent"]["value"])
    finally:
        proc.stdin.close()
        proc.wait(60)
    assert proc.returncode == 0
    assert proc.stderr is not None and b"Traceback" not in proc.stderr.read()


# The server of `mcp-server` over its stdio wire, with a set-up that fails as a real one
# can (a workspace that went, a sandbox that cannot be had); counted in a file.
_FAILING = """
import sys
from pathlib import Path
from codemode.mcp.server import SetUpOnFirstUse, new_server, run_stdio
from codemode.mcp.stdio_wire import StdioWire

wire = StdioWire.start()
count = Path(sys.argv[1])

def broken():
    count.write_text(count.read_text() + "x" if count.exists() else "x")
    raise OSError("the workspace is gone")

server = new_server()
server.middleware.append(SetUpOnFirstUse(server, broken))
run_stdio(server, wire)
"""


def test_a_set_up_that_fails_fails_the_requests_that_need_it_not_the_server(
    tmp_path: Path,
) -> None:
    count = tmp_path / "attempts"
    requests = b"".join([
        _INITIALIZE,
        _line({"method": "notifications/initialized"}),
        _line({"id": 2, "method": "tools/list"}),
        _line({"id": 3, "method": "tools/call",
               "params": {"name": "execute", "arguments": {"code": "1"}}}),
    ])  # fmt: skip
    done = subprocess.run([sys.executable, "-c", _FAILING, str(count)], input=requests,
                          capture_output=True, timeout=60)  # fmt: skip
    answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines())}
    assert answers[1]["result"]["serverInfo"]["name"] == "codemode"
    for request in (2, 3):
        error = answers[request]["error"]["message"]
        assert error == "the tool host could not be set up: the workspace is gone", answers
    assert count.read_text() == "x", "a failed set-up is not tried again"
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    assert b"mcp-server: the tool host could not be set up: the workspace is gone" in done.stderr


def test_a_host_made_but_not_served_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host was made (its sandbox session, its MCP servers started) and then its
    tools could not be added: it is closed, not left running behind a failed set-up."""
    from codemode.mcp import server as mcp_server

    closed: list[str] = []

    class Host:
        def close(self) -> None:
            closed.append("closed")

    def refuse(_server: object, _service: object) -> None:
        raise ValueError("a tool name the SDK refuses")

    monkeypatch.setattr(mcp_server, "add_tools", refuse)
    setup = mcp_server.SetUpOnFirstUse(mcp_server.new_server(), Host)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="could not be set up: a tool name the SDK refuses"):
        setup.service()
    assert closed == ["closed"]
    with pytest.raises(RuntimeError):
        setup.service()  # not tried again
    assert closed == ["closed"]


def test_ctrl_c_ends_a_stdio_server_waiting_on_its_client(tmp_path: Path) -> None:
    # Its loop waits on the client's next line; a Ctrl-C ends that wait
    # (``process/interruptible.py``): exit 130, no traceback, stdin still open.
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    proc = subprocess.Popen([INTERPRETER, "mcp-server"], cwd=work, env=cli_env(home),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(_INITIALIZE)
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        proc.send_signal(2)
        proc.wait(timeout=30)
        err = proc.stderr.read().decode() if proc.stderr else ""
        assert proc.returncode == 130, err
        assert "Traceback" not in err
    finally:
        proc.kill()
        proc.wait()
