"""The nested calls and timers of one running program, served while it waits.

Each ``tools.NAME(args)`` the program made (drained from the isolate) becomes a
``NestedCall`` for the delegate, started at once — eagerly, so a handler that does not
wait on I/O costs no trip through the event loop — and each ``setTimeout`` a sleep.
Their results are collected until the program is given them in one frame. Calls and
timers are counted here, outside the isolate: nothing the program does changes the
count.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar, cast

from codemode.js_runtime.delegate import NestedCall, ToolError
from codemode.js_runtime.eager import resume
from codemode.js_runtime.models import (
    ExecEvent,
    LimitName,
    ToolCallFinished,
    ToolCallRecord,
    ToolCallStarted,
)
from codemode.js_runtime.state import Tampered

CallTool = Callable[[NestedCall], Awaitable[object]]
EventSink = Callable[[ExecEvent], None]
Done = tuple[bool, object]  # a finished call or timer: (ok, payload)
T = TypeVar("T")
# How long cancelled tool calls get to clean up (a shell call kills and reaps its
# process group in well under this) before a program's result is returned anyway.
_CLEANUP_S = 2.0
# Timers a program may have waiting at once (they are not tool calls, but each costs
# the host a task).
_MAX_TIMERS = 10_000
# The arguments a program's finished calls keep in its records (``ExecResult.tool_calls``),
# in characters of their JSON: past this, a call lets go of its arguments once it has
# finished (its record's ``args`` becomes None), else a program passing one megabyte
# string to each of its calls made its host hold a megabyte per call until it ended.
_KEPT_ARGS_CHARS = 16 * 1024 * 1024
_CANCELLED = "cancelled: the program ended before this call finished"


class LimitReached(Exception):
    def __init__(self, limit: LimitName, message: str) -> None:
        super().__init__(message)
        self.limit = limit


class NestedCalls:
    """The calls and timers one program is waiting on."""

    def __init__(
        self, cell_id: str, call_tool: CallTool, on_event: EventSink | None, max_calls: int
    ) -> None:
        self.cell_id = cell_id
        self.call_tool = call_tool
        self.on_event = on_event
        self.max_calls = max_calls
        self.records: dict[int, ToolCallRecord] = {}
        self.tasks: dict[int, asyncio.Task[Done | None]] = {}
        # Finished calls whose results the isolate has not seen yet: (id, (ok, payload)).
        self.ready: list[tuple[int, Done]] = []
        # While the program waits (``settled``): what its results are sent with, and
        # the future that hands back what that returned.
        self._waiter: asyncio.Future[object] | None = None
        self._send: Callable[[list[list[object]]], object] = _unset
        self.calls_made = 0
        self.args_chars = 0  # of the calls' arguments, for ``_KEPT_ARGS_CHARS``
        self.seen_ids: set[int] = set()
        self.timers: set[int] = set()  # timers waiting

    def pending(self) -> bool:
        """Whether anything will still settle one of the program's Promises."""
        return bool(self.tasks or self.ready)

    def too_many(self) -> LimitReached:
        return LimitReached(
            "tool_calls", f"program stopped: more than {self.max_calls} tool calls"
        )

    def start(self, timers: list[list[Any]], calls: list[list[Any]]) -> None:
        """Start the timers and calls of one drained state."""
        for timer_id, ms in timers:
            self._new_id(timer_id)
            self.timers.add(timer_id)
            if len(self.timers) > _MAX_TIMERS:
                raise LimitReached("tool_calls", "program stopped: too many timers at once")
            self._start(timer_id, _sleep(ms))
        seen = self.seen_ids
        for call_id, name, args in calls:
            if call_id in seen:
                raise Tampered("a tool call id came twice")
            seen.add(call_id)
            self.calls_made += 1
            if self.calls_made > self.max_calls:
                raise self.too_many()
            self._start_call(call_id, name, args)

    def _new_id(self, call_id: int) -> None:
        if call_id in self.seen_ids:
            raise Tampered("a tool call id came twice")
        self.seen_ids.add(call_id)

    def _start_call(self, call_id: int, name: str, args_json: str) -> None:
        try:
            # The most common arguments of all (``tools.x()``), not worth a parse.
            args = {} if args_json == "{}" else json.loads(args_json)
            problem = None
        except RecursionError:
            args, problem = None, "its arguments are nested too deeply"
        except ValueError:
            args, problem = None, "its arguments are not JSON"
        if problem is not None:
            record = ToolCallRecord(id=call_id, name=name, args=None, ok=False)
            record.error = f"tools.{name} was not called: {problem}"
            self.records[call_id] = record
            self.ready.append((call_id, (False, record.error)))
            return
        record = ToolCallRecord(call_id, name, args)
        self.records[call_id] = record
        self.args_chars += len(args_json)
        keep = self.args_chars <= _KEPT_ARGS_CHARS
        if self.on_event is not None:
            self.on_event(ToolCallStarted(record))
        self._start(call_id, self._invoke(record, keep))

    def _start(self, call_id: int, coro: Any) -> None:
        # Start the handler eagerly (what Python 3.12 calls an eager task): most tools
        # finish without waiting on I/O, and those then cost no trip through the loop.
        try:
            waiting_on = coro.send(None)
        except StopIteration as finished:
            if finished.value is not None:  # a timer's; a call's delivers its own
                self._deliver(call_id, finished.value)
            return
        self._carry_on(call_id, coro, waiting_on)

    def _carry_on(self, call_id: int, coro: Any, waiting_on: object) -> None:
        """A handler started by hand that waits on I/O goes on in a Task."""
        task = asyncio.ensure_future(resume(coro, waiting_on))
        self.tasks[call_id] = task
        task.add_done_callback(partial(self._on_done, call_id))

    async def _invoke(self, record: ToolCallRecord, keep: bool = True) -> None:
        started = time.perf_counter()
        try:
            payload = await self.call_tool(NestedCall(self.cell_id, record.name, record.args))
            ok = True
        except ToolError as exc:
            ok, payload = False, str(exc)
        except Exception as exc:  # a tool must never take the session down
            ok, payload = False, f"tools.{record.name} failed: {type(exc).__name__}: {exc}"
        record.ok = ok
        record.duration_ms = round((time.perf_counter() - started) * 1000, 3)
        record.error = None if ok else str(payload)
        if self.on_event is not None:
            self.on_event(ToolCallFinished(record))
        if not keep:
            record.args = None
        self._deliver(record.id, (ok, payload))

    def _on_done(self, call_id: int, task: asyncio.Task[Done | None]) -> None:
        self.tasks.pop(call_id, None)
        if task.cancelled():
            return
        done = task.result()
        if done is not None:
            self._deliver(call_id, done)

    def _deliver(self, call_id: int, done: Done) -> None:
        self.ready.append((call_id, done))
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            try:
                waiter.set_result(self._send(self.take()))
            except Exception as exc:  # the engine's pipe broke: the program's to hear
                waiter.set_exception(exc)

    async def settled(self, send: Callable[[list[list[object]]], T]) -> T:
        """What ``send`` returns, given the results finished so far once there is one.

        When the program is waiting, ``send`` runs as the result arrives, in the step
        of the call that finished, not a turn of the loop later in the program's own
        task: the engine worker then runs the program on while this process goes on
        with whatever else that result's arrival set going (the Codex host answers the
        client that sent it, ``codex_host/wire/h2_connection.py``)."""
        if self.ready:
            return send(self.take())
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        self._send = send
        try:
            return cast(T, await waiter)
        finally:
            self._waiter = None
            self._send = _unset

    def take(self) -> list[list[object]]:
        """The results finished so far (``ready``), now."""
        results = [[call_id, ok, payload] for call_id, (ok, payload) in self.ready]
        self.ready.clear()
        if self.timers:
            for call_id, _, _ in results:
                self.timers.discard(call_id)
        return results

    async def cancel(self) -> None:
        """Cancel the calls still running and give them a moment to clean up, so that
        nothing a program started (a command's processes) outlives the program."""
        cancelled = []
        for call_id, task in self.tasks.items():
            if not task.done():
                task.cancel()
                cancelled.append(task)
                record = self.records.get(call_id)
                if record is not None and record.ok is None:
                    record.error = _CANCELLED
        self.tasks.clear()
        if cancelled:
            await asyncio.wait(cancelled, timeout=_CLEANUP_S)


def _unset(results: list[list[object]]) -> object:
    raise AssertionError("results sent while the program was not waiting")


async def _sleep(ms: float) -> Done:
    if not ms > 0:  # also NaN
        ms = 0.0
    await asyncio.sleep(min(ms, 1e9) / 1000)
    return True, None
