"""V8 backend: a JIT for CPU-heavy programs, over mini-racer's library.

V8 runs on a thread of its own (``v8_isolate.py``). Promise continuations run at the
microtask checkpoint *between* evaluations, outside the reach of an evaluation's
timeout; a loop that starts after an ``await`` can therefore only be stopped by closing
the isolate. The parent kills the worker after any timeout, so that is always what
happens.

Because V8 runs elsewhere, the worker's flusher thread can read console output while
a step is still running: the prelude writes it into an ArrayBuffer whose bytes we read
in place (``live console`` in ``prelude.js``), so a long synchronous stretch of a
program shows its output as it happens.
"""

from __future__ import annotations

import ctypes
import json
import struct
import threading
from collections.abc import Callable
from typing import ClassVar

from codemode.js_runtime.engine import (
    ChainServer,
    EngineOutOfMemory,
    EngineTimeout,
    ScriptError,
)
from codemode.js_runtime.protocol import LEVELS
from codemode.js_runtime.v8_abi import ARRAY, FUNCTION, library
from codemode.js_runtime.v8_isolate import Evaluation, Isolate, Memory, Outcome, V8Error

_DRAIN = "__cm.drain()"
_LIVE_BYTES = 512 * 1024  # 8 bytes of header, then UTF-16 units
# The inbox (``inbox`` in ``prelude.js``): results that fit go there, and are settled by
# the same function every time, with no script to compile (a new script per settle is
# compiled anew each time: a third of V8's work for an awaited tool call).
_INBOX_BYTES = 256 * 1024
_SETTLE_INBOX = "__cm.settleInbox()"
_UNITS = struct.Struct("=i")  # the inbox's Int32 0: how many UTF-16 units follow
_LEVELS = LEVELS  # the prelude's LEVELS, same order
# Evaluated once the prelude is installed (after the first step): the prelude's two
# functions every tool call runs, and the (empty) argument list they are called with.
# Calling a function kept from here costs V8 no compilation and no new closure, where
# evaluating ``__cm.drain()`` compiles (a cache hit, still) and instantiates a script.
_KEPT = (
    f"__cm.live(new ArrayBuffer({_LIVE_BYTES}))",
    f"__cm.inbox(new ArrayBuffer({_INBOX_BYTES}))",
    "__cm.settleInbox",
    "__cm.drain",
    "[]",
)


