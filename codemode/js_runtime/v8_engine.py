"""V8 backend through mini-racer: a JIT for CPU-heavy programs.

mini-racer runs V8 on a thread of its own and we await its evaluations. Promise
continuations run at the microtask checkpoint *between* evaluations, outside the reach
of an evaluation's timeout; a loop that starts after an ``await`` can therefore only be
stopped by closing the isolate. The bridge closes an engine after any timeout, so that
is always what happens.
"""

from __future__ import annotations

import contextlib
import json
from typing import ClassVar

from py_mini_racer import (
    JSEvalException,
    JSOOMException,
    JSTimeoutException,
    MiniRacer,
)

from codemode.js_runtime.eager import resume
from codemode.js_runtime.engine import EngineOutOfMemory, EngineTimeout, ScriptError

_DRAIN = "__cm.drain()"


class V8Engine:
    """An Engine over one mini-racer isolate."""

    name: ClassVar[str] = "v8"

    def __init__(self, memory_bytes: int) -> None:
        self._mr: MiniRacer | None = MiniRacer()
        self._mr.set_hard_memory_limit(memory_bytes)

    async def step(self, script: str, timeout: float) -> str:
        mr = self._mr
        assert mr is not None, "engine used after close()"
        # Both evaluations are queued at once: V8 runs them in order with its microtask
        # checkpoint in between (where the continuations the first one queued run), and
        # the second crossing to the V8 thread overlaps the first (~40% less per tool
        # call). The bridge bounds the whole program with asyncio.timeout; cancelling
        # an evaluation terminates the JavaScript it runs.
        run = mr.eval_cancelable(script)
        drain = mr.eval_cancelable(_DRAIN)
        try:
            # Each coroutine posts its task to the V8 thread in its first step.
            run_waits, drain_waits = run.send(None), drain.send(None)
            try:
                await resume(run, run_waits)
            except JSEvalException as exc:
                # Let the queued drain finish, so nothing is left running in the isolate.
                with contextlib.suppress(JSEvalException):
                    await resume(drain, drain_waits)
                raise self._translate(exc) from None
            try:
                state = await resume(drain, drain_waits)
            except JSEvalException as exc:
                raise self._translate(exc) from None
        finally:
            # Cancelled (or failed) midway: whatever is still queued is cancelled too.
            run.close()
            drain.close()
        if not isinstance(state, str):
            raise ScriptError("internal error: drain() did not return a string")
        return state

    def _translate(self, exc: JSEvalException) -> Exception:
        if isinstance(exc, JSTimeoutException):
            return EngineTimeout()
        if isinstance(exc, JSOOMException) or (
            self._mr is not None and self._mr.was_hard_memory_limit_reached()
        ):
            return EngineOutOfMemory()
        return ScriptError(str(exc))

    async def settle(self, results_json: str, timeout: float) -> str:
        return await self.step(f"__cm.settle(JSON.parse({json.dumps(results_json)}));", timeout)

    def close(self) -> None:
        mr, self._mr = self._mr, None
        if mr is not None:
            mr.close()
