"""How soon `interpreter mcp-server` answers over stdio, printed as one JSON object.

    .venv/bin/python benchmarks/mcp_startup.py [--runs N]

Each run starts a fresh `interpreter mcp-server` in an empty workspace and writes
`initialize` at once (as a client does); medians of N runs, in milliseconds from the
process start:

- ``initialize_ms``: its answer (the MCP SDK's, once it and the host have loaded: a
  cold start pays for both; a warm one answers at once, docs/warm.md);
- ``tools_list_ms``: the answer to the `tools/list` sent right after the handshake
  (served by the SDK, once it and the host have loaded);
- ``client_connect_ms``: the official `mcp` client's ``Client(stdio_client(...))``
  connecting (its own start-up included), and ``client_list_tools_ms`` its first
  ``list_tools`` after that;
- ``description_chars``: the length of `execute`'s description with the built-in tools.

``load_average`` says how busy the machine was (medians grow with it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

INTERPRETER = Path(sys.executable).parent / "interpreter"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}


def _raw(work: Path, env: dict[str, str]) -> tuple[float, float, int]:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [str(INTERPRETER), "mcp-server"], cwd=work, env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
    proc.stdin.flush()
    proc.stdout.readline()
    initialized = (time.perf_counter() - started) * 1000
    for message in (
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ):
        proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()
    listed = json.loads(proc.stdout.readline())
    tools_listed = (time.perf_counter() - started) * 1000
    proc.stdin.close()
    proc.wait(timeout=60)
    execute = next(t for t in listed["result"]["tools"] if t["name"] == "execute")
    return initialized, tools_listed, len(execute["description"])


async def _client(work: Path, env: dict[str, str]) -> tuple[float, float]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=str(INTERPRETER), args=["mcp-server"], cwd=work, env=env
    )
    started = time.perf_counter()
    with open(os.devnull, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            connected = (time.perf_counter() - started) * 1000
            await client.list_tools()
            listed = (time.perf_counter() - started) * 1000
    return connected, listed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    runs = parser.parse_args().runs
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="codemode-mcp-bench-") as tmp:
        work, home = Path(tmp) / "work", Path(tmp) / "home"
        work.mkdir()
        home.mkdir()
        env = {**os.environ, "CODEMODE_HOME": str(home)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        _raw(work, env)  # bytecode written once, as an installed package has it
        raw = [_raw(work, env) for _ in range(runs)]
        client = [asyncio.run(_client(work, env)) for _ in range(max(3, runs // 3))]
    print(json.dumps({
        "initialize_ms": round(statistics.median(r[0] for r in raw), 1),
        "initialize_max_ms": round(max(r[0] for r in raw), 1),
        "tools_list_ms": round(statistics.median(r[1] for r in raw), 1),
        "client_connect_ms": round(statistics.median(c[0] for c in client), 1),
        "client_list_tools_ms": round(statistics.median(c[1] for c in client), 1),
        "description_chars": raw[0][2],
        "runs": runs,
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }, indent=2))


if __name__ == "__main__":
    main()
