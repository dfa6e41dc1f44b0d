"""The tests' Python MCP servers, started as forks of one process that has imported the
mcp SDK (tests/mcp_servers/forked.py): ``server_command(script, *args)`` is the argv a
test configures. One zygote a test process, started at first use and ended at exit."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import sys
import tempfile
import time
from functools import cache
from pathlib import Path

FORKED = Path(__file__).resolve().parent / "mcp_servers" / "forked.py"


_running: list[tuple[subprocess.Popen[bytes], str]] = []


@atexit.register
def close() -> None:
    """End the zygote (and so reap it), if one was started."""
    while _running:
        proc, folder = _running.pop()
        assert proc.stdin is not None
        proc.stdin.close()  # its EOF ends the zygote
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


@cache
def _zygote() -> str:
    folder = tempfile.mkdtemp(prefix="cm-mcp-")  # short: a socket path has ~100 bytes
    sock = Path(folder) / "s"
    proc = subprocess.Popen([sys.executable, str(FORKED), "serve", str(sock)],
                            stdin=subprocess.PIPE)
    _running.append((proc, folder))
    deadline = time.monotonic() + 120  # the SDK's import, on a busy machine
    while not sock.exists():
        assert proc.poll() is None, f"the MCP zygote ended: {proc.returncode}"
        assert time.monotonic() < deadline, "the MCP zygote did not start within 120 s"
        time.sleep(0.01)
    return str(sock)


def server_command(script: Path, *args: str) -> list[str]:
    """The argv that starts ``script`` as an MCP server, forked from the zygote."""
    return [sys.executable, "-I", "-S", str(FORKED), "launch", _zygote(), str(script), *args]
