"""quickjs-ng backend, as it runs inside an engine worker process (``worker.py``).

QuickJS contexts must never be touched from two threads, so a step runs on the
worker's main thread. No time limit is armed: the parent measures wall-clock time and
kills the worker when it runs out (QuickJS's own limit counts CPU time, and some
built-ins, such as sorting a huge sparse array, never check it). Without a time limit
the context accepts a Python callable, which is how each console line leaves the
isolate as it is written (``on_log``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import quickjs
else:
    # The package's own module only re-exports these three from its extension, after
    # importing concurrent.futures and logging: a tenth of a worker's boot.
    import _quickjs as quickjs

from codemode.js_runtime.engine import (
    ChainServer,
    EngineOutOfMemory,
    EngineTimeout,
    ScriptError,
)
from codemode.js_runtime.protocol import LEVELS

# QuickJS's default 256 KB stack is shallow for recursive programs; 8 MB threads
# (the glibc default) leave room for 4 MB.
_STACK_BYTES = 4 * 1024 * 1024
_LEVELS = LEVELS  # the prelude's LEVELS, same order


class QuickJSEngine:
    """An Engine over one ``quickjs.Context``."""

    name: ClassVar[str] = "quickjs"

    def __init__(self, memory_bytes: int) -> None:
        self._ctx = quickjs.Context()
        self._ctx.set_memory_limit(memory_bytes)
        self._ctx.set_max_stack_size(_STACK_BYTES)
        self._settle: quickjs.Object | None = None
        self._drain: quickjs.Object | None = None
        self.on_log: Callable[[str, str], None] | None = None
        # The prelude takes this off the global object when it installs (hostLog).
        self._ctx.add_callable("__cm_hostLog", self._host_log)

    def _host_log(self, level: object, text: object) -> None:
        # Called from JavaScript: it must never raise (QuickJS loses the message and
        # may corrupt the evaluation), whatever it is handed.
        try:
            if self.on_log is not None:
                index = level if isinstance(level, int) and 0 <= level < len(_LEVELS) else 0
                self.on_log(_LEVELS[index], text if isinstance(text, str) else str(text))
        except BaseException:
            pass

    @classmethod
    def boot(cls) -> None:
        pass  # the extension module is loaded by the import

    def read_live(self) -> None:
        pass  # console lines leave as they are written (``on_log``)

    def settle_chain(self, results_json: str, serve: ChainServer) -> None:
        text: str | None = results_json
        while text is not None:
            text = serve(partial(self.settle, text))

    def step(self, script: str) -> str:
        return self._run(lambda ctx: ctx.eval(script))

    def settle(self, results_json: str) -> str:
        # A call into a compiled function costs half an eval of fresh source; this is
        # the hot path of every tool call. Taken from the frozen __cm object, so a
        # program cannot swap it.
        if self._settle is None:
            self._settle = self._ctx.eval("__cm.settleText")
        settle = self._settle
        return self._run(lambda _: settle(results_json))

    def _run(self, start: Callable[[quickjs.Context], object]) -> str:
        ctx = self._ctx
        try:
            start(ctx)
            while ctx.execute_pending_job():
                pass
            if self._drain is None:
                self._drain = ctx.eval("__cm.drain")
            state = self._drain()
        except quickjs.JSException as exc:
            raise _classify(str(exc)) from None
        if not isinstance(state, str):
            raise ScriptError("internal error: drain() did not return a string")
        if _ran_out_of_memory(state):
            raise EngineOutOfMemory()
        return state

    def close(self) -> None:
        # Dropping the last reference frees the runtime; nothing runs in the background.
        self._ctx = self._settle = self._drain = None


def _ran_out_of_memory(state: str) -> bool:
    """Inside an async function QuickJS's out-of-memory error is catchable and arrives as
    a rejection: an InternalError, one without a message when the message could not be
    allocated, or null when even the error object could not be made."""
    if '"InternalError"' not in state and '"Uncaught null"' not in state:
        return False
    try:
        done = json.loads(state).get("done") or {}
        error = done.get("error") or {}
        if not isinstance(error, dict):
            return False
    except (ValueError, AttributeError, RecursionError):
        return False
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
