"""The bridge: runs one program in an isolate and serves its tool calls.

The loop is the same for every engine:

1. evaluate the wrapped program; the engine runs Promise jobs and hands back the
   prelude's drained state (console lines, new tool calls, whether it finished);
2. start each new tool call as an asyncio task, so ``Promise.all`` really overlaps;
3. wait for the first results (or the deadline), settle their Promises in the isolate,
   and go back to 2 until the program finishes or a limit stops it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Coroutine
from functools import cache
from importlib import resources
from typing import Any

from codemode.js_runtime import errors
from codemode.js_runtime.eager import resume
from codemode.js_runtime.engine import (
    Engine,
    EngineOutOfMemory,
    EngineTimeout,
    ScriptError,
    create_engine,
)
from codemode.js_runtime.models import (
    ExecError,
    ExecEvent,
    ExecResult,
    LimitName,
    Limits,
    LogEvent,
    ToolCallFinished,
    ToolCallRecord,
    ToolCallStarted,
)
from codemode.js_runtime.output import CappedOutput
from codemode.js_runtime.source import Program, prepare
from codemode.tools.context import ToolContext, ToolError
from codemode.tools.registry import ToolRegistry

EventSink = Callable[[ExecEvent], None]
_TIMER = "__timer"
# How long cancelled tool calls get to clean up (a shell call kills and reaps its
# process group in well under this) before a program's result is returned anyway.
_CLEANUP_S = 2.0


@cache
def _prelude() -> str:
    # inspect.js first: the prelude's console takes its formatter from it.
    here = resources.files("codemode.js_runtime")
    return "".join(here.joinpath(n).read_text("utf-8") for n in ("inspect.js", "prelude.js"))


class LimitReached(Exception):
    def __init__(self, limit: LimitName, message: str) -> None:
        super().__init__(message)
        self.limit = limit


class Bridge:
    """Runs programs against a tool registry in one engine.

    Not persistent (the default): every program gets a fresh isolate. Persistent:
    globals survive from one program to the next, until a limit forces a new isolate.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        context: ToolContext,
        *,
        engine: str = "quickjs",
        limits: Limits | None = None,
        persistent: bool = False,
        globals: dict[str, Any] | None = None,
        setup_scripts: list[str] | None = None,
    ) -> None:
        self.registry = registry
        self.context = context
        self.engine_name = engine
        self.limits = limits or Limits()
        self.persistent = persistent
        self.globals = dict(globals or {})
        # Extra JavaScript run in each new isolate after the prelude (skill loader).
        self.setup_scripts = list(setup_scripts or [])
        self._engine: Engine | None = None
        self._engine_loop: asyncio.AbstractEventLoop | None = None

    async def execute(
        self, source: str, *, on_event: EventSink | None = None, limits: Limits | None = None
    ) -> ExecResult:
        """Run one program to completion, a limit, or cancellation."""
        run = _Run(self, prepare(source), limits or self.limits, on_event)
        try:
            return await run.go()
        finally:
            if not self.persistent:
                self._discard_engine()

    async def new_engine(self, deadline: float, limits: Limits) -> Engine:
        """A fresh isolate with the prelude installed and configured."""
        engine = create_engine(self.engine_name, limits.memory_mb * 1024 * 1024)
        setup = [
            _prelude(),
            "\n//# sourceURL=codemode-prelude.js\n",
            f"__cm.configure({json.dumps(self.registry.flat_names())}, "
            f"{limits.max_tool_calls}, {json.dumps(self.registry.namespaces())});",
        ]
        for name, value in self.globals.items():
            setup.append(
                f"Object.defineProperty(globalThis, {json.dumps(name)}, "
                f"{{value: JSON.parse({json.dumps(json.dumps(value))}), writable: true}});"
            )
        setup.extend(self.setup_scripts)
        try:
            await engine.step("\n".join(setup), _remaining(deadline))
        except BaseException:
            engine.close()
            raise
        return engine

    async def engine_for(self, deadline: float, limits: Limits) -> Engine:
        """The engine to run the next program in: the kept one, or a fresh one."""
        loop = asyncio.get_running_loop()
        if self._engine is not None and self._engine_loop is loop:
            return self._engine
        self._discard_engine()
        self._engine = await self.new_engine(deadline, limits)
        self._engine_loop = loop
        return self._engine

    def _discard_engine(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()

    def close(self) -> None:
        """Free the isolate (a persistent host keeps one between programs)."""
        self._discard_engine()


def _fresh(script: str) -> str:
    # Same line as the wrapper's first, so program line numbers do not move.
    return "__cm.reset(); " + script


def _well_formed(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_well_formed(v) for v in value]
    if isinstance(value, dict):
        return {_well_formed(k): _well_formed(v) for k, v in value.items()}
    return value


def _remaining(deadline: float) -> float:
    return deadline - asyncio.get_running_loop().time()


class _Run:
    """The state of one program's execution."""

    def __init__(
        self, bridge: Bridge, program: Program, limits: Limits, on_event: EventSink | None
    ) -> None:
        self.bridge = bridge
        self.program = program
        self.limits = limits
        self.on_event = on_event
        self.output = CappedOutput(limits.output_chars)
        self.records: dict[int, ToolCallRecord] = {}
        self.tasks: dict[int, asyncio.Task[tuple[bool, Any]]] = {}
        # Finished calls whose results the isolate has not seen yet: (id, (ok, payload)).
        self.ready: list[tuple[int, tuple[bool, Any]]] = []
        self.wakeup: asyncio.Future[None] | None = None
        self.tool_names = [*bridge.registry.flat_names(), *bridge.registry.namespaces()]

    async def go(self) -> ExecResult:
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        deadline = loop.time() + self.limits.timeout_s
        reset = False
        value: Any = None
        error: ExecError | None = None
        try:
            # One deadline for the whole program: engine steps and tool waits alike.
            # (QuickJS runs synchronously, so its engine also arms its own interrupt.)
            async with asyncio.timeout_at(deadline):
                value, error = await self._drive(deadline)
        except TimeoutError:
            error = self._timeout_error()
        except LimitReached as exc:
            error = ExecError(kind="limit", name="LimitError", message=str(exc), limit=exc.limit)
        except BaseException:
            self.bridge._discard_engine()
            await self._cancel_tasks()
            raise
        if error is not None and error.kind == "limit":
            # A timed-out or exhausted isolate is not trusted again.
            reset = self.bridge.persistent and self.bridge._engine is not None
            self.bridge._discard_engine()
        await self._cancel_tasks()
        return ExecResult(
            ok=error is None,
            value=value,
            output=self.output.text(),
            logs=self.output.entries(),
            output_truncated=self.output.truncated,
            tool_calls=list(self.records.values()),
            error=error,
            duration_ms=(time.perf_counter() - started) * 1000,
            engine=self.bridge.engine_name,
            isolate_reset=reset,
        )

    async def _drive(self, deadline: float) -> tuple[Any, ExecError | None]:
        program = self.program
        try:
            engine = await self.bridge.engine_for(deadline, self.limits)
            engine.on_log = self._log
            if program.might_be_expression():
                try:
                    state = await self._step(engine, _fresh(program.as_expression()), deadline)
                except ScriptError:
                    # Not an expression after all; nothing ran, so run it as statements.
                    state = await self._step(engine, _fresh(program.as_statements()), deadline)
            else:
                state = await self._step(engine, _fresh(program.as_statements()), deadline)
        except ScriptError as exc:
            return None, errors.from_script_error(exc.text, program, self.tool_names)

        while True:
            done = self._absorb(state)
            if done is not None:
                if done["ok"]:
                    return done.get("value"), None
                err = done["error"]
                return None, errors.from_thrown(
                    err["name"], err["message"], err["stack"], program, self.tool_names
                )
            if not self.tasks and not self.ready:
                return None, ExecError(
                    kind="runtime",
                    name="Error",
                    message="the program is waiting on a Promise that nothing will settle",
                    hint="await only tool calls, timers, or Promises your code resolves",
                )
            results = await self._wait_for_results()
            state = await self._settle(engine, json.dumps(results, default=str), deadline)

    async def _step(self, engine: Engine, script: str, deadline: float) -> dict[str, Any]:
        source = f"{script}\n//# sourceURL=program.js"
        return await self._engine_call(engine.step(source, _remaining(deadline)))

    async def _settle(self, engine: Engine, results: str, deadline: float) -> dict[str, Any]:
        return await self._engine_call(engine.settle(results, _remaining(deadline)))

    async def _engine_call(self, call: Coroutine[Any, Any, str]) -> dict[str, Any]:
        try:
            raw = await call
        except EngineTimeout:
            raise TimeoutError from None
        except EngineOutOfMemory:
            raise LimitReached(
                "memory", f"program stopped: memory limit of {self.limits.memory_mb} MB reached"
            ) from None
        state = json.loads(raw)
        # JavaScript strings may hold lone surrogates ("\uD800"), which no UTF-8 output
        # (terminal, JSON Lines, HTTP) can carry: they become U+FFFD here, once.
        suspect = "\\ud" in raw or "\\uD" in raw  # no lower-cased copy on the hot path
        return _well_formed(state) if suspect else state

    def _timeout_error(self) -> ExecError:
        return ExecError(
            kind="limit",
            name="LimitError",
            message=f"program stopped: time limit of {self.limits.timeout_s:g} s reached",
            limit="timeout",
        )

    def _absorb(self, state: dict[str, Any]) -> dict[str, Any] | None:
        """Take in one drained state: stream logs, start calls; the outcome if finished."""
        for level, text in state["logs"]:
            self._log(level, text)
        for call_id, name, args in state["calls"]:
            self._start_call(call_id, name, args)
        if state["overLimit"]:
            raise LimitReached(
                "tool_calls",
                f"program stopped: more than {self.limits.max_tool_calls} tool calls",
            )
        return state["done"]

    def _log(self, level: str, text: str) -> None:
        shown = self.output.add(level, text)
        if shown is not None and self.on_event is not None:
            self.on_event(LogEvent(level=level, text=shown))

    def _start_call(self, call_id: int, name: str, args: Any) -> None:
        if name == _TIMER:
            coro = _sleep(args)
        else:
            record = ToolCallRecord(id=call_id, name=name, args=args)
            self.records[call_id] = record
            if self.on_event is not None:
                self.on_event(ToolCallStarted(call=record))
            coro = self._invoke(record)
        # Start the handler eagerly (what Python 3.12 calls an eager task): most tools
        # finish without waiting on I/O, and those then cost no trip through the loop.
        try:
            waiting_on = coro.send(None)
        except StopIteration as finished:
            self.ready.append((call_id, finished.value))
            return
        task = asyncio.ensure_future(resume(coro, waiting_on))
        self.tasks[call_id] = task
        task.add_done_callback(lambda t, i=call_id: self._on_done(i, t))

    async def _invoke(self, record: ToolCallRecord) -> tuple[bool, Any]:
        started = time.perf_counter()
        try:
            payload = await self.bridge.registry.invoke(
                record.name, record.args, self.bridge.context
            )
            ok = True
        except ToolError as exc:
            ok, payload = False, str(exc)
        except Exception as exc:  # a tool must never take the session down
            ok, payload = False, f"tools.{record.name} failed: {type(exc).__name__}: {exc}"
        record.ok = ok
        record.duration_ms = round((time.perf_counter() - started) * 1000, 3)
        record.error = None if ok else payload
        if self.on_event is not None:
            self.on_event(ToolCallFinished(call=record))
        return ok, payload

    def _on_done(self, call_id: int, task: asyncio.Task[tuple[bool, Any]]) -> None:
        self.tasks.pop(call_id, None)
        if task.cancelled():
            return
        self.ready.append((call_id, task.result()))
        if self.wakeup is not None and not self.wakeup.done():
            self.wakeup.set_result(None)

    async def _wait_for_results(self) -> list[list[Any]]:
        if not self.ready:
            self.wakeup = asyncio.get_running_loop().create_future()
            try:
                await self.wakeup
            finally:
                self.wakeup = None
        results = [[call_id, ok, payload] for call_id, (ok, payload) in self.ready]
        self.ready.clear()
        return results

    async def _cancel_tasks(self) -> None:
        """Cancel the calls still running and give them a moment to clean up, so that
        nothing a program started (a command's processes) outlives ``execute``."""
        cancelled = []
        for call_id, task in self.tasks.items():
            if not task.done():
                task.cancel()
                cancelled.append(task)
                record = self.records.get(call_id)
                if record is not None and record.ok is None:
                    record.error = "cancelled: the program ended before this call finished"
        self.tasks.clear()
        if cancelled:
            await asyncio.wait(cancelled, timeout=_CLEANUP_S)


async def _sleep(args: dict[str, Any]) -> tuple[bool, Any]:
    await asyncio.sleep(max(float(args.get("ms", 0)), 0) / 1000)
    return True, None
