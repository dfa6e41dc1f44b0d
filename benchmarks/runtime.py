"""Runtime figures, per engine, printed as one JSON object.

    .venv/bin/python benchmarks/runtime.py [--quick]

- isolate_ms: a fresh isolate with the tools prelude installed (median);
- tool_call_us: one awaited no-op tool call, round trip (median of runs of 10,000 calls);
- hello_vs_node: whole-process `interpreter run examples/hello.js --engine E` against
  `node examples/hello.js`, medians of alternating runs measured here, and their ratio.

And once, `hello`: the command as a user types it (`interpreter run examples/hello.js`,
the default engine) against node, which is what the start-up target is for.

Targets: quickjs isolate <= 1 ms and call <= 25 µs; v8 isolate <= 5 ms and call
<= 150 µs; `interpreter run hello.js` <= 2x node. V8's own start-up (mapping its 74 MB
library, ~16 ms, and starting V8, ~7 ms) is reported but has no target.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from codemode.js_runtime import Bridge, Limits
from codemode.tools.context import ToolContext
from codemode.tools.registry import ToolRegistry

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {
    "quickjs": {"isolate_ms": 1.0, "tool_call_us": 25.0},
    "v8": {"isolate_ms": 5.0, "tool_call_us": 150.0},
}


def _registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool
    async def noop() -> dict:
        """Does nothing."""
        return {}

    return reg


async def isolate_ms(engine: str, n: int) -> float:
    bridge = Bridge(_registry(), ToolContext(ROOT), engine=engine)
    limits = Limits()
    loop = asyncio.get_running_loop()
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        created = await bridge.new_engine(loop.time() + 10, limits)
        samples.append((time.perf_counter() - t0) * 1000)
        created.close()
    return statistics.median(samples)


async def tool_call_us(engine: str, calls: int, runs: int) -> float:
    limits = Limits(timeout_s=120, max_tool_calls=calls + 10)
    bridge = Bridge(_registry(), ToolContext(ROOT), engine=engine, limits=limits)
    program = f"for (let i = 0; i < {calls}; i++) await tools.noop();"
    await bridge.execute(program.replace(str(calls), "100"))  # warm up
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = await bridge.execute(program)
        elapsed = time.perf_counter() - t0
        assert result.ok and len(result.tool_calls) == calls, result.error
        samples.append(elapsed / calls * 1e6)
    return statistics.median(samples)


def _time(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return (time.perf_counter() - t0) * 1000


def hello_vs_node(engine: str | None, runs: int) -> dict[str, float | None]:
    interpreter = str(Path(sys.executable).parent / "interpreter")
    ours = [interpreter, "run", "examples/hello.js"]
    ours += ["--engine", engine] if engine else []
    node = shutil.which("node")
    _time(ours)
    ours_ms, node_ms = [], []
    for _ in range(runs):  # alternate, so both see the same machine load
        ours_ms.append(_time(ours))
        if node:
            node_ms.append(_time([node, "examples/hello.js"]))
    ours_median = statistics.median(ours_ms)
    node_median = statistics.median(node_ms) if node_ms else None
    return {
        "interpreter_ms": round(ours_median, 1),
        "node_ms": round(node_median, 1) if node_median else None,
        "ratio": round(ours_median / node_median, 2) if node_median else None,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    quick = parser.parse_args().quick
    report: dict[str, object] = {}
    for engine in ("quickjs", "v8"):
        iso = await isolate_ms(engine, 20 if quick else 200)
        call = await tool_call_us(engine, 10_000, 2 if quick else 5)
        hello = hello_vs_node(engine, 3 if quick else 15)
        target = TARGETS[engine]
        report[engine] = {
            "isolate_ms": round(iso, 3),
            "tool_call_us": round(call, 1),
            "hello_vs_node": hello,
            "targets": target,
            "meets": {
                "isolate": iso <= target["isolate_ms"],
                "tool_call": call <= target["tool_call_us"],
            },
        }
    hello = hello_vs_node(None, 3 if quick else 15)
    report["hello"] = {
        "command": "interpreter run examples/hello.js",
        **hello,
        "target_ratio": 2.0,
        "meets": hello["ratio"] is not None and hello["ratio"] <= 2.0,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
