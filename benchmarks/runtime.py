"""Runtime figures, per engine, printed as one JSON object.

    .venv/bin/python benchmarks/runtime.py [--quick]

Programs run in engine worker processes, so every figure includes the pipe:

- program_start_ms: a one-line program in a warm persistent session (median), the
  time from ``execute`` to its result;
- fresh_isolate_ms: the same in a non-persistent session (a fresh isolate per program,
  in a warm worker);
- tool_call_us: one awaited no-op tool call, round trip (median of runs of 10,000),
  once the spare worker the session started behind its own has booted;
  tool_call_cpu_us: the CPU time each call costs this process and the engine worker
  (process CPU time over the calls, medians of the same runs): what the pipe's polling
  (``spin.py``) and the work on each side cost;
- registry_call_cpu_us: of the parent's, what the tool path alone costs
  (``RegistryDelegate.call_tool`` of the no-op tool in this process, no engine: the
  registry, the pipeline's interceptors, validation, the handler, ``to_json``), CPU time
  per call, median of runs of 20,000;
- promise_all_1000_ms: 1,000 no-op calls in one ``Promise.all`` (median);
- rss_mb: the parent's RSS with an idle session, and one worker's RSS;
- pipe_round_trip_us: the floor, measured in the same run: one byte to a child
  process and one byte back over two pipes (median of runs of 10,000), ``sleeping``:
  both sides blocked in ``read``, and ``spinning``: both sides first polling the pipe
  as the engine worker and its parent do (``spin.py``: for up to 80 µs, while that
  pays and the machine has a CPU to spare); ``tool_call_vs_pipe`` is the tool call's
  ratio to the sleeping one. On a quiet virtual machine most of a sleeping round trip
  is waking the other side's CPU; on a busy one polling stops and the two converge;
- load_average: the 1-minute load average at the start and at the end (the machine is
  shared: compare ratios, not absolute times, between runs);
- hello_vs_node: whole-process `interpreter run examples/hello.js --engine E` against
  `node examples/hello.js`, medians of alternating runs measured here, and their ratio.

Targets: program start <= 2 ms; call <= 60 µs (QuickJS), <= 150 µs (V8); 1,000 calls in
one Promise.all <= 100 ms; `interpreter run hello.js` <= 2x node.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from codemode.host.program_delegate import RegistryDelegate
from codemode.js_runtime import CodeSession, Completed, ExecResult, Limits
from codemode.tools.context import ToolContext
from codemode.tools.registry import ToolRegistry

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {
    "quickjs": {"program_start_ms": 2.0, "tool_call_us": 60.0, "promise_all_1000_ms": 100.0},
    "v8": {"program_start_ms": 2.0, "tool_call_us": 150.0, "promise_all_1000_ms": 100.0},
}


def _registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool
    async def noop() -> dict:
        """Does nothing."""
        return {}

    return reg


def _session(engine: str, persistent: bool, limits: Limits | None = None) -> CodeSession:
    """A code session (the runtime's API) whose nested calls take the registry's path,
    as the agent's do."""
    registry = _registry()
    return CodeSession(
        RegistryDelegate(registry, ToolContext(ROOT)),
        tools=registry,
        engine=engine,
        limits=limits,
        persistent=persistent,
    )


async def _run(session: CodeSession, program: str) -> ExecResult:
    outcome = await session.execute(program)
    assert isinstance(outcome, Completed)  # no yield time: it ran to its end
    return outcome.result


async def program_ms(engine: str, n: int, persistent: bool) -> float:
    session = _session(engine=engine, persistent=persistent)
    await _run(session, "return 0")  # the worker is booted and the isolate made
    samples = []
    for i in range(n):
        t0 = time.perf_counter()
        result = await _run(session, f"return {i}")
        samples.append((time.perf_counter() - t0) * 1000)
        assert result.ok, result.error
    session.close_now()
    return statistics.median(samples)


async def promise_all_ms(engine: str, runs: int) -> float:
    session = _session(engine=engine, persistent=True)
    program = "await Promise.all(Array.from({length: 1000}, () => tools.noop()))"
    await _run(session, program)
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = await _run(session, program)
        samples.append((time.perf_counter() - t0) * 1000)
        assert result.ok and len(result.tool_calls) == 1000, result.error
    session.close_now()
    return statistics.median(samples)


def _rss_mb(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


async def rss_mb(engine: str) -> dict[str, float]:
    session = _session(engine=engine, persistent=True)
    await _run(session, "globalThis.x = 1")
    await asyncio.sleep(0.2)
    worker = session._isolates._worker
    assert worker is not None
    figures = {"parent_idle_session": _rss_mb(), "worker": _rss_mb(worker.pid)}
    session.close_now()
    return figures


def _cpu_s(pid: int) -> float:
    """A process's CPU time so far (user and system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _spares_booted(timeout_s: float = 10.0) -> None:
    """Until the pool's spare workers have booted (their CPU time stops growing): the
    spare a session starts behind its worker boots while the session's first programs
    run, and on two cores its boot makes both ends of the pipe stop polling (a third
    runnable process), which is the boot's cost, not the call's."""
    from codemode.js_runtime.worker_pool import POOL

    pids = [w.pid for spares in POOL._spares.values() for w in spares]
    deadline = time.monotonic() + timeout_s
    last = -1.0
    while time.monotonic() < deadline:
        try:
            used = sum(_cpu_s(pid) for pid in pids)
        except OSError:  # one ended: nothing of it left to wait for
            pids = [pid for pid in pids if os.path.exists(f"/proc/{pid}")]
            continue
        if used == last:
            return
        last = used
        time.sleep(0.25)


async def tool_call_us(engine: str, calls: int, runs: int) -> tuple[float, dict[str, float]]:
    """The awaited call's median time, and the CPU time per call of each process."""
    limits = Limits(timeout_s=120, max_tool_calls=calls + 10)
    session = _session(engine=engine, limits=limits, persistent=True)
    program = f"for (let i = 0; i < {calls}; i++) await tools.noop();"
    await _run(session, program.replace(str(calls), "100"))  # warm up
    _spares_booted()
    worker = session._isolates._worker
    assert worker is not None
    samples, parent_cpu, worker_cpu = [], [], []
    for _ in range(runs):
        cpu0, worker0 = time.process_time(), _cpu_s(worker.pid)
        t0 = time.perf_counter()
        result = await _run(session, program)
        elapsed = time.perf_counter() - t0
        assert result.ok and len(result.tool_calls) == calls, result.error
        samples.append(elapsed / calls * 1e6)
        parent_cpu.append((time.process_time() - cpu0) / calls * 1e6)
        worker_cpu.append((_cpu_s(worker.pid) - worker0) / calls * 1e6)
    session.close_now()
    cpu = {
        "parent": round(statistics.median(parent_cpu), 1),
        "worker": round(statistics.median(worker_cpu), 1),
    }
    return statistics.median(samples), cpu


async def registry_call_cpu_us(calls: int, runs: int) -> float:
    """CPU time per awaited call of the no-op tool down the registry's path alone."""
    from codemode.js_runtime.delegate import NestedCall

    registry = _registry()
    delegate = RegistryDelegate(registry, ToolContext(ROOT))
    call = NestedCall("cell", "noop", {})
    for _ in range(1000):
        await delegate.call_tool(call)
    samples = []
    for _ in range(runs):
        cpu0 = time.process_time()
        for _ in range(calls):
            await delegate.call_tool(call)
        samples.append((time.process_time() - cpu0) / calls * 1e6)
    return statistics.median(samples)


_ECHO = """
import os, select, sys
spinning = sys.argv[1] == "1"
if spinning:
    sys.path[:0] = sys.argv[2:]
    from codemode.js_runtime.spin import RUN_QUEUE, Spinner
    spinner = Spinner(80e-6, busy=RUN_QUEUE.busy)
os.set_blocking(0, False)
poll = select.poll()
poll.register(0, select.POLLIN)
got = []

def read():
    try:
        got.append(os.read(0, 1))
        return True
    except BlockingIOError:
        return False

while True:
    if not (spinning and spinner.wait(read)):
        while not read():
            poll.poll()
    b = got.pop()
    if not b:
        break
    os.write(1, b)
"""


def pipe_round_trip_us(trips: int, runs: int, spinning: bool) -> float:
    """One byte there and back between two processes: what any crossing costs here,
    with both sides sleeping on the pipe or (``spinning``) polling it first."""
    from codemode.js_runtime.spin import RUN_QUEUE, Spinner

    child = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", _ECHO, "1" if spinning else "0", *sys.path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdin and child.stdout
    to_child, from_child = child.stdin.fileno(), child.stdout.fileno()
    os.set_blocking(from_child, False)
    spinner = Spinner(80e-6, busy=RUN_QUEUE.busy)
    poll = select.poll()
    poll.register(from_child, select.POLLIN)

    def read() -> bool:
        try:
            return bool(os.read(from_child, 1))
        except BlockingIOError:
            return False

    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(trips):
            os.write(to_child, b"x")
            if not (spinning and spinner.wait(read)):
                while not read():
                    poll.poll()
        samples.append((time.perf_counter() - t0) / trips * 1e6)
    child.stdin.close()
    child.wait()
    child.stdout.close()
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
    load_at_start = os.getloadavg()[0]
    report: dict[str, object] = {}
    floor = pipe_round_trip_us(10_000, 3 if quick else 7, spinning=False)
    spun = pipe_round_trip_us(10_000, 3 if quick else 7, spinning=True)
    report["pipe_round_trip_us"] = {"sleeping": round(floor, 1), "spinning": round(spun, 1)}
    report["registry_call_cpu_us"] = round(await registry_call_cpu_us(20_000, 3 if quick else 7), 2)
    for engine in ("quickjs", "v8"):
        start = await program_ms(engine, 50 if quick else 500, persistent=True)
        fresh = await program_ms(engine, 20 if quick else 200, persistent=False)
        call, call_cpu = await tool_call_us(engine, 10_000, 2 if quick else 5)
        gathered = await promise_all_ms(engine, 3 if quick else 15)
        rss = await rss_mb(engine)
        hello = hello_vs_node(engine, 3 if quick else 15)
        target = TARGETS[engine]
        report[engine] = {
            "program_start_ms": round(start, 3),
            "fresh_isolate_ms": round(fresh, 3),
            "tool_call_us": round(call, 1),
            "tool_call_cpu_us": call_cpu,
            "tool_call_vs_pipe": round(call / floor, 2),
            "promise_all_1000_ms": round(gathered, 1),
            "rss_mb": rss,
            "hello_vs_node": hello,
            "targets": target,
            "meets": {
                "program_start": start <= target["program_start_ms"],
                "tool_call": call <= target["tool_call_us"],
                "promise_all_1000": gathered <= target["promise_all_1000_ms"],
            },
        }
    hello = hello_vs_node(None, 3 if quick else 15)
    report["hello"] = {
        "command": "interpreter run examples/hello.js",
        **hello,
        "target_ratio": 2.0,
        "meets": hello["ratio"] is not None and hello["ratio"] <= 2.0,
    }
    report["load_average"] = [load_at_start, os.getloadavg()[0]]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
