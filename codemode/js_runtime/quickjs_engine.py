"""quickjs-ng backend: a fresh context costs ~0.1 ms; evaluation runs on the caller's thread.

QuickJS contexts must never be touched from two threads, and a hop to a worker
thread costs ~60 µs — more than the whole tool-call round trip we aim for — so steps
run inline on the event loop's thread. Its interrupt handler checks the time limit
(and Ctrl-C), so a runaway script still returns control within the budget.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import ClassVar

import quickjs

from codemode.js_runtime.engine import EngineOutOfMemory, EngineTimeout, ScriptError

# QuickJS's default 256 KB stack is shallow for recursive programs; 8 MB threads
# (the glibc default) leave room for 4 MB.
_STACK_BYTES = 4 * 1024 * 1024
# Time allowed to collect the output of a step that hit a limit.
_SALVAGE_S = 1.0


class QuickJSEngine:
    """An Engine over one ``quickjs.Context``."""

    name: ClassVar[str] = "quickjs"

    def __init__(self, memory_bytes: int) -> None:
        self._ctx = quickjs.Context()
        self._ctx.set_memory_limit(memory_bytes)
        self._ctx.set_max_stack_size(_STACK_BYTES)
        self._settle: quickjs.Object | None = None
        self._drain: quickjs.Object | None = None
        # QuickJS runs on the caller's thread: nothing can be read while a step runs.
        self.on_log: Callable[[str, str], None] | None = None

    async def step(self, script: str, timeout: float) -> str:
        return self._run(lambda ctx: ctx.eval(script), timeout)

    async def settle(self, results_json: str, timeout: float) -> str:
        # A call into a compiled function costs half an eval of fresh source; this is
        # the hot path of every tool call.
        if self._settle is None:
            self._settle = self._ctx.eval("(json) => __cm.settle(JSON.parse(json))")
        settle = self._settle
        return self._run(lambda _: settle(results_json), timeout)

    def _run(self, start: Callable[[quickjs.Context], object], timeout: float) -> str:
        ctx = self._ctx
        # The limit is measured from the start of each eval / call / job, so it is
        # re-armed with what is left of the budget before every call into the engine.
        ctx.set_time_limit(max(timeout, 0.001))
        started = time.monotonic()
        try:
            start(ctx)
            while ctx.execute_pending_job():
                pass
            if self._drain is None:
                self._drain = ctx.eval("() => __cm.drain()")
            state = self._drain()
        except quickjs.JSException as exc:
            error = _classify(str(exc))
            if not isinstance(error, ScriptError):
                self._salvage_logs()
            raise error from None
        if not isinstance(state, str):
            raise ScriptError("internal error: drain() did not return a string")
        if _ran_out_of_memory(state):
            self._salvage_logs(state)
            # At the memory cap even the error's message may not fit, and then an
            # interrupt looks the same as running out of memory: the clock decides.
            if time.monotonic() - started >= timeout:
                raise EngineTimeout()
            raise EngineOutOfMemory()
        return state

    def _salvage_logs(self, state: str | None = None) -> None:
        """After an interrupt or at the memory cap, pass what the step printed before it
        stopped to ``on_log``: the lines that show where a runaway program got to.
        ``state`` is the step's drained state when there is one."""
        if self.on_log is None or self._drain is None:
            return
        try:
            if state is None:
                self._ctx.set_time_limit(_SALVAGE_S)
                state = self._drain()
            logs = json.loads(state).get("logs", [])
        except Exception:  # out of memory even for this: nothing to show
            return
        for level, text in logs:
            self.on_log(level, text)

    def close(self) -> None:
        # Dropping the last reference frees the runtime; nothing runs in the background.
        self._ctx = self._settle = self._drain = None  # type: ignore[assignment]


def _ran_out_of_memory(state: str) -> bool:
    """Inside an async function QuickJS's out-of-memory error is catchable and arrives as
    a rejection: an InternalError, one without a message when the message could not be
    allocated, or null when even the error object could not be made."""
    if '"InternalError"' not in state and '"Uncaught null"' not in state:
        return False
    done = json.loads(state).get("done") or {}
    error = done.get("error") or {}
    if error.get("name") == "InternalError":
        message = error.get("message") or ""
        return message == "" or "out of memory" in message
    return error.get("message") == "Uncaught null"


def _classify(text: str) -> Exception:
    head = text.split("\n", 1)[0].strip()
    if head == "InternalError: interrupted":
        return EngineTimeout()
    # Out of memory: QuickJS often cannot even allocate the message.
    if head in ("InternalError", "InternalError: out of memory") or "out of memory" in head:
        return EngineOutOfMemory()
    return ScriptError(text)
