"""A code-mode session as Codex's protocol sees it, on our runtime: cells that run, yield,
are waited on and terminated; nested tool calls and notifications go to a ``Delegate``.

This is the one module that knows how the runtime is driven: one runtime
``js_runtime.session.CodeSession`` per Codex session (not persistent: a fresh isolate per
exec, Codex's contract, in confined engine workers the runtime keeps warm), each exec
run to its end there (``yield_time=None``) inside a cell task of ours, since Codex's
yield rules differ from the runtime's (``wait`` returns when the yield time passes or the
program calls ``yield_control()``, not on any new output). What the runtime hands its
delegate is routed to our cell by a context variable the exec's task carries; each exec
brings its own setup (its tools, the store as it stands) as its tools'
``program_setup``. What survives between execs of a session is the ``store``. Both wire
protocols talk to ``CodeSession`` here only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from contextvars import ContextVar
from functools import cache
from typing import Any, NamedTuple

from codemode.codex_host.items import error_text, parse_image
from codemode.codex_host.limits import DEFAULT_MAX_CELLS, admit_cell
from codemode.codex_host.model import (
    DEFAULT_MAX_OUTPUT_TOKENS,
    DEFAULT_YIELD_MS,
    ContentItem,
    Delegate,
    NestedCall,
    Outcome,
    TextItem,
    ToolFailed,
    ToolSpec,
)
from codemode.js_runtime.delegate import NestedCall as RuntimeCall
from codemode.js_runtime.models import ExecEvent, ExecResult, Limits, LogEvent
from codemode.js_runtime.outcome import Completed
from codemode.js_runtime.session import CodeSession as RuntimeSession
from codemode.js_runtime.worker_process import reap_killed
from codemode.process.package_data import read_text
from codemode.tool_terms.errors import ToolError

_MAX_YIELD_MS = 3_600_000


@cache
def _globals_js() -> str:
    return read_text(__file__, "globals.js")


# The cell whose exec is running in this task (and in the runtime's, which copies it).
_CURRENT: ContextVar[Cell | None] = ContextVar("codex_cell", default=None)


# Named tuples and plain classes, not dataclasses: see ``model.py``.
class _ExecTools(NamedTuple):
    """The runtime's ``ToolNames`` for one exec, with that exec's setup (one line)."""

    names: tuple[str, ...]
    setup: str

    def flat_names(self) -> list[str]:
        return list(self.names)

    def namespaces(self) -> dict[str, dict[str, str]]:
        return {}

    def program_setup(self) -> str:
        return self.setup


class CellBusy(Exception):
    """Another Execute or Wait is already observing this cell."""


class SessionLimits(NamedTuple):
    engine: str = "quickjs"
    timeout_s: float = 3600.0  # a cell's whole life, across yields and waits
    memory_mb: int = 256
    max_tool_calls: int = 100_000
    max_yield_ms: int | None = None
    max_cells: int = DEFAULT_MAX_CELLS  # held at once: running, or ended and not yet reported


class Cell:
    """One exec's program: what it printed since last reported, and who observes it."""

    __slots__ = (
        "early",
        "execution_id",
        "id",
        "items",
        "max_output_tokens",
        "observing",
        "sequence",
        "task",
        "terminated",
        "tool_call_id",
        "tools",
        "wait_id",
        "yield_now",
    )  # fmt: skip

    def __init__(
        self,
        id: str,
        execution_id: str,
        tool_call_id: str,
        max_output_tokens: int,
        tools: dict[str, ToolSpec],
    ) -> None:
        self.id = id
        self.execution_id = execution_id
        self.tool_call_id = tool_call_id
        self.max_output_tokens = max_output_tokens
        self.tools = tools
        self.items: list[ContentItem] = []
        self.task: asyncio.Task[ExecResult] | None = None
        self.sequence = 0
        self.observing = False
        self.terminated = False
        self.yield_now = asyncio.Event()
        self.early = asyncio.Event()
        self.wait_id: str | None = None

    def take_items(self) -> list[ContentItem]:
        items, self.items = self.items, []
        # Whole: the client cuts them to max_output_tokens (Codex does, with its own
        # marker; its own host passes them whole too).
        return items


