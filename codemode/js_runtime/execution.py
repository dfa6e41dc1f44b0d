"""One program's execution in an engine worker process, its nested calls served here.

The isolate lives in a worker process (``worker.py``), never in this one. The loop is
the same for every engine:

1. send the wrapped program; the worker evaluates it, runs Promise jobs and replies
   with the prelude's drained state (new tool calls and timers, whether it finished),
   console lines streaming ahead of it;
2. start each new call as an asyncio task (the delegate runs it), so ``Promise.all``
   really overlaps;
3. wait for the first results, send them all in one frame (the moment the first one
   arrives: ``NestedCalls.settled``), and go back to 2 until the program finishes or
   a limit stops it.

Every limit is enforced here, outside the isolate: the wall clock (the worker is
stopped and killed when it runs out), tool calls, console output and the return value
are counted here, and what the worker sends back is validated as untrusted input.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from codemode.js_runtime import errors
from codemode.js_runtime import protocol as p
from codemode.js_runtime.delegate import ToolNames
from codemode.js_runtime.engine import ScriptError
from codemode.js_runtime.isolates import Isolates, configure_call
from codemode.js_runtime.models import (
    ExecError,
    ExecEvent,
    ExecResult,
    HostEvent,
    Limits,
    LogEvent,
)
from codemode.js_runtime.nested import CallTool, LimitReached, NestedCalls
from codemode.js_runtime.output import CappedOutput, cap_value
from codemode.js_runtime.source import Program
from codemode.js_runtime.state import Tampered, encode_results, parse_state
from codemode.js_runtime.worker_process import Worker, WorkerCrashed
from codemode.tool_terms.elide import elide_middle

EventSink = Callable[[ExecEvent], None]
# How long a worker may take to boot and set up a fresh isolate (not the program's time).
_SETUP_S = 30.0
# An error's message is kept to this many characters (head and tail): a program can
# throw anything, and the message travels in every result and every session log.
_ERROR_CHARS = 4_000
def _clip(text: str, cap: int) -> str:
    return elide_middle(text, cap)[0]


def _fresh(script: str, configure: str) -> str:
    # Same line as the wrapper's first, so program line numbers do not move.
    return f"__cm.reset(); {configure}{script}"


class Execution:
    """The state of one program's execution."""

    def __init__(
        self,
        isolates: Isolates,
        program: Program,
        limits: Limits,
        tools: ToolNames,
        cell_id: str,
        call_tool: CallTool,
        on_event: EventSink | None,
    ) -> None:
        self.isolates = isolates
        self.program = program
        self.limits = limits
        self.on_event = on_event
        self.configure = configure_call(tools, limits.max_tool_calls)
        self.tool_names = [*tools.flat_names(), *tools.namespaces()]
        self.output = CappedOutput(limits.output_chars)
        self.calls = NestedCalls(cell_id, call_tool, on_event, limits.max_tool_calls)
        self.value_truncated = False

    async def run(self) -> ExecResult:
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        isolates = self.isolates
        try:
            worker = isolates.checkout(self.limits)
        except OSError as exc:  # no process could be started (fd or process limits)
            return self._result(
                started,
                None,
                ExecError(
                    kind="internal",
                    name="EngineCrashed",
                    message=f"cannot start the engine process: {exc.strerror}",
                ),
            )
        had_isolate = worker.has_isolate
        value: object = None
        error: ExecError | None = None
        setting_up = True
        try:
            # A worker still booting (a busy machine) or a fresh isolate being set up
            # is not the program's time.
            async with asyncio.timeout(_SETUP_S):
                error = await self._open(worker)
            setting_up = False
            if error is None:
                # One deadline for the whole program, measured here: engine steps and
                # tool waits alike. When it passes, the worker is stopped and killed.
                async with asyncio.timeout_at(loop.time() + self.limits.timeout_s):
                    value, error = await self._run_program(worker)
        except TimeoutError:
            await worker.stop(self._log)
            error = self._timeout_error()
            if setting_up:
                error = ExecError(
                    kind="internal",
                    name="EngineCrashed",
                    message=f"the engine process did not start within {_SETUP_S:g} s",
                )
        except LimitReached as exc:
            await worker.stop(self._log)
            error = ExecError(kind="limit", name="LimitError", message=str(exc), limit=exc.limit)
        except WorkerCrashed as exc:
            worker.kill()
            error = self._crash_error(exc)
        except Tampered as exc:
            await worker.stop(self._log)
            error = ExecError(
                kind="runtime",
                name="Error",
                message=f"program stopped: {exc} (it changed the runtime's internals)",
            )
        except BaseException:
            # Cancelled (Ctrl-C, a client's cancel, terminate): stop now, keep what it
            # printed.
            await worker.stop(self._log)
            isolates.checkin(worker)
            await self.calls.cancel()
            raise
        isolates.checkin(worker)
        reset = isolates.persistent and had_isolate and worker.dead
        await self.calls.cancel()
        return self._result(started, value, error, reset)

    def _result(
        self, started: float, value: object, error: ExecError | None, reset: bool = False
    ) -> ExecResult:
        return ExecResult(
            ok=error is None,
            value=value,
            output=self.output.text(),
            logs=self.output.entries(),
            output_truncated=self.output.truncated,
            value_truncated=self.value_truncated,
            tool_calls=list(self.calls.records.values()),
            error=error,
            duration_ms=(time.perf_counter() - started) * 1000,
            engine=self.isolates.engine,
            isolate_reset=reset,
        )

    async def _open(self, worker: Worker) -> ExecError | None:
        """A fresh isolate in ``worker``, unless a persistent one is there already."""
        if self.isolates.persistent and worker.has_isolate:
            return None
        try:
            await self._request(worker, p.OPEN, self.isolates.setup_script(self.configure))
        except ScriptError as exc:
            first = (exc.text.splitlines() or ["?"])[0][:200]
            return ExecError(
                kind="internal", name="Error", message=f"the isolate could not be set up: {first}"
            )
        worker.has_isolate = True
        worker.configured = self.configure
        return None

    async def _run_program(self, worker: Worker) -> tuple[object, ExecError | None]:
        program = self.program
        # A persistent isolate set up for other tools (or another call cap) is told now.
        configure = "" if worker.configured == self.configure else self.configure
        worker.configured = self.configure
        try:
            if program.might_be_expression():
                try:
                    state = await self._step(worker, _fresh(program.as_expression(), configure))
                except ScriptError:
                    # Not an expression after all; nothing ran, so run it as statements.
                    state = await self._step(worker, _fresh(program.as_statements(), configure))
            else:
                state = await self._step(worker, _fresh(program.as_statements(), configure))
        except ScriptError as exc:
            return None, errors.from_script_error(exc.text, program, self.tool_names)

        while True:
            done = self._absorb(state)
            if done is not None:
                if done["ok"]:
                    return self._capped_value(done.get("value")), None
                err = done["error"]
                return None, errors.from_thrown(
                    _clip(err["name"], 200),
                    _clip(err["message"], _ERROR_CHARS),
                    _clip(err["stack"], 4 * _ERROR_CHARS),
                    program,
                    self.tool_names,
                )
            if not self.calls.pending():
                return None, ExecError(
                    kind="runtime",
                    name="Error",
                    message="the program is waiting on a Promise that nothing will settle",
                    hint="await only tool calls, timers, or Promises your code resolves",
                )
            sent = await self.calls.settled(
                lambda results: worker.send(p.SETTLE, encode_results(results))
            )
            got = worker.poll(self._log) if sent else None
            try:
                state = self._state(got if got is not None else await worker.reply(self._log))
            except ScriptError as exc:
                return None, errors.from_script_error(exc.text, program, self.tool_names)

    async def _step(self, worker: Worker, script: str) -> dict[str, Any]:
        return await self._request(worker, p.STEP, f"{script}\n//# sourceURL=program.js")

    async def _request(self, worker: Worker, op: int, text: str) -> dict[str, Any]:
        got = worker.request_now(op, text, self._log)
        return self._state(got if got is not None else await worker.reply(self._log))

    def _state(self, got: tuple[int, bytes]) -> dict[str, Any]:
        """A reply's drained state (a thrown ScriptError, LimitReached or WorkerCrashed
        for what stopped the engine instead)."""
        reply, payload = got
        if reply == p.STATE:
            return parse_state(p.decode(payload))
        kind = payload[0] if payload else p.INTERNAL
        if kind == p.SCRIPT:
            raise ScriptError(p.decode(payload[1:]))
        if kind == p.MEMORY:
            raise LimitReached("memory", self._memory_message())
        raise WorkerCrashed(f"the JavaScript engine failed: {p.decode(payload[1:])[:200]}")

    def _memory_message(self) -> str:
        return f"program stopped: memory limit of {self.limits.memory_mb} MB reached"

    def _crash_error(self, exc: WorkerCrashed) -> ExecError:
        if exc.too_large:
            return ExecError(kind="limit", name="LimitError", message=str(exc), limit="memory")
        if exc.out_of_memory:
            return ExecError(
                kind="limit", name="LimitError", message=self._memory_message(), limit="memory"
            )
        return ExecError(kind="internal", name="EngineCrashed", message=str(exc))

    def _capped_value(self, value: object) -> object:
        capped, self.value_truncated = cap_value(value, self.limits.output_chars)
        return capped

    def _timeout_error(self) -> ExecError:
        return ExecError(
            kind="limit",
            name="LimitError",
            message=f"program stopped: time limit of {self.limits.timeout_s:g} s reached",
            limit="timeout",
        )

    def _absorb(self, state: dict[str, Any]) -> dict[str, Any] | None:
        """Take in one drained state: log, start calls and timers; the outcome if
        finished."""
        for level, text in state["logs"]:
            self._log(level, text)
        self.calls.start(state["timers"], state["calls"])
        if state.get("overLimit"):
            raise self.calls.too_many()
        done: dict[str, Any] | None = state["done"]
        return done

    def _log(self, level: str, text: str) -> None:
        if level == p.HOST:
            self._host_event(text)
            return
        shown = self.output.add(level, text)
        if shown is not None and self.on_event is not None:
            self.on_event(LogEvent(level=level, text=shown))

    def _host_event(self, text: str) -> None:
        # The prelude wrote [kind, data]; anything else did not come from it (a tampered
        # drained state) and is dropped.
        try:
            kind, data = json.loads(text)
        except (ValueError, TypeError, RecursionError):
            return
        if isinstance(kind, str) and isinstance(data, str) and self.on_event is not None:
            self.on_event(HostEvent(kind=kind, data=data))
