"""An engine's own work per awaited no-op tool call, without the pipe, printed as JSON.

    .venv/bin/python benchmarks/engine_call.py [ENGINE ...] [--calls N] [--runs R]

The engine runs in this process, as in its worker: the prelude is installed, a program
awaits ``tools.noop()`` N times, and ``settle_chain`` serves each call at once with a
stand-in for the worker's pipe (encode the state, answer with the call's result). What
is left is each engine's part of ``runtime.py``'s ``tool_call_us``: the settle, the
program's continuation, the drain, and (V8) the crossings to its thread.

- cpu_us: process CPU time per call (median of the runs);
- wall_us: wall time per call (median).

On a shared machine CPU time still varies with the load. Instruction counts do not: run
it under ``valgrind --tool=cachegrind --cache-sim=no --smc-check=all-non-file`` with two
call counts and divide the difference in ``I refs`` by the difference in calls (about
137,000 instructions per call for V8 and 74,000 for QuickJS when this was written;
QuickJS was 122,000 before its drain stopped stringifying the whole state).
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import time
from collections.abc import Callable

from codemode.js_runtime.engine import ENGINE_CLASSES, ENGINES, Engine
from codemode.js_runtime.setup_head import head as prelude
from codemode.js_runtime.source import prepare


def _engine(name: str) -> Engine:
    module_name, class_name = ENGINE_CLASSES[name]
    engine_class: type[Engine] = getattr(importlib.import_module(module_name), class_name)
    engine_class.boot()
    engine = engine_class(256 * 1024 * 1024)
    engine.on_log = lambda level, text: None
    engine.step(prelude() + '\n__cm.configure(["noop"], 1000000000, {});')
    return engine


def _result(state: str) -> str | None:
    """The results that answer the state's one new call; None once the program is done."""
    if '"done":null' not in state:
        if '"ok":true' not in state:
            raise RuntimeError(f"the program failed: {state[:300]}")
        return None
    at = state.index('"calls":[[') + len('"calls":[[')
    return f"[[{state[at : state.index(',', at)]},true,{{}}]]"


def _awaited_calls(engine: Engine, calls: int) -> None:
    program = prepare(f"for (let i = 0; i < {calls}; i++) await tools.noop();")
    first = _result(engine.step("__cm.reset(); " + program.as_statements()))
    if first is None:
        raise RuntimeError("the program made no call")

    def serve(finish: Callable[[], str]) -> str | None:
        state = finish()
        state.encode("utf-8", "surrogatepass")  # as the worker does for the pipe
        return _result(state)

    engine.settle_chain(first, serve)


def measure(name: str, calls: int, runs: int) -> dict[str, float]:
    engine = _engine(name)
    try:
        _awaited_calls(engine, 200)  # warm up
        cpu, wall = [], []
        for _ in range(runs):
            cpu0, wall0 = time.process_time(), time.perf_counter()
            _awaited_calls(engine, calls)
            cpu.append((time.process_time() - cpu0) / calls * 1e6)
            wall.append((time.perf_counter() - wall0) / calls * 1e6)
    finally:
        engine.close()
    return {
        "cpu_us": round(statistics.median(cpu), 1),
        "wall_us": round(statistics.median(wall), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("engines", nargs="*", metavar="ENGINE", help=", ".join(ENGINES))
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    unknown = [name for name in args.engines if name not in ENGINES]
    if unknown:
        parser.error(f"unknown engine {unknown[0]!r} (choose from: {', '.join(ENGINES)})")
    report = {name: measure(name, args.calls, args.runs) for name in args.engines or ENGINES}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
