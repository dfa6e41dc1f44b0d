"""`interpreter mcp-server --http PORT` from another local user's side: loopback is no
boundary on a shared machine, and a program run there runs commands in the server's
workspace as the server's user. Another user's request gets a refusal and nothing else;
the server's own user is served as before."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agent_support import INTERPRETER, cli_env

from tests.codex_host_support import free_port, wait_port

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to act as another user (uid 65534)",
)

# uid 65534's client: an MCP initialize over streamable HTTP, and what came back.
_INTRUDER = """
import json, sys, urllib.error, urllib.request
body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "intruder", "version": "1"}}}
request = urllib.request.Request(
    f"http://127.0.0.1:{sys.argv[1]}/mcp", data=json.dumps(body).encode(), method="POST",
    headers={"content-type": "application/json",
             "accept": "application/json, text/event-stream"})
try:
    with urllib.request.urlopen(request, timeout=30) as answer:
        print(answer.status, answer.read()[:200])
except urllib.error.HTTPError as exc:
    print(exc.code, exc.read()[:200])
"""


@needs_root
def test_another_local_user_is_refused_and_ours_is_served(tmp_path: Path) -> None:
    from mcp import Client

    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("no /usr/bin/python3 to run a client as uid 65534")
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    port = free_port()
    proc = subprocess.Popen(
        [str(INTERPRETER), "mcp-server", "--http", str(port)],
        cwd=work, env=cli_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_port(port, proc)
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             "/usr/bin/python3", "-I", "-c", _INTRUDER, str(port)],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, cwd="/",
        )  # fmt: skip
        assert done.stdout.startswith("403 "), done
        assert "serverInfo" not in done.stdout

        async def ours() -> Any:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                return await client.call_tool("execute", {"code": "return 6 * 7"})

        assert asyncio.run(ours()).structured_content["value"] == 42
    finally:
        proc.terminate()
        proc.wait(timeout=10)
