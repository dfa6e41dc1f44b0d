"""An engine worker that stops reading its request pipe (a compromised engine, stopped
here with SIGSTOP) holds its own program until that program's deadline, and nothing
else: this process's event loop keeps running, the program ends with its time limit,
and the next program gets a fresh worker."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

from runtime_support import loop_ticks

from codemode.host.sessions import delegated_session
from codemode.js_runtime.delegate import NestedCall, ToolSet
from codemode.js_runtime.models import Limits
from codemode.js_runtime.outcome import Completed
from codemode.js_runtime.worker_process import Worker

# More than a pipe holds (64 KiB on Linux, up to 1 MiB when raised): the write of the
# result cannot finish while the worker does not read.
RESULT_CHARS = 4 << 20


async def test_a_worker_that_stops_reading_holds_only_its_own_program(
    monkeypatch: object,
) -> None:
    workers: list[Worker] = []
    real_send = Worker.send

    def send(self: Worker, op: int, text: str) -> bool:
        workers.append(self)
        return real_send(self, op, text)

    monkeypatch.setattr(Worker, "send", send)  # type: ignore[attr-defined]
    watchdog: list[threading.Timer] = []

    class Delegate:
        async def call_tool(self, call: NestedCall) -> object:
            pid = workers[-1].pid
            os.kill(pid, signal.SIGSTOP)
            # Were the loop held, nothing would ever stop the worker: the watchdog
            # kills it after a while, so that the test fails instead of hanging.
            timer = threading.Timer(20, os.kill, (pid, signal.SIGKILL))
            timer.start()
            watchdog.append(timer)
            return "x" * RESULT_CHARS

        def notify(self, cell_id: str, event: object) -> None:
            pass

    session = delegated_session(engine="quickjs", limits=Limits(timeout_s=2))
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with loop_ticks(0.05) as ticks:
            outcome = await asyncio.wait_for(
                session.execute(
                    "const r = await tools.t(); r.length",
                    ToolSet(("t",)),
                    yield_time=60,
                    delegate=Delegate(),
                ),
                60,
            )
        elapsed = loop.time() - started
        assert isinstance(outcome, Completed)
        error = outcome.result.error
        assert error is not None and error.limit == "timeout", outcome.result
        assert elapsed < 15, "the program was not stopped at its deadline"
        # The loop ran all along: about 2 s of 50 ms ticks (half, on a loaded machine).
        assert len(ticks) >= 16, f"the event loop was held: {len(ticks)} ticks in {elapsed:.1f} s"
        monkeypatch.undo()  # type: ignore[attr-defined]
        again = await asyncio.wait_for(
            session.execute("6 * 7", ToolSet(()), yield_time=60, delegate=Delegate()), 60
        )
        assert isinstance(again, Completed) and again.result.value == 42
    finally:
        for timer in watchdog:
            timer.cancel()
        for worker in workers:
            worker.kill()
        await session.close()
