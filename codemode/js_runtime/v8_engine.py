"""V8 backend: a JIT for CPU-heavy programs, over mini-racer's library.

V8 runs on a thread of its own (``v8_isolate.py``). Promise continuations run at the
microtask checkpoint *between* evaluations, outside the reach of an evaluation's
timeout; a loop that starts after an ``await`` can therefore only be stopped by closing
the isolate. The bridge closes an engine after any timeout, so that is always what
happens.
"""

from __future__ import annotations

import json
from typing import ClassVar

from codemode.js_runtime.engine import EngineOutOfMemory, EngineTimeout, ScriptError
from codemode.js_runtime.v8_isolate import Isolate, V8Error

_DRAIN = "__cm.drain()"


class V8Engine:
    """An Engine over one V8 isolate."""

    name: ClassVar[str] = "v8"

    def __init__(self, memory_bytes: int) -> None:
        self._isolate = Isolate(memory_bytes)

    async def step(self, script: str, timeout: float) -> str:
        # Both evaluations are posted at once: V8 runs them in order with its microtask
        # checkpoint in between (where the continuations the first one queued run), so
        # one round trip serves both. The bridge bounds the whole program with
        # asyncio.timeout; cancelling terminates the JavaScript still running.
        isolate = self._isolate
        run, state = await isolate.finish([isolate.post(script), isolate.post(_DRAIN)])
        for outcome in (run, state):
            if isinstance(outcome, V8Error):
                raise self._translate(outcome)
        if not isinstance(state, str):
            raise ScriptError("internal error: drain() did not return a string")
        return state

    def _translate(self, error: V8Error) -> Exception:
        if error.kind == "timeout":
            return EngineTimeout()
        if error.kind == "oom" or self._isolate.memory_limit_reached():
            return EngineOutOfMemory()
        return ScriptError(str(error))

    async def settle(self, results_json: str, timeout: float) -> str:
        return await self.step(f"__cm.settle(JSON.parse({json.dumps(results_json)}));", timeout)

    def close(self) -> None:
        self._isolate.close()
