"""A ToolHost is sandboxed by default: model-written code cannot reach the network or
write outside the workspace unless the embedder names an unconfined mode.

Each attack runs a real ToolHost program in a fresh process (as root, and as the
unprivileged user nobody where the machine allows), against a listener on 127.0.0.1
that the test started and a marker path in /tmp.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.confinement_support import (
    NOBODY,
    REPO,
    SYSTEM_PYTHON,
    _as_nobody,
    _site_packages,
    give,
    shared_dir,  # noqa: F401 - a fixture
    skip_unless,
)

DRIVER = """
import asyncio, json, sys
from codemode import ToolHost
ws, program, sandbox = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
async def main():
    kwargs = {} if sandbox is None else {"sandbox": sandbox}
    with ToolHost(ws, **kwargs) as host:
        r = await host.execute(program)
    print(json.dumps({"ok": r.ok, "value": r.value, "error": r.error and r.error.one_line()}))
asyncio.run(main())
"""


class Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            try:
                conn.recv(1024)
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
            finally:
                conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    try:
        yield server
    finally:
        server.close()


def run_host(user: str, ws: Path, program: str, sandbox: object = None) -> dict[str, object]:
    env = {**os.environ, "CODEMODE_HOME": str(ws.parent / "codemode-home")}
    if user == "nobody":
        env["PYTHONPATH"] = f"{REPO}:{_site_packages()}"
        env["HOME"] = str(ws.parent)
        argv = [*_as_nobody(), SYSTEM_PYTHON]
    else:
        argv = [sys.executable]
    argv += ["-c", DRIVER, str(ws), program, json.dumps(sandbox)]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180, cwd=ws)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def attack(port: int, marker: Path) -> str:
    """A program that tries curl and python to reach the listener and writes to /tmp;
    it returns what each attempt gave."""
    connect = (
        f"import socket; s = socket.create_connection(('127.0.0.1', {port}), timeout=5); "
        "s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n'); print(s.recv(100))"
    )
    commands = {
        "curl": f"curl -s -m 5 http://127.0.0.1:{port}/",
        "python": f"python3 -c {json.dumps(connect)}",
        "write": f"echo owned > {marker} && cat {marker}",
    }
    catch = ".catch(e => ({refused: e.message}))"
    calls = ",".join(
        f"{name}: await tools.shell({{command: {json.dumps(cmd)}}}){catch}"
        for name, cmd in commands.items()
    )
    return f"return {{{calls}}}"


def failed(outcome: dict[str, object]) -> bool:
    """Refused by the policy, or run and failed (confined)."""
    return "refused" in outcome or outcome["exit_code"] != 0


@pytest.mark.parametrize("approval", [None, "never"])
@pytest.mark.parametrize("user", ["self", "nobody"])
def test_default_host_refuses_network_and_writes_outside(
    user: str, approval: str | None, shared_dir: Path, listener: Listener  # noqa: F811
) -> None:
    """By default (and with approvals off, so that every command runs: the sandbox's
    confinement alone then stops them)."""
    skip_unless(user, "bubblewrap")
    ws = shared_dir / "ws"
    ws.mkdir()
    give(shared_dir, user)
    marker = Path("/tmp") / f"codemode-embed-{uuid.uuid4().hex}"
    sandbox = None if approval is None else {"approval_policy": approval}
    try:
        out = run_host(user, ws, attack(listener.port, marker), sandbox)
        assert out["ok"], out
        value = out["value"]
        assert isinstance(value, dict)
        assert all(failed(value[k]) for k in ("curl", "python", "write")), value
        if approval == "never":  # nothing refused: each ran, confined
            assert not any("refused" in v for v in value.values()), value
        assert "200 OK" not in json.dumps(value)
        assert not marker.exists()
        assert listener.accepted == 0
    finally:
        marker.unlink(missing_ok=True)


def test_unconfined_only_when_asked_by_name(shared_dir: Path, listener: Listener) -> None:  # noqa: F811
    """The same attack with sandbox="danger-full-access" gets through: the default's
    refusals come from the sandbox, not from a broken program."""
    ws = shared_dir / "ws"
    ws.mkdir()
    marker = Path("/tmp") / f"codemode-embed-{uuid.uuid4().hex}"
    try:
        out = run_host(
            "self",
            ws,
            attack(listener.port, marker),
            {"sandbox_mode": "danger-full-access", "approval_policy": "never"},
        )
        value = out["value"]
        assert isinstance(value, dict), out
        assert value["curl"]["exit_code"] == 0 and "ok" in value["curl"]["output"]
        assert "b'HTTP/1.0 200 OK" in value["python"]["output"]
        assert marker.read_text() == "owned\n"
        assert listener.accepted == 2
    finally:
        marker.unlink(missing_ok=True)


def test_forbidden_rules_and_prompt_refusals_hold_by_default(tmp_path: Path) -> None:
    """The execpolicy is on by default, as in `interpreter run`: a command the rules
    mark `prompt` is refused (no approver), not run."""
    program = (
        "try { await tools.shell({command: \"python3 -c 'print(1)'\"}); return 'ran' }"
        " catch (e) { return String(e.message) }"
    )
    out = run_host("self", tmp_path, program)
    assert out["ok"], out
    assert out["value"] != "ran"
    assert "python3 -c" in str(out["value"]) and "approval" in str(out["value"])
    # The remedy is what a ToolHost's caller has, not the CLI's flags...
    assert "--full-auto" not in str(out["value"]), out
    assert "ToolHost(approver=...)" in str(out["value"]), out
    assert "'approval_policy': 'never'" in str(out["value"]), out
    # ...and the remedy it names works.
    out = run_host("self", tmp_path, program, {"approval_policy": "never"})
    assert out["ok"] and out["value"] == "ran", out


def test_mode_names_are_checked(tmp_path: Path) -> None:
    from codemode import ToolHost

    with pytest.raises(ValueError, match="danger-full-access"):
        ToolHost(tmp_path, sandbox="full")


assert NOBODY == 65534  # (the user the attack runs as where the machine allows)
