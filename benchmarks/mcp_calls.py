"""MCP figures, printed as one JSON object.

    .venv/bin/python benchmarks/mcp_calls.py [--quick]

Against tests/mcp_servers/probe_server.py over stdio (a Python server on the `mcp` SDK):

- start_ms: starting the server and listing its tools (median of fresh starts);
- program_ms: a whole program doing one `await tools.probe.add(...)` (median);
- invoke_ms: the same call through `ToolRegistry.invoke` from the caller's loop;
- sdk_call_ms: the same call made directly with the SDK client on the connection's
  own loop; invoke_ms minus this is what our layer adds (thread hop, schema check);
- parallel_20_ms: 20 calls in one `Promise.all` (median), against 20x program_ms (the
  Python probe server handles cheap requests one after another, so little is gained).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from codemode.host.program_delegate import RegistryDelegate
from codemode.js_runtime import CodeSession, Completed, ExecResult
from codemode.mcp.adapter import add_configured_servers
from codemode.tools.context import ToolContext
from codemode.tools.registry import ToolRegistry

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "tests" / "mcp_servers" / "probe_server.py"
TABLES = {"probe": {"command": sys.executable, "args": [str(PROBE)]}}


async def _run(session: CodeSession, program: str) -> ExecResult:
    outcome = await session.execute(program)
    assert isinstance(outcome, Completed)  # no yield time: it ran to its end
    return outcome.result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    logs = Path(tempfile.mkdtemp()) / "logs"

    starts = []
    for _ in range(2 if quick else 5):
        began = time.perf_counter()
        registry = ToolRegistry()
        _manager, statuses = add_configured_servers(registry, TABLES, logs)
        assert statuses[0].state == "ready", statuses[0].error
        starts.append((time.perf_counter() - began) * 1000)
        registry.close()

    registry = ToolRegistry()
    manager, statuses = add_configured_servers(registry, TABLES, logs)
    assert statuses[0].state == "ready", statuses[0].error
    # A persistent code session (the runtime's API) whose nested calls take the
    # registry's path, as the agent's do.
    session = CodeSession(RegistryDelegate(registry, ToolContext(workspace=ROOT)), tools=registry)
    n = 50 if quick else 300

    async def measure() -> dict[str, float]:
        await _run(session, "await tools.probe.add({a: 1, b: 2})")  # warm
        singles = []
        for _ in range(n):
            result = await _run(session, "return await tools.probe.add({a: 1, b: 2})")
            assert result.ok, result.error
            singles.append(result.duration_ms)
        parallel = []
        program = (
            "return (await Promise.all(Array.from({length: 20}, (_, i) =>"
            " tools.probe.add({a: i, b: 1})))).length"
        )
        for _ in range(n // 10):
            result = await _run(session, program)
            assert result.ok and result.value == 20, result.error
            parallel.append(result.duration_ms)
        server = manager.servers["probe"]

        async def direct() -> float:
            client = await server.ensure()
            began = time.perf_counter()
            await client.call_tool("add", {"a": 1, "b": 2})
            return (time.perf_counter() - began) * 1000

        raw = [await asyncio.wrap_future(manager._submit(direct())) for _ in range(n)]
        ctx = ToolContext(workspace=ROOT)
        invokes = []
        for _ in range(n):
            began = time.perf_counter()
            await registry.invoke("mcp__probe__add", {"a": 1, "b": 2}, ctx)
            invokes.append((time.perf_counter() - began) * 1000)
        await session.close()
        return {
            "invoke_ms": statistics.median(invokes),
            "call_ms": statistics.median(singles),
            "parallel_20_ms": statistics.median(parallel),
            "sdk_call_ms": statistics.median(raw),
        }

    figures = asyncio.run(measure())
    registry.close()
    out = {
        "start_ms": round(statistics.median(starts), 1),
        "program_ms": round(figures["call_ms"], 3),
        "invoke_ms": round(figures["invoke_ms"], 3),
        "sdk_call_ms": round(figures["sdk_call_ms"], 3),
        "layer_overhead_ms": round(figures["invoke_ms"] - figures["sdk_call_ms"], 3),
        "parallel_20_ms": round(figures["parallel_20_ms"], 3),
        "sequential_20_ms_estimate": round(figures["call_ms"] * 20, 3),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
