"""The bridge: runs one program in an engine worker process and serves its tool calls.

The isolate lives in a worker process (``worker.py``), never in this one. The loop is
the same for every engine:

1. send the wrapped program; the worker evaluates it, runs Promise jobs and replies
   with the prelude's drained state (new tool calls, whether it finished), console
   lines streaming ahead of it;
2. start each new tool call as an asyncio task, so ``Promise.all`` really overlaps;
3. wait for the first results, send them all in one frame, and go back to 2 until the
   program finishes or a limit stops it.

Every limit is enforced here, outside the isolate: the wall clock (the worker is
stopped and killed when it runs out), tool calls, console output and the return value
are counted here, and what the worker sends back is validated as untrusted input.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from functools import cache, partial
from importlib import resources
from typing import Any

from codemode.js_runtime import errors
from codemode.js_runtime import protocol as p
from codemode.js_runtime.eager import resume
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
from codemode.js_runtime.output import CappedOutput, cap_value
from codemode.js_runtime.source import Program, prepare
from codemode.js_runtime.state import Tampered, clip, encode_results, parse_state
from codemode.js_runtime.worker_process import POOL, Worker, WorkerCrashed
from codemode.tools.context import ToolError
from codemode.tools.pipeline import Dispatch, ToolCatalog

EventSink = Callable[[ExecEvent], None]
_TIMER = "__timer"
# How long cancelled tool calls get to clean up (a shell call kills and reaps its
# process group in well under this) before a program's result is returned anyway.
_CLEANUP_S = 2.0
# Timers a program may have waiting at once (they are not tool calls, but each costs
# the host a task).
_MAX_TIMERS = 10_000
# How long a worker may take to boot and set up a fresh isolate (not the program's time).
_SETUP_S = 30.0
# An error's message is kept to this many characters (head and tail): a program can
# throw anything, and the message travels in every result and every session log.
_ERROR_CHARS = 4_000


@cache
def _prelude() -> str:
    # inspect.js first: the prelude's console takes its formatter from it.
    here = resources.files("codemode.js_runtime")
    return "".join(here.joinpath(n).read_text("utf-8") for n in ("inspect.js", "prelude.js"))


class ScriptError(Exception):
    """The worker reported an exception that escaped a script (usually a SyntaxError)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class LimitReached(Exception):
    def __init__(self, limit: LimitName, message: str) -> None:
        super().__init__(message)
        self.limit = limit


def _memory_bytes(limits: Limits) -> int:
    return limits.memory_mb * 1024 * 1024


class Bridge:
    """Runs programs, each in an engine worker process, calling ``dispatch(name, args)``
    for every tool call they make (``ToolRegistry.dispatch`` makes one; the bridge never
    sees the registry). ``catalog`` names the tools each fresh isolate offers.

    Not persistent (the default): every program gets a fresh isolate, and programs run
    at once run in workers of their own. Persistent: globals survive from one program
    to the next in the bridge's worker, programs run one after another, and a program
    stopped by a limit (or a crash) costs the globals: the next one starts afresh.
    """

    def __init__(
        self,
        dispatch: Dispatch,
        catalog: ToolCatalog,
        *,
        engine: str = "quickjs",
        limits: Limits | None = None,
        persistent: bool = False,
        globals: dict[str, Any] | None = None,
        setup_scripts: list[str] | None = None,
    ) -> None:
        from codemode.js_runtime.engine import ENGINES

        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r} (choose from: {', '.join(ENGINES)})")
        self.dispatch = dispatch
        self.catalog = catalog
        self.engine_name = engine
        self.limits = limits or Limits()
        self.persistent = persistent
        self.globals = dict(globals or {})
        # Extra JavaScript run in each new isolate after the prelude (skill loader).
        self.setup_scripts = list(setup_scripts or [])
        self._worker: Worker | None = None  # persistent: the one holding the isolate
        self._idle: list[Worker] = []  # not persistent: workers free for the next program
        self._serial: asyncio.Lock | None = None
        self._closed = False
        POOL.prestart(engine, _memory_bytes(self.limits))

    async def execute(
        self,
        source: str,
        *,
        on_event: EventSink | None = None,
        limits: Limits | None = None,
        dispatch: Dispatch | None = None,
    ) -> ExecResult:
        """Run one program to completion, a limit, or cancellation; its tool calls go to
        ``dispatch`` when given (one that knows which program calls), else the bridge's."""
        run = _Run(self, prepare(source), limits or self.limits, on_event, dispatch)
        if not self.persistent:
            return await run.go()
        if self._serial is None:
            self._serial = asyncio.Lock()
        async with self._serial:  # one program at a time on the persistent isolate
            return await run.go()

    def setup_script(self, limits: Limits) -> str:
        """What a fresh isolate runs first: the prelude, the tools, globals, setup."""
        setup = [
            _prelude(),
            "\n//# sourceURL=codemode-prelude.js\n",
            f"__cm.configure({json.dumps(self.catalog.flat_names())}, "
            f"{limits.max_tool_calls}, {json.dumps(self.catalog.namespaces())});",
        ]
        for name, value in self.globals.items():
            setup.append(
                f"Object.defineProperty(globalThis, {json.dumps(name)}, "
                f"{{value: JSON.parse({json.dumps(json.dumps(value))}), writable: true}});"
            )
        setup.extend(self.setup_scripts)
        return "\n".join(setup)

    def _checkout(self, limits: Limits) -> Worker:
        memory = _memory_bytes(limits)
        if self.persistent:
            worker = self._worker
            if worker is not None and worker.alive() and worker.memory_bytes == memory:
                return worker
            if worker is not None:
                worker.kill()
            self._worker = POOL.take(self.engine_name, memory)
            return self._worker
        while self._idle:
            worker = self._idle.pop()
            if worker.alive() and worker.memory_bytes == memory:
                return worker
            worker.kill()
        return POOL.take(self.engine_name, memory)

    def _checkin(self, worker: Worker) -> None:
        if self.persistent:
            if worker.dead and self._worker is worker:
                self._worker = None
            return
        if worker.alive() and not self._closed and len(self._idle) < 4:
            self._idle.append(worker)
        else:
            worker.kill()

    def close(self) -> None:
        """Kill the bridge's workers (a persistent one holds the isolate)."""
        self._closed = True
        workers, self._idle = self._idle, []
        if self._worker is not None:
            workers.append(self._worker)
            self._worker = None
        for worker in workers:
            worker.kill()