class V8Engine:
    """An Engine over one V8 isolate."""

    name: ClassVar[str] = "v8"

    def __init__(self, memory_bytes: int) -> None:
        self._isolate = Isolate(memory_bytes)
        self.on_log: Callable[[str, str], None] | None = None
        self._live: Memory | None = None
        # The inbox's bytes, written in place (no ctypes object made per settle).
        self._inbox: memoryview | None = None
        # The prelude's functions and an empty argument list, as values kept for
        # ``Isolate.call`` (``_KEPT``); None until the prelude is installed.
        self._settle_inbox: int | None = None
        self._drain: int | None = None
        self._no_arguments: int | None = None
        self._live_read = 0  # units of the live console already passed to on_log
        self._first_step = True
        # The live console is read by the step and by the worker's flusher thread.
        self._lock = threading.Lock()

    @classmethod
    def boot(cls) -> None:
        library()  # maps the library and starts V8 before the process is confined

    def step(self, script: str) -> str:
        # The script and the drain are posted at once: V8 runs them in order with its
        # microtask checkpoint in between (where the continuations the first one
        # queued run), so one round trip serves both. The parent bounds the whole
        # program's time and kills this process when it runs out.
        isolate = self._isolate
        posted = [isolate.post(script), self._post_drain(isolate.reserve())]
        kept = [isolate.post(code) for code in _KEPT] if self._first_step else []
        isolate.wait((posted + kept)[-1], self.read_live if self.on_log else None)
        outcomes = [isolate.take(evaluation) for evaluation in posted]
        if kept:  # the first step installed the prelude: take what it hands over
            self._first_step = False
            self._keep(kept)
        return self._complete(outcomes)

    def _keep(self, kept: list[Evaluation]) -> None:
        isolate = self._isolate
        live, inbox = isolate.take(kept[0]), isolate.take(kept[1])
        if isinstance(live, Memory):
            self._live = live
        if isinstance(inbox, Memory):
            self._inbox = memoryview(
                (ctypes.c_char * inbox.size).from_address(inbox.address)
            ).cast("B")
        values = [isolate.take_value(evaluation) for evaluation in kept[2:]]
        if [kind for _, kind in values] == [FUNCTION, FUNCTION, ARRAY]:
            self._settle_inbox, self._drain, self._no_arguments = (v for v, _ in values)
        # (Otherwise the prelude is not there, and programs fail anyway; the values
        # not kept are freed with the context.)

    def _post_drain(self, callback_id: int) -> Evaluation:
        if self._drain is not None and self._no_arguments is not None:
            return self._isolate.call(self._drain, self._no_arguments, callback_id)
        return self._isolate.post(_DRAIN, callback_id, keep=True)

    def _post_settle(self, results_json: str) -> Evaluation:
        """Post the settle of ``results_json``: the inbox's function, with the text
        written into the inbox, when it fits. (Nothing in the isolate runs meanwhile:
        a settle is only posted once the evaluations before it are done.)"""
        isolate = self._isolate
        inbox, settle = self._inbox, self._settle_inbox
        data = results_json.encode("utf-16-le", "surrogatepass")
        if inbox is None or len(data) > len(inbox) - 8:
            return isolate.post(_settle_script(results_json))
        inbox[8 : 8 + len(data)] = data
        _UNITS.pack_into(inbox, 0, len(data) // 2)
        if settle is None or self._no_arguments is None:
            return isolate.post(_SETTLE_INBOX, keep=True)
        return isolate.call(settle, self._no_arguments)

    def settle_chain(self, results_json: str, serve: ChainServer) -> None:
        """Settle tool calls again and again without this thread waking in between.

        Each settle's outcome is handed to ``serve`` on V8's own thread, as soon as V8
        files it: ``serve(finish)`` calls ``finish()`` (the drained state, or the
        exception ``settle`` would raise), replies, and returns the next results to
        settle, which are posted from there; or None, which ends the chain and
        returns here. A thread hand-over per evaluation costs more than V8's work for
        a tool call, so the V8 thread serving the pipe itself is what makes a call
        cheap. ``serve`` must not raise.
        """
        isolate = self._isolate
        ended = threading.Event()
        # The settle and drain in flight, and the drain's callback id: set before the
        # drain is posted, since V8 may file it (and this chain serve it, on the V8
        # thread) before the post returns. Only the V8 thread posts after the first.
        posted: list[Evaluation] = []
        awaited = [0]

        def finish() -> str:
            return self._complete([isolate.take(evaluation) for evaluation in posted])

        def post(text: str) -> None:
            # (The drain's evaluation is all its callback id: it has no source value.)
            drain = Evaluation(isolate.reserve(), None)
            posted[:] = [self._post_settle(text), drain]
            awaited[0] = drain.callback_id
            self._post_drain(drain.callback_id)

        def filed(callback_id: int) -> None:
            if callback_id == awaited[0]:
                text = serve(finish)
                if text is None:
                    ended.set()
                else:
                    post(text)

        isolate.on_filed = filed
        try:
            post(results_json)
            ended.wait()
        finally:
            isolate.on_filed = None

    def _complete(self, outcomes: list[Outcome]) -> str:
        """The drained state from a step's outcomes; console lines go to ``on_log``."""
        run, state = outcomes
        if isinstance(run, V8Error):
            raise self._translate(run)
        if isinstance(state, V8Error):
            raise self._translate(state)
        if not isinstance(state, str):
            raise ScriptError("internal error: drain() did not return a string")
        written = _live_units(state)
        if written:
            # The step is over, so what is left in the buffer is complete and still.
            # Read and passed on under the lock, so that lines a concurrent reader took
            # are passed on before these.
            with self._lock:
                lines = self._live_lines_locked(written)
                if self.on_log is not None:
                    for level, text in lines:
                        self.on_log(level, text)
            if self.on_log is None:  # nobody told while it ran: they go first in the state
                drained = json.loads(state)
                drained["logs"] = [*lines, *drained["logs"]]
                state = json.dumps(drained)
        with self._lock:
            self._live_read = 0
        return state

    def read_live(self) -> None:
        """Pass the console lines written since the last read to ``on_log``."""
        if self.on_log is not None:
            with self._lock:
                for level, text in self._live_lines_locked(None):
                    self.on_log(level, text)

    def _live_lines(self, upto: int | None) -> list[tuple[str, str]]:
        """The live console's lines from the last read up to ``upto`` units (None: up to
        what the prelude has published so far)."""
        with self._lock:
            return self._live_lines_locked(upto)

    def _live_lines_locked(self, upto: int | None) -> list[tuple[str, str]]:
        live = self._live
        if live is None:
            return []
        capacity = (live.size - 8) // 2
        written = ctypes.c_int32.from_address(live.address).value if upto is None else upto
        if not self._live_read < written <= capacity:
            return []
        start = self._live_read
        data = ctypes.string_at(live.address + 8 + 2 * start, 2 * (written - start))
        units = memoryview(data).cast("H")
        lines, at = [], 0
        while at + 3 <= len(units):
            level, low, high = units[at], units[at + 1], units[at + 2]
            end = at + 3 + (low | high << 16)
            if level >= len(_LEVELS) or end > len(units):
                break  # not a record: nothing the prelude wrote
            # Lone surrogates (possible in JavaScript strings) become U+FFFD, as elsewhere.
            text = units[at + 3 : end].tobytes().decode("utf-16-le", "replace")
            lines.append((_LEVELS[level], text))
            at = end
        self._live_read = start + at
        return lines

    def _translate(self, error: V8Error) -> Exception:
        if error.kind == "timeout":
            return EngineTimeout()
        if error.kind == "oom" or self._isolate.memory_limit_reached():
            return EngineOutOfMemory()
        return ScriptError(str(error))

    def settle(self, results_json: str) -> str:
        isolate = self._isolate
        posted = [self._post_settle(results_json), self._post_drain(isolate.reserve())]
        isolate.wait(posted[-1], self.read_live if self.on_log else None)
        return self._complete([isolate.take(evaluation) for evaluation in posted])

    def close(self) -> None:
        self._isolate.close()
        self._live = self._inbox = None
        self._settle_inbox = self._drain = self._no_arguments = None


def _settle_script(results_json: str) -> str:
    return f"__cm.settle(JSON.parse({json.dumps(results_json)}));"


def _live_units(state: str) -> int:
    """The drained state's ``live`` count, its last key, read without parsing it all."""
    if state.endswith('"live":0}'):  # (the usual case: every tool call's state)
        return 0
    at = state.rfind('"live":')
    try:
        return int(state[at + 7 : -1]) if at != -1 and state.endswith("}") else 0
    except ValueError:
        return 0
