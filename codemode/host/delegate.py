"""The caller runs the tools: a program's calls handed out one by one, each answered.

``ToolHost.delegate(code)`` starts a program whose tool calls are not run by the host:
each one becomes a ``PendingCall`` that the caller takes from an async iterator and
answers with ``respond(value)`` or ``fail(message)``, so a framework can pass it through
its own approvals, tracing and retries (as Codex's ``SubscribeToToolCalls`` and the
programmatic tool calling of Anthropic's and OpenAI's APIs do). Calls the program makes
at once (``Promise.all``) are all pending at once; answer them in any order.

    program = host.delegate("return await tools.price({sku: 'A1'})")
    async for call in program:
        call.respond(await my_tools[call.name](**call.args))
    result = await program.result()
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from codemode.js_runtime.models import ExecError, ExecResult
from codemode.tools.context import ToolError


@dataclass(eq=False)
class PendingCall:
    """One tool call a program is waiting on. ``args`` are the program's arguments as
    JSON, already checked against the tool's declared parameters."""

    id: int
    name: str
    args: Any
    _answer: asyncio.Future[Any] = field(repr=False)

    @property
    def answered(self) -> bool:
        return self._answer.done()

    def respond(self, value: object) -> None:
        """Resolve the program's Promise with ``value`` (converted to JSON by the rule
        in ``codemode.tools.annotations``; a value with no JSON form fails the call)."""
        # lazy: pydantic, which the host's import need not pay for
        from codemode.tools.annotations import NotJson, to_json

        if self._answer.done():
            raise RuntimeError(f"call {self.id} (tools.{self.name}) was answered already")
        try:
            self._answer.set_result(to_json(value))
        except NotJson as exc:
            self._answer.set_exception(ToolError(f"tools.{self.name} {exc}"))

    def fail(self, message: str) -> None:
        """Reject the program's Promise with a ToolError carrying ``message``."""
        if self._answer.done():
            raise RuntimeError(f"call {self.id} (tools.{self.name}) was answered already")
        self._answer.set_exception(ToolError(f"tools.{self.name}: {message}"))


Dispatch = Callable[[str, object], Awaitable[Any]]


class DelegatedProgram:
    """A running program whose tool calls the caller answers (see the module's doc).

    Iterate it for the calls; the iteration ends when the program does. ``result()``
    is its ``ExecResult``. Leaving the iteration early (``break``) or ``terminate()``
    stops the program; calls not answered by then reject inside it.
    """

    def __init__(
        self,
        start: Callable[[Dispatch], Awaitable[ExecResult]],
        check: Callable[[str, object], None],
    ) -> None:
        self._queue: asyncio.Queue[PendingCall | None] = asyncio.Queue()
        self._ids = itertools.count(1)
        self._check = check
        self._pending: set[PendingCall] = set()
        self._task = asyncio.ensure_future(start(self._dispatch))
        self._task.add_done_callback(lambda _: self._queue.put_nowait(None))

    async def _dispatch(self, name: str, args: object) -> Any:
        self._check(name, args)  # a bad call fails in the program, never reaches the caller
        call = PendingCall(next(self._ids), name, args, asyncio.get_running_loop().create_future())
        self._pending.add(call)
        self._queue.put_nowait(call)
        try:
            return await call._answer
        finally:
            self._pending.discard(call)

    def __aiter__(self) -> AsyncIterator[PendingCall]:
        return self._calls()

    async def _calls(self) -> AsyncIterator[PendingCall]:
        try:
            while True:
                call = await self._queue.get()
                if call is None:
                    return
                if not call.answered:  # (a call the program gave up on is skipped)
                    yield call
        finally:
            if not self._task.done():
                await self.terminate()

    @property
    def pending(self) -> list[PendingCall]:
        """Calls handed out and not answered yet."""
        return sorted((c for c in self._pending if not c.answered), key=lambda c: c.id)

    @property
    def done(self) -> bool:
        return self._task.done()

    async def result(self) -> ExecResult:
        """The program's outcome, once it has finished (answer its calls first)."""
        try:
            return await asyncio.shield(self._task)
        except asyncio.CancelledError:
            if self._task.cancelled():
                return terminated()
            raise

    async def terminate(self) -> ExecResult:
        """Stop the program now; its result says it was terminated."""
        if not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        return await self.result()


def terminated(output: str = "") -> ExecResult:
    """The result of a program stopped by ``terminate``."""
    return ExecResult(
        ok=False,
        output=output,
        error=ExecError(kind="runtime", name="Terminated", message="the program was terminated"),
    )
