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
from codemode.js_runtime.v8_abi import library
from codemode.js_runtime.v8_isolate import Evaluation, Isolate, Memory, Outcome, V8Error

_DRAIN = "__cm.drain()"
_LIVE_BYTES = 512 * 1024  # 8 bytes of header, then UTF-16 units
# The inbox (``inbox`` in ``prelude.js``): results that fit go there, and are settled by
# the same script every time. A new script per settle is compiled anew each time: a
# third of V8's work for an awaited tool call.
_INBOX_BYTES = 256 * 1024
_SETTLE_INBOX = "__cm.settleInbox()"
_UNITS = struct.Struct("=i")  # the inbox's Int32 0: how many UTF-16 units follow
_LEVELS = ("log", "info", "warn", "error", "debug")  # the prelude's LEVELS, same order


class V8Engine:
    """An Engine over one V8 isolate."""

    name: ClassVar[str] = "v8"

    def __init__(self, memory_bytes: int) -> None:
        self._isolate = Isolate(memory_bytes)
        self.on_log: Callable[[str, str], None] | None = None
        self._live: Memory | None = None
        # The inbox's bytes, written in place (no ctypes object made per settle).
        self._inbox: memoryview | None = None
        self._live_read = 0  # units of the live console already passed to on_log
        self._first_step = True
        # The live console is read by the step and by the worker's flusher thread.
        self._lock = threading.Lock()

    @classmethod
    def boot(cls) -> None:
        library()  # maps the library and starts V8 before the process is confined

    def step(self, script: str) -> str:
        # Both evaluations are posted at once: V8 runs them in order with its microtask
        # checkpoint in between (where the continuations the first one queued run), so
        # one round trip serves both. The parent bounds the whole program's time and
        # kills this process when it runs out.
        posted = self._post(script)
        outcomes = self._isolate.finish(posted, self.read_live if self.on_log else None)
        return self._complete(outcomes)

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
        posted: list[Evaluation] = []
        # V8 may file a settle before ``post`` has even returned (a short one, posted
        # from this thread): whichever of ``post`` and ``filed`` sees the last
        # evaluation filed first claims it, under the lock, and only that one goes on.
        lock = threading.Lock()
        claimed: list[int] = []

        def claim(callback_id: int) -> bool:
            if not posted or callback_id != posted[-1].callback_id or callback_id in claimed:
                return False
            claimed[:] = [callback_id]
            return True

        def post(text: str | None) -> None:
            # Posts the settle of ``text``, or ends the chain (None). A loop, not
            # recursion: on this thread settle after settle can be filed before it is
            # posted (each then served from here).
            while text is not None:
                evaluations = self._post(self._settle_script(text))
                with lock:
                    posted[:] = evaluations
                    go = isolate.filed(evaluations[-1]) and claim(evaluations[-1].callback_id)
                if not go:
                    return
                text = serve(finish)
            posted.clear()
            ended.set()

        def finish() -> str:
            return self._complete([isolate.take(e) for e in posted])

        def filed(callback_id: int) -> None:
            with lock:
                go = claim(callback_id)
            if go:
                post(serve(finish))

        isolate.on_filed = filed
        try:
            post(results_json)
            ended.wait()
        finally:
            isolate.on_filed = None

    def _post(self, script: str) -> list[Evaluation]:
        isolate = self._isolate
        posted = [
            isolate.post(script, keep=script is _SETTLE_INBOX),
            isolate.post(_DRAIN, keep=True),
        ]
        if self._first_step:  # it installs the prelude: then hand the prelude its buffers
            self._first_step = False
            posted.append(isolate.post(f"__cm.live(new ArrayBuffer({_LIVE_BYTES}))"))
            posted.append(isolate.post(f"__cm.inbox(new ArrayBuffer({_INBOX_BYTES}))"))
        return posted

    def _complete(self, outcomes: list[Outcome]) -> str:
        """The drained state from a step's outcomes; console lines go to ``on_log``."""
        run, state = outcomes[:2]
        if len(outcomes) == 4 and isinstance(outcomes[2], Memory):
            self._live = outcomes[2]
        if len(outcomes) == 4 and isinstance(outcomes[3], Memory):
            inbox = outcomes[3]
            self._inbox = memoryview(
                (ctypes.c_char * inbox.size).from_address(inbox.address)
            ).cast("B")
        for outcome in (run, state):
            if isinstance(outcome, V8Error):
                raise self._translate(outcome)
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
        return self.step(self._settle_script(results_json))

    def _settle_script(self, results_json: str) -> str:
        """The script that settles ``results_json``: the inbox's, with the text written
        into it, when it fits. (Nothing in the isolate runs meanwhile: a settle is only
        posted once the evaluations before it are done.)"""
        inbox = self._inbox
        data = results_json.encode("utf-16-le", "surrogatepass")
        if inbox is None or len(data) > len(inbox) - 8:
            return _settle_script(results_json)
        inbox[8 : 8 + len(data)] = data
        _UNITS.pack_into(inbox, 0, len(data) // 2)
        return _SETTLE_INBOX

    def close(self) -> None:
        self._isolate.close()
        self._live = self._inbox = None


def _settle_script(results_json: str) -> str:
    return f"__cm.settle(JSON.parse({json.dumps(results_json)}));"


def _live_units(state: str) -> int:
    """The drained state's ``live`` count, its last key, read without parsing it all."""
    at = state.rfind('"live":')
    try:
        return int(state[at + 7 : -1]) if at != -1 and state.endswith("}") else 0
    except ValueError:
        return 0
