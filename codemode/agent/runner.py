"""Running a session's tool calls and reporting each one as an item.

Classic calls and the calls a code-mode program makes take the same path,
``ToolRegistry.invoke`` (where policy and approval sit), with the runner's ``_report``
interceptor first in the pipeline: each call becomes an item, a program's under the
program's item. The isolate bridge is given a dispatch callable per program (the
program's item id and source on every call it makes), never the registry.

Programs run in the session's engine worker on its persistent isolate, one after
another: two ``exec`` calls in one model reply run in the order the model wrote them
(the second waits for the first), so they never see each other's half-done state,
and each nested call is filed under the program that made it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from codemode.agent.cells import DEFAULT_YIELD_MS, Cell, yield_time_ms
from codemode.agent.events import (
    CodeExecutionItem,
    CommandExecutionItem,
    CommandOutputDeltaEvent,
    ItemCompleted,
    ItemStarted,
    ItemUpdated,
    McpToolCallItem,
    OutputDeltaEvent,
)
from codemode.agent.items import finish_item, start_item
from codemode.harnesses.base import ToolOutput
from codemode.js_runtime.bridge import Bridge
from codemode.js_runtime.models import ExecError, ExecEvent, ExecResult, Limits
from codemode.tools.context import ToolContext, ToolError
from codemode.tools.pipeline import Call, Next, with_context
from codemode.tools.provenance import ProgramProvenance, current_model_call, current_program
from codemode.tools.registry import ToolRegistry

Emit = Callable[[BaseModel], None]

_CANCELLED = "cancelled: the program ended before this call finished"


class ToolRunner:
    """Executes tool calls and programs for one session, emitting items as they go."""

    def __init__(
        self,
        registry: ToolRegistry,
        context: ToolContext,
        emit: Emit,
        *,
        engine: str = "quickjs",
        limits: Limits | None = None,
        setup_scripts: list[str] | None = None,
        yield_time_ms: int = DEFAULT_YIELD_MS,
    ) -> None:
        self.registry = registry
        self.context = context
        self.emit = emit
        self.yield_time_ms = yield_time_ms
        self._output_cap = (limits or Limits()).output_chars
        self._cells: dict[str, Cell] = {}
        self._cell_ids = itertools.count(1)
        self._order: asyncio.Lock | None = None
        self._ids = itertools.count()
        # Persistent: a model that stores results on globalThis finds them next time.
        # Each program's calls go to a dispatch made for it (see _start_cell).
        self._bridge = Bridge(
            registry.dispatch(context, around=(self._report,)),
            registry,
            engine=engine,
            limits=limits,
            persistent=True,
            setup_scripts=setup_scripts,
        )

    def next_id(self) -> str:
        return f"item_{next(self._ids)}"

    def skip_ids(self, count: int) -> None:
        """Continue numbering after ``count`` items (a resumed session)."""
        self._ids = itertools.count(count)

    async def call_tool(self, name: str, args: Any) -> ToolOutput:
        try:
            value = await self.registry.invoke(name, args, self.context, around=(self._report,))
        except ToolError as exc:
            return ToolOutput(ok=False, error=str(exc))
        return ToolOutput(ok=True, value=value)

    async def _report(self, call: Call, next_: Next) -> Any:
        """The report-stage interceptor: ``call`` as an item, under its program's."""
        name, args, parent_id = call.name, call.args, call.parent_id
        # The item is read off the tool's definition (codemode.agent.items): an emulated
        # harness's Bash is a command_execution as our shell is.
        item, base = start_item(
            call.tool, name, args, self.next_id(), parent_id, self.context.workspace
        )
        self.emit(ItemStarted(item=item))
        try:
            value = await next_(with_context(call, self._context_for(item)))
        except ToolError as exc:
            finish_item(item, None, str(exc), base)
            self.emit(ItemCompleted(item=item))
            raise
        except asyncio.CancelledError:
            # A program's call is cancelled when the program ends first (a sibling of a
            # call that failed in Promise.all, a limit, an interrupt); a call of the
            # model's own only by an interrupt.
            why = "interrupted" if parent_id is None else _CANCELLED
            finish_item(item, None, why, base)
            self.emit(ItemCompleted(item=item))
            raise
        except BaseException:
            finish_item(item, None, "interrupted", base)
            self.emit(ItemCompleted(item=item))
            raise
        finish_item(item, value, None, base)
        self.emit(ItemCompleted(item=item))
        return value

    def _context_for(self, item: BaseModel) -> ToolContext:
        """The context of one call: for a command, one whose output goes out as live
        events while it runs."""
        if isinstance(item, McpToolCallItem):

            def keep(content: list[dict[str, Any]], structured: Any) -> None:
                # Without structuredContent the result is these blocks already: kept once.
                if structured is not None:
                    item.content, item.structured_content = content, structured

            return dataclasses.replace(self.context, mcp_result=keep)
        if not isinstance(item, CommandExecutionItem):
            return self.context
        from codemode.tools.live_output import text_feed

        def sink(text: str) -> None:
            self.emit(CommandOutputDeltaEvent(item_id=item.id, text=text))

        return dataclasses.replace(self.context, live_output=text_feed(sink))

    async def run_program(self, code: str) -> ExecResult:
        """Run a program until it finishes or its yield time passes (then it goes on as
        a cell, and the result says ``running``). Programs start in the order they were
        asked for; one asked for while a yielded cell still runs is refused."""
        if self._order is None:
            self._order = asyncio.Lock()
        async with self._order:
            running = next((c for c in self._cells.values() if not c.task.done()), None)
            if running is not None:
                return _refused(
                    f"cell {running.id} is still running: call wait({{cell_id: "
                    f'"{running.id}"}}) for its result, or with terminate: true to stop it'
                )
            cell, item = self._start_cell(code)
            try:
                await asyncio.wait(
                    [cell.task], timeout=yield_time_ms(code, self.yield_time_ms) / 1000
                )
            except BaseException:
                await cell.stop()  # Ctrl-C, a client's cancel: the program stops too
                self._cells.pop(cell.id, None)
                raise
            if cell.task.done():
                self._cells.pop(cell.id, None)
                cell.take_output()
                return _outcome(cell)
            item.output = "\n".join(cell.unseen)
            self.emit(ItemUpdated(item=item))  # shown as still running
            return cell.snapshot()

    async def wait_cell(
        self, cell_id: str, yield_ms: int | None = None, terminate: bool = False
    ) -> ExecResult:
        """The ``wait`` tool: a cell's new output as soon as there is some, or its result."""
        cell = self._cells.get(str(cell_id))
        if cell is None:
            known = ", ".join(self._cells) or "none"
            return _refused(f"no running cell {cell_id!r} (running: {known})")
        try:
            if terminate:
                await cell.stop()
                self._cells.pop(cell.id, None)
                result = ExecResult(ok=False, output=cell.take_output(), cell_id=cell.id)
                result.error = ExecError(
                    kind="runtime", name="Terminated", message="the program was stopped by wait"
                )
                return result
            yield_s = (self.yield_time_ms if yield_ms is None else max(yield_ms, 0)) / 1000
            if not await cell.wait(yield_s):
                return cell.snapshot()
        except BaseException:
            await cell.stop()
            self._cells.pop(cell.id, None)
            raise
        self._cells.pop(cell.id, None)
        result = _outcome(cell)
        result.output = cell.take_output()  # what the model has not seen yet
        result.cell_id = cell.id
        return result

    def _start_cell(self, code: str) -> tuple[Cell, CodeExecutionItem]:
        item = CodeExecutionItem(id=self.next_id(), code=code)
        self.emit(ItemStarted(item=item))
        holder: list[Cell] = []

        def on_event(event: ExecEvent) -> None:
            if event.type == "log":
                self.emit(OutputDeltaEvent(item_id=item.id, level=event.level, text=event.text))
                if holder:
                    holder[0].add(event.text)

        # The program's calls are filed under its item, and an approval request for one
        # shows the program.
        dispatch = self.registry.dispatch(
            self.context, parent_id=item.id, program=code, around=(self._report,)
        )

        cell_id = str(next(self._cell_ids))
        provenance = ProgramProvenance(
            exec_call_id=current_model_call.get(), cell_id=cell_id, item_id=item.id
        )

        async def body() -> ExecResult:
            # Each call the program makes knows it (hooks: codemode.tools.provenance).
            current_program.set(provenance)
            try:
                result = await self._bridge.execute(code, on_event=on_event, dispatch=dispatch)
            except BaseException:
                item.status, item.error = "failed", "interrupted"
                self.emit(ItemCompleted(item=item))
                raise
            if provenance.notes:  # hooks' context for the model, with the program's result
                shown = [result.output.rstrip("\n")] if result.output else []
                result.output = "\n".join([*shown, *provenance.notes])
                if holder:  # (and for `wait`, when the program yielded first)
                    for note in provenance.notes:
                        holder[0].add(note)
            item.output = result.output
            item.value = result.value
            item.tool_calls = len(result.tool_calls)
            if result.error is not None:
                from codemode.js_runtime.error_render import render_error

                item.error = render_error(result.error, code)  # what the model reads too
            item.status = "completed" if result.ok else "failed"
            self.emit(ItemCompleted(item=item))
            return result

        cell = Cell(id=cell_id, task=asyncio.ensure_future(body()), cap=self._output_cap)
        holder.append(cell)
        self._cells[cell.id] = cell
        return cell, item

    def close(self) -> None:
        for cell in self._cells.values():
            cell.task.cancel()
        self._cells.clear()
        self._bridge.close()
        if self.context.sandbox is not None:
            self.context.sandbox.close()
        self.registry.close()


def _refused(message: str) -> ExecResult:
    return ExecResult(ok=False, error=ExecError(kind="runtime", name="Error", message=message))


def _outcome(cell: Cell) -> ExecResult:
    try:
        return cell.task.result()
    except asyncio.CancelledError:
        return _refused("the program was cancelled")
