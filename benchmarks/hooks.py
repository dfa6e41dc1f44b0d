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
measurable); ``hook_run_ms``: the median time of one hook process, as the engine timed it;
``raw_spawn_ms``: the median time of ``subprocess.run(["true"])`` with the same pipes,
measured between the runs (what starting a process costs on this machine now: a busy
machine's figures are mostly process starts, slower still while a program's engine
worker competes for the CPUs); ``load_average_1m`` and ``cpus`` say how busy it was.
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


def raw_spawn_ms(cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(["true"], input=b"{}", capture_output=True, cwd=cwd,
                   start_new_session=True, check=True)
    return (time.perf_counter() - started) * 1000


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
        spawns: list[float] = []
        try:
            for host in hosts.values():  # warm: engine worker, tool models
                await program_ms(host, code)
            hook_runs.clear()
            for _ in range(runs):
                for name, host in hosts.items():
                    times[name].append(await program_ms(host, code))
                spawns.extend(raw_spawn_ms(work) for _ in range(20))
        finally:
            for host in hosts.values():
                host.close()
    median = {name: statistics.median(values) for name, values in times.items()}
    per_call = (median["hooked"] - median["none"]) / calls
    spawn = statistics.median(spawns)
    return {
        "calls": calls,
        "runs": runs,
        "program_ms": {name: round(value, 2) for name, value in median.items()},
        "per_call_overhead_ms": round(per_call, 3),
        "unmatched_overhead_ms": round((median["unmatched"] - median["none"]) / calls, 4),
        "hook_run_ms": round(statistics.median(hook_runs), 3) if hook_runs else None,
        "raw_spawn_ms": round(spawn, 3),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
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
