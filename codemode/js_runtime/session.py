"""The runtime's one API: a code session.

    session = CodeSession(limits=Limits(timeout_s=30), tools=ToolSet(("shell",)))
    outcome = await session.execute(source, delegate=d, yield_time=10.0)
    while isinstance(outcome, Yielded):         # Completed | Yielded | Terminated
        outcome = await session.wait(outcome.cell_id, yield_time=10.0)
    await session.terminate(cell_id)            # -> Terminated (or Completed)
    await session.close()

- Opened with ``limits`` (``Limits``: wall clock, memory, tool calls, output) and,
  optionally, a default ``delegate`` (``delegate.Delegate``). The runtime runs no tool
  itself and imports nothing outside this package.
- ``execute(source, tools, yield_time, max_output, *, delegate, yield_when)`` runs a
  program as a new cell. **The delegate is the execution's**: every nested
  ``tools.NAME(args)`` call of that program (a ``NestedCall``, carrying the cell id)
  goes to ``delegate.call_tool``, and every notification about it (the cell started,
  console output, a host event (``HostEvent``: what the program sent on the prelude's
  ``__cm.hostChannel()`` through a host's setup script), a call started or finished,
  the cell finished) to
  ``delegate.notify(cell_id, event)``; without one, the session's default. So one
  session serves programs of different owners side by side (a batch worker's
  repositories one after another, a host's callers) with no routing of its own.
  ``Completed`` when the program finishes within ``yield_time`` seconds (None: however
  long it takes, up to its time limit), else ``Yielded`` with its output so far and the
  cell id. ``tools`` (``ToolNames``) overrides the session's tools for this program;
  ``max_output`` its output cap in characters. A first-line ``// @exec: {...}`` pragma
  is the caller's to read (``cells.pragma``).
- **The yield rule is the execution's** (``yield_when``): ``"output"`` (the default, the
  agent's ``wait``): a ``wait`` returns as soon as the cell prints something new;
  ``"request"`` (Codex's protocol): control comes back only when ``yield_time`` passes,
  the program ends, or its host calls ``request_yield(cell_id)`` (the program asked, e.g.
  Codex's ``yield_control()``), never because of output alone.
- ``wait(cell_id, yield_time)``: ``Completed`` once the cell finishes, ``Yielded`` by the
  cell's yield rule or when ``yield_time`` passes. Cancelling a wait leaves the cell
  running; cancelling ``execute`` before it returns stops the program.
- ``terminate(cell_id)``: stops the cell (``Terminated``); one that finished first is
  ``Completed``.
- ``close()``: stops every cell (awaited: nothing runs on after it) and the workers.

Persistent sessions (the default) keep one isolate whose globals survive from one
program to the next, and run one program at a time: ``execute`` while a yielded cell
still runs raises ``CellBusy``. Not persistent: each program gets a fresh isolate in a
worker of its own, and cells run side by side. ``wait``/``terminate`` of an unknown
cell raise ``UnknownCell``; a second waiter on one cell ``AlreadyWaiting``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from typing import Any

from codemode.js_runtime.cells import Cell, YieldWhen
from codemode.js_runtime.delegate import Delegate, ToolNames, ToolSet
from codemode.js_runtime.execution import Execution
from codemode.js_runtime.isolates import Isolates, memory_bytes
from codemode.js_runtime.models import CellFinished, CellStarted, ExecEvent, ExecResult, Limits
from codemode.js_runtime.outcome import (
    AlreadyWaiting,
    CellBusy,
    Completed,
    Outcome,
    Terminated,
    UnknownCell,
    Yielded,
)
from codemode.js_runtime.source import prepare

__all__ = ["CodeSession"]


class CodeSession:
    """Programs run against a delegate's tools, in one engine's worker processes."""

    def __init__(
        self,
        delegate: Delegate | None = None,
        *,
        limits: Limits | None = None,
        tools: ToolNames | None = None,
        engine: str = "quickjs",
        persistent: bool = True,
        globals: dict[str, Any] | None = None,
        setup_scripts: list[str] | None = None,
    ) -> None:
        self.delegate = delegate
        self.limits = limits or Limits()
        self.tools: ToolNames = tools if tools is not None else ToolSet()
        self._isolates = Isolates(
            engine,
            persistent=persistent,
            globals=globals,
            setup_scripts=setup_scripts,
            prestart_memory=memory_bytes(self.limits),
        )
        self._cells: dict[str, Cell] = {}
        self._ids = itertools.count(1)
        self._order: asyncio.Lock | None = None
        self._closed = False

    @property
    def engine(self) -> str:
        return self._isolates.engine

    @property
    def persistent(self) -> bool:
        return self._isolates.persistent

    def running(self) -> list[str]:
        """The ids of the cells still running (yielded, nobody waiting or not)."""
        return [cell.id for cell in self._cells.values() if not cell.task.done()]

    async def execute(
        self,
        source: str,
        tools: ToolNames | None = None,
        yield_time: float | None = None,
        max_output: int | None = None,
        *,
        limits: Limits | None = None,
        delegate: Delegate | None = None,
        yield_when: YieldWhen = "output",
    ) -> Outcome:
        """Run ``source`` as a new cell whose calls and notifications go to ``delegate``
        (else the session's), yielding by ``yield_when`` (see the module's docstring)."""
        if self._closed:
            raise RuntimeError("the code session is closed")
        delegate = delegate or self.delegate
        if delegate is None:
            raise ValueError("execute() needs a delegate: this session was opened without one")
        limits = limits or self.limits
        if max_output is not None:
            limits = dataclasses.replace(limits, output_chars=max_output)
        if not self.persistent:
            cell = self._start(source, tools, limits, delegate, yield_when)
            return await self._first(cell, yield_time)
        if self._order is None:
            self._order = asyncio.Lock()
        # In the order asked for: a second program waits until the first finishes or
        # yields, and is refused if it yielded.
        async with self._order:
            busy = self.running()
            if busy:
                raise CellBusy(busy[0])
            cell = self._start(source, tools, limits, delegate, yield_when)
            return await self._first(cell, yield_time)

    async def wait(self, cell_id: str, yield_time: float | None = None) -> Outcome:
        """The cell's new output as soon as there is some, or its result."""
        cell = self._cell(cell_id)
        if cell.waiting:
            raise AlreadyWaiting(cell.id)
        cell.waiting = True
        try:
            done = await cell.wait(yield_time)
        finally:
            cell.waiting = False
        if not done:
            cell.yielded = True
            return Yielded(cell.id, cell.take_output())
        if cell.task.cancelled():  # terminated (or closed) while we waited
            return Terminated(cell.id, cell.take_output())
        return self._completed(cell)

    def request_yield(self, cell_id: str) -> None:
        """The program asked to hand control back (Codex's ``yield_control()``): whoever
        waits on the cell now, or next, gets ``Yielded`` with its output so far. A cell
        that already finished is left alone (its result comes back as usual)."""
        cell = self._cells.get(str(cell_id))
        if cell is not None:
            cell.request_yield()

    async def terminate(self, cell_id: str) -> Outcome:
        """Stop the cell; ``Completed`` instead if it finished first."""
        cell = self._cell(cell_id)
        if cell.task.done() and not cell.task.cancelled():
            return self._completed(cell)
        await cell.stop()
        self._cells.pop(cell.id, None)
        return Terminated(cell.id, cell.take_output())

    async def close(self) -> None:
        """Stop every cell, waiting until each has (its nested calls cancelled and
        cleaned up), then the workers. Safe to call more than once."""
        self._closed = True
        cells, self._cells = list(self._cells.values()), {}
        for cell in cells:
            cell.task.cancel()
        for cell in cells:
            await cell.stop()
        self._isolates.close()

    def close_now(self) -> None:
        """``close`` for a caller without an event loop: cancels the cells without
        waiting for them, and kills the workers."""
        self._closed = True
        cells, self._cells = list(self._cells.values()), {}
        for cell in cells:
            cell.task.cancel()
        self._isolates.close()

    def _cell(self, cell_id: str) -> Cell:
        cell = self._cells.get(str(cell_id))
        if cell is None:
            raise UnknownCell(str(cell_id), self.running())
        return cell

    def _start(
        self,
        source: str,
        tools: ToolNames | None,
        limits: Limits,
        delegate: Delegate,
        yield_when: YieldWhen,
    ) -> Cell:
        cell_id = str(next(self._ids))
        notify = delegate.notify
        notify(cell_id, CellStarted(source=source))
        holder: list[Cell] = []

        def on_event(event: ExecEvent) -> None:
            if event.type == "log" and holder:
                holder[0].add(event.text)
            notify(cell_id, event)

        execution = Execution(
            self._isolates,
            prepare(source),
            limits,
            tools if tools is not None else self.tools,
            cell_id,
            delegate.call_tool,
            on_event,
        )

        async def run() -> ExecResult:
            result = await execution.run()
            notify(cell_id, CellFinished(result=result))
            return result

        cell = Cell(
            id=cell_id,
            task=asyncio.ensure_future(run()),
            cap=limits.output_chars,
            yield_when=yield_when,
        )
        holder.append(cell)
        self._cells[cell_id] = cell
        return cell

    async def _first(self, cell: Cell, yield_time: float | None) -> Outcome:
        try:
            await cell.first(yield_time)
        except BaseException:
            # Cancelled before the caller had the cell: the program stops too.
            await cell.stop()
            self._cells.pop(cell.id, None)
            raise
        if cell.task.cancelled():  # terminated (or closed) while we waited
            return Terminated(cell.id, cell.take_output())
        if cell.task.done():
            return self._completed(cell)
        cell.yielded = True
        return Yielded(cell.id, cell.take_output())

    def _completed(self, cell: Cell) -> Completed:
        self._cells.pop(cell.id, None)
        result = cell.task.result()
        output = cell.take_output()
        return Completed(cell.id, result, output if cell.yielded else result.output)