def _fresh(script: str) -> str:
    # Same line as the wrapper's first, so program line numbers do not move.
    return "__cm.reset(); " + script


class _Run:
    """The state of one program's execution."""

    def __init__(
        self,
        bridge: Bridge,
        program: Program,
        limits: Limits,
        on_event: EventSink | None,
        dispatch: Dispatch | None = None,
    ) -> None:
        self.bridge = bridge
        self.dispatch = dispatch or bridge.dispatch
        self.program = program
        self.limits = limits
        self.on_event = on_event
        self.output = CappedOutput(limits.output_chars)
        self.records: dict[int, ToolCallRecord] = {}
        self.tasks: dict[int, asyncio.Task[tuple[bool, object]]] = {}
        # Finished calls whose results the isolate has not seen yet: (id, (ok, payload)).
        self.ready: list[tuple[int, tuple[bool, object]]] = []
        self.wakeup: asyncio.Future[None] | None = None
        self.tool_names = [*bridge.catalog.flat_names(), *bridge.catalog.namespaces()]
        self.calls_made = 0  # counted here: nothing in the isolate can change it
        self.seen_ids: set[int] = set()
        self.timers: set[int] = set()  # timers waiting
        self.value_truncated = False

    async def go(self) -> ExecResult:
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        bridge = self.bridge
        try:
            worker = bridge._checkout(self.limits)
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
                    value, error = await self._drive(worker)
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
            # Cancelled (Ctrl-C, a client's cancel): stop now, keep what it printed.
            await worker.stop(self._log)
            bridge._checkin(worker)
            await self._cancel_tasks()
            raise
        bridge._checkin(worker)
        reset = bridge.persistent and had_isolate and worker.dead
        await self._cancel_tasks()
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
            tool_calls=list(self.records.values()),
            error=error,
            duration_ms=(time.perf_counter() - started) * 1000,
            engine=self.bridge.engine_name,
            isolate_reset=reset,
        )

    async def _open(self, worker: Worker) -> ExecError | None:
        """A fresh isolate in ``worker``, unless a persistent one is there already."""
        if self.bridge.persistent and worker.has_isolate:
            return None
        try:
            await self._request(worker, p.OPEN, self.bridge.setup_script(self.limits))
        except ScriptError as exc:
            first = (exc.text.splitlines() or ["?"])[0][:200]
            return ExecError(
                kind="internal", name="Error", message=f"the isolate could not be set up: {first}"
            )
        worker.has_isolate = True
        return None

    async def _drive(self, worker: Worker) -> tuple[object, ExecError | None]:
        program = self.program
        try:
            if program.might_be_expression():
                try:
                    state = await self._step(worker, _fresh(program.as_expression()))
                except ScriptError:
                    # Not an expression after all; nothing ran, so run it as statements.
                    state = await self._step(worker, _fresh(program.as_statements()))
            else:
                state = await self._step(worker, _fresh(program.as_statements()))
        except ScriptError as exc:
            return None, errors.from_script_error(exc.text, program, self.tool_names)

        while True:
            done = self._absorb(state)
            if done is not None:
                if done["ok"]:
                    return self._capped_value(done.get("value")), None
                err = done["error"]
                return None, errors.from_thrown(
                    clip(err["name"], 200),
                    clip(err["message"], _ERROR_CHARS),
                    clip(err["stack"], 4 * _ERROR_CHARS),
                    program,
                    self.tool_names,
                )
            if not self.tasks and not self.ready:
                return None, ExecError(
                    kind="runtime",
                    name="Error",
                    message="the program is waiting on a Promise that nothing will settle",
                    hint="await only tool calls, timers, or Promises your code resolves",
                )
            results = await self._wait_for_results()
            try:
                state = await self._request(worker, p.SETTLE, encode_results(results))
            except ScriptError as exc:
                return None, errors.from_script_error(exc.text, program, self.tool_names)

    async def _step(self, worker: Worker, script: str) -> dict[str, Any]:
        return await self._request(worker, p.STEP, f"{script}\n//# sourceURL=program.js")

    async def _request(self, worker: Worker, op: int, text: str) -> dict[str, Any]:
        reply, payload = await worker.request(op, text, self._log)
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
        """Take in one drained state: log, start calls; the outcome if finished."""
        for level, text in state["logs"]:
            self._log(level, text)
        for call_id, name, args in state["calls"]:
            if call_id in self.seen_ids:
                raise Tampered("a tool call id came twice")
            self.seen_ids.add(call_id)
            if name == _TIMER:
                self.timers.add(call_id)
                if len(self.timers) > _MAX_TIMERS:
                    raise LimitReached("tool_calls", "program stopped: too many timers at once")
            else:
                self.calls_made += 1
                if self.calls_made > self.limits.max_tool_calls:
                    raise LimitReached(
                        "tool_calls",
                        f"program stopped: more than {self.limits.max_tool_calls} tool calls",
                    )
            self._start_call(call_id, name, args)
        if state.get("overLimit"):
            raise LimitReached(
                "tool_calls",
                f"program stopped: more than {self.limits.max_tool_calls} tool calls",
            )
        done: dict[str, Any] | None = state["done"]
        return done

    def _log(self, level: str, text: str) -> None:
        shown = self.output.add(level, text)
        if shown is not None and self.on_event is not None:
            self.on_event(LogEvent(level=level, text=shown))

    def _start_call(self, call_id: int, name: str, args_json: str) -> None:
        try:
            args = json.loads(args_json)
            problem = None
        except RecursionError:
            args, problem = None, "its arguments are nested too deeply"
        except ValueError:
            args, problem = None, "its arguments are not JSON"
        if name == _TIMER:
            coro = _sleep(args)
        elif problem is not None:
            record = ToolCallRecord(id=call_id, name=name, args=None, ok=False)
            record.error = f"tools.{name} was not called: {problem}"
            self.records[call_id] = record
            self.ready.append((call_id, (False, record.error)))
            return
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
        task.add_done_callback(partial(self._on_done, call_id))

    async def _invoke(self, record: ToolCallRecord) -> tuple[bool, object]:
        started = time.perf_counter()
        try:
            payload = await self.dispatch(record.name, record.args)
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

    def _on_done(self, call_id: int, task: asyncio.Task[tuple[bool, object]]) -> None:
        self.tasks.pop(call_id, None)
        if task.cancelled():
            return
        self.ready.append((call_id, task.result()))
        if self.wakeup is not None and not self.wakeup.done():
            self.wakeup.set_result(None)

    async def _wait_for_results(self) -> list[list[object]]:
        if not self.ready:
            self.wakeup = asyncio.get_running_loop().create_future()
            try:
                await self.wakeup
            finally:
                self.wakeup = None
        results = [[call_id, ok, payload] for call_id, (ok, payload) in self.ready]
        self.ready.clear()
        for call_id, _, _ in results:
            self.timers.discard(call_id)
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


async def _sleep(args: object) -> tuple[bool, object]:
    try:
        ms = float(args.get("ms", 0)) if isinstance(args, dict) else 0.0
    except (TypeError, ValueError):
        ms = 0.0
    if not ms > 0:  # also NaN
        ms = 0.0
    await asyncio.sleep(min(ms, 1e9) / 1000)
    return True, None
