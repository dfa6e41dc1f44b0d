"""An engine worker that waits for a request sleeps: its console flusher stops waking
once the worker has waited ``_PARK_S`` and starts again with the next request, whose
console lines still leave while its step runs (codemode/js_runtime/worker.py). Real
workers, both engines."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from test_runtime import ENGINES

from codemode.js_runtime import protocol as p
from codemode.js_runtime import worker as worker_module
from codemode.js_runtime.delegate import ToolSet
from codemode.js_runtime.isolates import Isolates, configure_call
from codemode.js_runtime.worker_process import Worker


def _setup(engine: str) -> str:
    return Isolates(engine, persistent=False).setup_script(configure_call(ToolSet(), 10))


def _wakeups(pid: int) -> int:
    """Context switches of all the process's threads so far."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
    return total


async def _ran(worker: Worker, op: int, text: str, on_log: object = None) -> None:
    got, payload = await asyncio.wait_for(worker.request(op, text, on_log), 60)  # type: ignore[arg-type]
    assert got == p.STATE, payload


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_worker_waiting_for_a_request_does_not_wake(engine: str) -> None:
    worker = Worker(engine, 64 << 20)
    try:
        await _ran(worker, p.OPEN, _setup(engine))
        await _ran(worker, p.STEP, "console.log('ran')")
        # Past the park time, then one second: the flusher alone woke 50 times in it.
        await asyncio.sleep(worker_module._PARK_S + 0.5)
        before = _wakeups(worker.pid)
        await asyncio.sleep(1.0)
        woke = _wakeups(worker.pid) - before
        assert woke < 10, woke
        # And the next request is served as before.
        lines: list[str] = []
        await _ran(worker, p.STEP, "console.log('again')", lambda level, line: lines.append(line))
        assert lines == ["again"]
    finally:
        worker.kill()


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_step_after_a_long_wait_shows_its_output_while_it_runs(engine: str) -> None:
    worker = Worker(engine, 64 << 20)
    try:
        await _ran(worker, p.OPEN, _setup(engine))
        await asyncio.sleep(worker_module._PARK_S + 0.5)  # the flusher sleeps now
        seen: list[tuple[str, float]] = []
        program = (
            "console.log('early'); const t0 = Date.now();"
            "while (Date.now() - t0 < 1500) {} console.log('late')"
        )
        await _ran(
            worker, p.STEP, program, lambda level, line: seen.append((line, time.monotonic()))
        )
        ended = time.monotonic()
        assert [line for line, _ in seen] == ["early", "late"]
        # 'early' left while the loop ran, not with the step's reply.
        assert ended - seen[0][1] > 0.75, ended - seen[0][1]
    finally:
        worker.kill()
