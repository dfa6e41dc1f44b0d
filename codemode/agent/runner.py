"""Running a session's tool calls and reporting each one as an item.

Classic calls and the calls a code-mode program makes take the same path,
``ToolRegistry.invoke`` (where policy and approval sit), with the runner's ``_report``
interceptor first in the pipeline: each call becomes an item, a program's under the
program's item.

Programs run in a ``CodeSession`` (the runtime's API) whose delegate (``_Programs``)
sends each nested call down that path with the program's item id and source, and turns
the session's notifications into the program's item and its live output. They run in
the session's engine worker on its persistent isolate, one after another: two ``exec``
calls in one model reply run in the order the model wrote them (the second waits for
the first), so they never see each other's half-done state, and each nested call is
filed under the program that made it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

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
from codemode.js_runtime.cells import DEFAULT_YIELD_MS, yield_time_ms
from codemode.js_runtime.delegate import NestedCall
from codemode.js_runtime.models import ExecEvent, Limits
from codemode.js_runtime.outcome import AlreadyWaiting, CellBusy, Outcome, UnknownCell, Yielded
from codemode.js_runtime.session import CodeSession
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
        self._ids = itertools.count()
        # The item of each program still running, by its cell id.
        self._program_items: dict[str, CodeExecutionItem] = {}
        # Where each running program's calls come from (hooks read it:
        # codemode.tools.provenance), and the model's call that asked for the next one.
        self._provenance: dict[str, ProgramProvenance] = {}
        self._exec_call: str | None = None
        # Persistent: a model that stores results on globalThis finds them next time.
        self._session = CodeSession(
            _Programs(self),
            limits=limits,
            tools=registry,
            engine=engine,
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

    # --- programs: the code session and its delegate ------------------------------

    async def run_program(self, code: str) -> Outcome:
        """Run a program until it finishes or its yield time passes (then it goes on as
        a cell: ``Yielded``). Programs start in the order they were asked for; one asked
        for while a yielded cell still runs is refused (``ToolError``)."""
        yield_s = yield_time_ms(code, self.yield_time_ms) / 1000
        self._exec_call = current_model_call.get()
        try:
            outcome = self._with_notes(await self._session.execute(code, yield_time=yield_s))
        except CellBusy as exc:
            raise ToolError(
                f"cell {exc.cell_id} is still running: call wait({{cell_id: "
                f'"{exc.cell_id}"}}) for its result, or with terminate: true to stop it'
            ) from None
        except BaseException:
            self._end_items("interrupted")  # Ctrl-C, a client's cancel: it stopped too
            raise
        if isinstance(outcome, Yielded):
            item = self._program_items.get(outcome.cell_id)
            if item is not None:
                item.output = outcome.output
                self.emit(ItemUpdated(item=item))  # shown as still running
        return outcome

    async def wait_program(
        self, cell_id: str, yield_ms: int | None = None, terminate: bool = False
    ) -> Outcome:
        """The ``wait`` tool: a cell's new output as soon as there is some, its result,
        or (``terminate``) its end. An unknown cell is a ``ToolError``."""
        session = self._session
        try:
            if terminate:
                outcome = self._with_notes(await session.terminate(cell_id))
                self._end_items("terminated")
                return outcome
            yield_s = (self.yield_time_ms if yield_ms is None else max(yield_ms, 0)) / 1000
            return self._with_notes(await session.wait(cell_id, yield_s))
        except (UnknownCell, AlreadyWaiting) as exc:
            raise ToolError(str(exc)) from None
        except BaseException:
            with contextlib.suppress(UnknownCell):
                await session.terminate(cell_id)
            self._end_items("interrupted")
            raise

    def _program_event(self, cell_id: str, event: ExecEvent) -> None:
        """The code session's notifications, as items and their live output."""
        if event.type == "cell.started":
            started = CodeExecutionItem(id=self.next_id(), code=event.source)
            self._program_items[cell_id] = started
            self._provenance[cell_id] = ProgramProvenance(
                exec_call_id=self._exec_call, cell_id=cell_id, item_id=started.id
            )
            self.emit(ItemStarted(item=started))
            return
        item = self._program_items.get(cell_id)
        if item is None:
            return
        if event.type == "log":
            self.emit(OutputDeltaEvent(item_id=item.id, level=event.level, text=event.text))
        elif event.type == "cell.finished":
            del self._program_items[cell_id]
            result = event.result
            item.output = result.output
            provenance = self._provenance.get(cell_id)
            if provenance is not None and provenance.notes:
                # Hooks' context for the model (PostToolUse), with the program's result.
                item.output = _with_lines(result.output, provenance.notes)
            item.value = result.value
            item.tool_calls = len(result.tool_calls)
            if result.error is not None:
                from codemode.js_runtime.error_render import render_error

                item.error = render_error(result.error, item.code)  # what the model reads too
            item.status = "completed" if result.ok else "failed"
            self.emit(ItemCompleted(item=item))

    def _with_notes(self, outcome: Outcome) -> Outcome:
        """``outcome`` with the context hooks added for the model since it last heard
        from the cell (PostToolUse's additionalContext); a finished cell's record goes."""
        provenance = self._provenance.get(outcome.cell_id)
        if provenance is None:
            return outcome
        if not isinstance(outcome, Yielded):
            del self._provenance[outcome.cell_id]
        if not provenance.notes:
            return outcome
        output = _with_lines(outcome.output, provenance.notes)
        provenance.notes.clear()
        return dataclasses.replace(outcome, output=output)

    def _end_items(self, why: str) -> None:
        """Complete the items of programs that stopped without finishing."""
        running = set(self._session.running())
        for cell_id, item in list(self._program_items.items()):
            if cell_id not in running:
                del self._program_items[cell_id]
                item.status, item.error = "failed", why
                self.emit(ItemCompleted(item=item))

    async def aclose(self) -> None:
        """Stop the running programs (waiting until they have stopped, so nothing they
        started reports after the session ends), then close the rest."""
        try:
            await self._session.close()
            self._end_items("interrupted: the session ended")
        finally:
            self.close()

    def close(self) -> None:
        self._session.close_now()
        self._program_items.clear()
        self.context.sandbox.close()
        self.registry.close()


def _with_lines(output: str, lines: list[str]) -> str:
    """``output`` with ``lines`` after it, one a line (hooks' context for the model)."""
    shown = [output.rstrip("\n")] if output.rstrip("\n") else []
    return "\n".join([*shown, *lines])


class _Programs:
    """The code session's delegate: a program's calls go down the registry's path as
    the model's own do, filed under the program's item."""

    def __init__(self, runner: ToolRunner) -> None:
        self._runner = runner

    async def call_tool(self, call: NestedCall) -> object:
        runner = self._runner
        item = runner._program_items.get(call.cell_id)
        # Each call the program makes knows its program (hooks: codemode.tools.provenance).
        # Set without a token: each nested call runs in a task (a context) of its own,
        # and may finish in another one, where a reset would fail.
        current_program.set(runner._provenance.get(call.cell_id))
        return await runner.registry.invoke(
            call.name,
            call.args,
            runner.context,
            parent_id=item.id if item is not None else None,
            program=item.code if item is not None else None,
            around=(runner._report,),
        )

    def notify(self, cell_id: str, event: ExecEvent) -> None:
        self._runner._program_event(cell_id, event)
