"""Hook overhead, printed as one JSON object.

    .venv/bin/python benchmarks/hooks.py [--runs 7] [--calls 50]

A program making ``--calls`` tool calls one after another (``tools.read_file`` of a small
file) runs in a ``ToolHost`` three ways, each ``--runs`` times, interleaved:

- ``none``: no hooks at all;
- ``unmatched``: a PreToolUse and a PostToolUse hook whose matcher no call matches (what
  a session with hooks for other tools pays on every call);
- ``hooked``: a trivial PreToolUse and PostToolUse command hook (``true``) on every call.

Reported (medians over the runs): ``program_ms`` per way; ``per_call_overhead_ms``:
(hooked - none) / calls, the cost of running one call's two hook processes (target: at
most 3 ms); ``unmatched_overhead_ms``: (unmatched - none) / calls (target: nothing
measurable); ``hook_run_ms``: the median time of one hook process, as the engine timed it.
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

from codemode.hooks.definitions import HookDef
from codemode.hooks.engine import HookEngine, HookRun, SessionFacts
from codemode.host import ToolHost


def hooks(matcher: str, cwd: Path, runs: list[float]) -> HookEngine:
    defs = [
        HookDef(event=event, matcher=matcher, command="true", timeout_s=30,
                status_message=None, source="benchmark", scope="user")
        for event in ("PreToolUse", "PostToolUse")
    ]

    def timed(run: HookRun) -> None:
        if run.outcome is not None:
            runs.append(run.duration_ms)

    return HookEngine(defs, SessionFacts(cwd=cwd), listeners=[timed])


async def program_ms(host: ToolHost, code: str) -> float:
    started = time.perf_counter()
    result = await host.execute(code)
    took = (time.perf_counter() - started) * 1000
    if not result.ok:
        sys.exit(f"the program failed: {result.error}")
    return took


async def measure(runs: int, calls: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "note.txt").write_text("hello\n")
        code = (f"for (let i = 0; i < {calls}; i++) "
                "await tools.read_file({path: 'note.txt'});")
        hook_runs: list[float] = []
        hosts = {
            "none": ToolHost(work),
            "unmatched": ToolHost(work, hooks=hooks("NoSuchTool", work, hook_runs)),
            "hooked": ToolHost(work, hooks=hooks("Read|read_file", work, hook_runs)),
        }
        times: dict[str, list[float]] = {name: [] for name in hosts}
        try:
            for host in hosts.values():  # warm: engine worker, tool models
                await program_ms(host, code)
            hook_runs.clear()
            for _ in range(runs):
                for name, host in hosts.items():
                    times[name].append(await program_ms(host, code))
        finally:
            for host in hosts.values():
                host.close()
    median = {name: statistics.median(values) for name, values in times.items()}
    return {
        "calls": calls,
        "runs": runs,
        "program_ms": {name: round(value, 2) for name, value in median.items()},
        "per_call_overhead_ms": round((median["hooked"] - median["none"]) / calls, 3),
        "unmatched_overhead_ms": round((median["unmatched"] - median["none"]) / calls, 4),
        "hook_run_ms": round(statistics.median(hook_runs), 3) if hook_runs else None,
        "target_per_call_ms": 3.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.runs, args.calls)), indent=2))


if __name__ == "__main__":
    main()