class CodeSession:
    """One client session: its cells, its store, and where its tool calls go."""

    def __init__(self, delegate: Delegate, limits: SessionLimits | None = None) -> None:
        self.delegate = delegate
        self.limits = limits or SessionLimits()
        self.cells: dict[str, Cell] = {}
        self.store: dict[str, str] = {}  # key -> value as JSON text
        self._next_cell = 1
        # What exit() throws: a name no program can guess, so a thrown error never passes
        # for a clean exit. (os.urandom, as ``secrets`` would: importing ``secrets`` loads
        # OpenSSL's hashing, part of the host's start.)
        self._exit_name = f"CodexExit_{os.urandom(8).hex()}"
        self.closed = False
        self._session: RuntimeSession | None = None

    # -- exec ---------------------------------------------------------------------------

    def start(
        self,
        source: str,
        tools: list[ToolSpec],
        *,
        execution_id: str,
        tool_call_id: str = "",
        max_output_tokens: int | None = None,
        cell_id: str | None = None,
    ) -> Cell:
        """Admit a program as a new cell and start it; ``observe`` reports on it.

        Cell ids count from 1 per session unless the client chooses one (framed protocol).
        Over ``max_cells``: ``LimitReached``, before anything starts."""
        self.check_room()
        if cell_id is None or cell_id in self.cells:
            while str(self._next_cell) in self.cells:
                self._next_cell += 1
            cell_id = str(self._next_cell)
            self._next_cell += 1
        by_name = {t.global_name: t for t in tools}
        cell = Cell(
            id=cell_id,
            execution_id=execution_id,
            tool_call_id=tool_call_id,
            max_output_tokens=DEFAULT_MAX_OUTPUT_TOKENS
            if max_output_tokens is None
            else max_output_tokens,
            tools=by_name,
        )
        config = {
            "store": {k: json.loads(v) for k, v in self.store.items()},
            "tools": [{"name": t.global_name, "description": t.description} for t in tools],
            "exitName": self._exit_name,
        }
        names = tuple(by_name)
        setup = (
            # A failed call rejects with its message as a string, as in Codex's host.
            f"__cm.configure({json.dumps(names)}, {self.limits.max_tool_calls}, {{}}, "
            "{plainRejections: true}); "
            f"globalThis.__codex = JSON.parse({json.dumps(json.dumps(config))});"
        )
        cell.task = asyncio.ensure_future(self._run(cell, source, _ExecTools(names, setup)))
        self.cells[cell_id] = cell
        return cell

    def check_room(self) -> None:
        """``LimitReached`` when the session already holds ``max_cells`` cells."""
        admit_cell(len(self.cells), self.limits.max_cells)

    def _runtime(self) -> RuntimeSession:
        if self._session is None:
            limits = Limits(
                timeout_s=self.limits.timeout_s,
                memory_mb=self.limits.memory_mb,
                max_tool_calls=self.limits.max_tool_calls,
                output_chars=64 * 1024 * 1024,
            )
            self._session = RuntimeSession(
                _RuntimeDelegate(self),
                limits=limits,
                engine=self.limits.engine,
                persistent=False,
                setup_scripts=[_globals_js()],
            )
        return self._session

    async def _run(self, cell: Cell, source: str, tools: _ExecTools) -> ExecResult:
        _CURRENT.set(cell)  # this task's context, which the runtime's task copies
        outcome = await self._runtime().execute(source, tools, yield_time=None)
        assert isinstance(outcome, Completed)  # no yield time: it ran to its end
        return outcome.result

    def yield_ms(self, requested: int | None) -> int:
        ms = DEFAULT_YIELD_MS if requested is None else requested
        if self.limits.max_yield_ms is not None:
            ms = min(ms, self.limits.max_yield_ms)
        return max(0, min(ms, _MAX_YIELD_MS))

    async def observe(self, cell: Cell, yield_ms: int, started_ns: int | None = None) -> Outcome:
        """Until the cell finishes, asks to yield, is told to, or ``yield_ms`` passes."""
        started_ns = time.monotonic_ns() if started_ns is None else started_ns
        if cell.observing:
            raise CellBusy(f"cell {cell.id} is already being observed")
        cell.observing = True
        cell.early.clear()
        assert cell.task is not None
        try:
            if not cell.task.done() and not cell.yield_now.is_set():
                signals = [
                    asyncio.ensure_future(cell.yield_now.wait()),
                    asyncio.ensure_future(cell.early.wait()),
                ]
                try:
                    await asyncio.wait(
                        [cell.task, *signals],
                        timeout=yield_ms / 1000,
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                finally:
                    for s in signals:
                        s.cancel()
            return await self._report(cell, started_ns)
        finally:
            cell.observing = False
            cell.wait_id = None

    async def _report(self, cell: Cell, started_ns: int) -> Outcome:
        assert cell.task is not None
        if not cell.task.done():
            cell.yield_now.clear()
            return Outcome("yielded", cell.id, cell.take_items(), None, _since(started_ns))
        self._retire(cell)
        if cell.terminated or cell.task.cancelled():
            return Outcome("terminated", cell.id, cell.take_items(), None, _since(started_ns))
        result = cell.task.result()
        error = None
        if result.error is not None and result.error.name != self._exit_name:
            error = error_text(result.error)
        return Outcome("completed", cell.id, cell.take_items(), error, _since(started_ns))

    async def wait(self, cell_id: str, yield_ms: int, wait_id: str | None = None) -> Outcome | None:
        """None when no such cell is running (never started, or already reported done)."""
        started = time.monotonic_ns()
        cell = self.cells.get(cell_id)
        if cell is None:
            return None
        if cell.observing:
            raise CellBusy(f"cell {cell_id} is already being waited on")
        cell.wait_id = wait_id
        return await self.observe(cell, self.yield_ms(yield_ms), started)

    def end_observation(
        self, *, execution_id: str | None = None, wait_id: str | None = None
    ) -> bool:
        """YieldObservation: the Execute or Wait in progress returns now (the cell runs on)."""
        for cell in self.cells.values():
            if cell.observing and (
                (execution_id is not None and cell.execution_id == execution_id)
                or (wait_id is not None and cell.wait_id == wait_id)
            ):
                cell.early.set()
                return True
        return False

    async def terminate(self, cell_id: str) -> Outcome | None:
        started = time.monotonic_ns()
        cell = self.cells.get(cell_id)
        if cell is None or cell.task is None:
            return None
        cell.terminated = True
        if not cell.task.done():
            cell.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await cell.task
        if cell.observing:
            # The Execute or Wait observing it reports the termination; this answers too.
            return Outcome("terminated", cell.id, [], None, _since(started))
        return await self._report(cell, started)

    async def close(self) -> None:
        self.closed = True
        cells = list(self.cells.values())
        for cell in cells:
            cell.terminated = True
            if cell.task is not None and not cell.task.done():
                cell.task.cancel()
        for cell in cells:
            if cell.task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await cell.task
            self._retire(cell)
        if self._session is not None:
            await self._session.close()
            self._session = None
            # Its workers were killed: reaped now, so a client that went leaves not even
            # a zombie behind (else the next worker's start reaps them).
            await reap_killed()

    # -- plumbing -------------------------------------------------------------------------

    def _retire(self, cell: Cell) -> None:
        if self.cells.pop(cell.id, None) is None:
            return
        self.delegate.cell_closed(cell.id, cell.execution_id, cell.sequence)

    async def call_tool(self, cell: Cell, name: str, args: object) -> Any:
        tool = cell.tools[name]
        cell.sequence += 1
        call = NestedCall(
            cell_id=cell.id,
            execution_id=cell.execution_id,
            runtime_call_id=f"tool-{cell.sequence}",
            sequence=cell.sequence,
            tool=tool,
            input=args,
        )
        try:
            return await self.delegate.call_tool(call)
        except ToolFailed as exc:
            raise ToolError(str(exc)) from None

    def heard(self, cell: Cell, event: ExecEvent) -> None:
        """What the program wrote on the channels globals.js opens (its console levels)."""
        if not isinstance(event, LogEvent):
            return
        level, text = event.level, event.text
        if level == "log":
            cell.items.append(TextItem(text))
        elif level == "info":
            item = parse_image(text)
            if item is not None:
                cell.items.append(item)
        elif level == "warn":
            self.delegate.notify(cell.id, cell.execution_id, cell.tool_call_id, text)
        elif level == "error":
            with contextlib.suppress(ValueError, TypeError):
                key, value = json.loads(text)
                self.store[str(key)] = str(value)
        elif level == "debug" and text == "yield":
            cell.yield_now.set()


class _RuntimeDelegate:
    """The runtime's delegate for a session: each call and event goes to its cell."""

    def __init__(self, session: CodeSession) -> None:
        self.session = session

    async def call_tool(self, call: RuntimeCall) -> object:
        cell = _CURRENT.get()
        if cell is None or call.name not in cell.tools:
            raise ToolError(f"tools.{call.name} is not enabled for this exec")
        return await self.session.call_tool(cell, call.name, call.args)

    def notify(self, cell_id: str, event: ExecEvent) -> None:
        cell = _CURRENT.get()
        if cell is not None:
            self.session.heard(cell, event)


def _since(started_ns: int) -> int:
    return max(0, time.monotonic_ns() - started_ns)
