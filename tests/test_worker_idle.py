"""An engine worker that waits for a request sleeps: its console flusher stops waking
once the worker has waited ``_PARK_S`` and starts again with the next request, whose
console lines still leave while its step runs (codemode/js_runtime/worker.py). Real
workers, both engines."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from test_isolate_priming import _logs, _setup
from test_runtime import ENGINES

from codemode.js_runtime import protocol as p
from codemode.js_runtime import worker as worker_module
from codemode.js_runtime.worker_process import Worker


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


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_worker_waiting_for_a_request_does_not_wake(engine: str) -> None:
    worker = Worker(engine, 64 << 20)
    try:
        await _logs(worker, p.OPEN, _setup(engine))
        await _logs(worker, p.STEP, "console.log('ran')")
        # Past the park time, then one second: the flusher alone woke 50 times in it.
        await asyncio.sleep(worker_module._PARK_S + 0.5)
        before = _wakeups(worker.pid)
        await asyncio.sleep(1.0)
        woke = _wakeups(worker.pid) - before
        assert woke < 10, woke
        # And the next request is served as before.
        assert await _logs(worker, p.STEP, "console.log('again')") == ["again"]
    finally:
        worker.kill()


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_step_after_a_long_wait_shows_its_output_while_it_runs(engine: str) -> None:
    worker = Worker(engine, 64 << 20)
    try:
        await _logs(worker, p.OPEN, _setup(engine))
        await asyncio.sleep(worker_module._PARK_S + 0.5)  # the flusher sleeps now
        seen: list[tuple[str, float]] = []
        program = (
            "console.log('early'); const t0 = Date.now();"
            "while (Date.now() - t0 < 1500) {} console.log('late')"
        )
        def note(level: str, line: str) -> None:
            seen.append((line, time.monotonic()))

        got, payload = await asyncio.wait_for(worker.request(p.STEP, program, note), 60)
        assert got == p.STATE, payload
        ended = time.monotonic()
        assert [line for line, _ in seen] == ["early", "late"]
        # 'early' left while the loop ran, not with the step's reply.
        assert ended - seen[0][1] > 0.75, ended - seen[0][1]
    finally:
        worker.kill()
