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
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from codemode.agent.cells import DEFAULT_YIELD_MS, Cell, yield_time_ms
from codemode.agent.events import (
    CodeExecutionItem,
    CommandExecutionItem,
    CommandOutputDeltaEvent,
    FileChangeItem,
    FileUpdate,
    ItemCompleted,
    ItemStarted,
    ItemUpdated,
    McpToolCallItem,
    OutputDeltaEvent,
    TodoEntry,
    TodoListItem,
    ToolCallItem,
)
from codemode.harnesses.base import ToolOutput
from codemode.js_runtime.bridge import Bridge
from codemode.js_runtime.models import ExecError, ExecEvent, ExecResult, Limits
from codemode.tools.context import ToolContext, ToolError
from codemode.tools.pipeline import Call, Next, with_context
from codemode.tools.registry import ToolRegistry, split_namespace

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
        # An emulated harness's tool (Bash, run_shell_command...) is shown as the tool
        # of ours it stands for, so a command is a command_execution whatever its name.
        kind = getattr(call.tool, "target", "") or name
        item = _start_item(kind, name, args, self.next_id(), parent_id)
        base = self.context.workspace
        if isinstance(item, FileChangeItem):
            item.changes, base = _planned_changes(args, base)
        self.emit(ItemStarted(item=item))
        try:
            value = await next_(with_context(call, self._context_for(item)))
        except ToolError as exc:
            _finish_item(item, None, str(exc), base)
            self.emit(ItemCompleted(item=item))
            raise
        except asyncio.CancelledError:
            # A program's call is cancelled when the program ends first (a sibling of a
            # call that failed in Promise.all, a limit, an interrupt); a call of the
            # model's own only by an interrupt.
            why = "interrupted" if parent_id is None else _CANCELLED
            _finish_item(item, None, why, base)
            self.emit(ItemCompleted(item=item))
            raise
        except BaseException:
            _finish_item(item, None, "interrupted", base)
            self.emit(ItemCompleted(item=item))
            raise
        _finish_item(item, value, None, base)
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

        async def body() -> ExecResult:
            try:
                result = await self._bridge.execute(code, on_event=on_event, dispatch=dispatch)
            except BaseException:
                item.status, item.error = "failed", "interrupted"
                self.emit(ItemCompleted(item=item))
                raise
            item.output = result.output
            item.value = result.value
            item.tool_calls = len(result.tool_calls)
            if result.error is not None:
                from codemode.js_runtime.error_render import render_error

                item.error = render_error(result.error, code)  # what the model reads too
            item.status = "completed" if result.ok else "failed"
            self.emit(ItemCompleted(item=item))
            return result

        cell = Cell(
            id=str(next(self._cell_ids)), task=asyncio.ensure_future(body()), cap=self._output_cap
        )
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


def _start_item(kind: str, name: str, args: Any, item_id: str, parent_id: str | None) -> BaseModel:
    if kind == "shell" and isinstance(args, dict):
        return CommandExecutionItem(
            id=item_id, parent_id=parent_id, command=str(args.get("command", ""))
        )
    if kind == "apply_patch":
        return FileChangeItem(id=item_id, parent_id=parent_id)
    if kind == "update_plan" and isinstance(args, dict):
        return TodoListItem(id=item_id, parent_id=parent_id, items=_todo_entries(args))
    mcp = split_namespace(name)
    if mcp is not None:
        return McpToolCallItem(
            id=item_id, parent_id=parent_id, server=mcp[0], tool=mcp[1], arguments=args
        )
    return ToolCallItem(id=item_id, parent_id=parent_id, name=name, arguments=args)


def _patch_text(args: Any) -> str | None:
    if isinstance(args, str):
        return args
    if isinstance(args, dict):
        text = args.get("input", args.get("patch"))
        return text if isinstance(text, str) else None
    return None


def _absolute(base: Path, path: str) -> str:
    return os.path.normpath(Path(base, path))


def _planned_changes(args: Any, workspace: Path) -> tuple[list[FileUpdate], Path]:
    """The files a patch names, with absolute paths, before it is applied (Codex reports
    them as the call starts); also the directory its relative paths start from. A patch
    that does not parse names none: its call fails and says why."""
    text = _patch_text(args)
    if text is None:
        return [], workspace
    from codemode.tools.patch import AddFile, DeleteFile, PatchError
    from codemode.tools.patch.parser import parse_patch

    try:
        patch, workdir = parse_patch(text)
    except PatchError:
        return [], workspace
    base = Path(workspace, os.path.expanduser(workdir)) if workdir else workspace
    changes = []
    for op in patch.operations:
        path = _absolute(base, os.path.expanduser(op.path))
        if isinstance(op, AddFile):
            changes.append(FileUpdate(path=path, kind="add"))
        elif isinstance(op, DeleteFile):
            changes.append(FileUpdate(path=path, kind="delete"))
        elif op.move_to:
            moved = _absolute(base, os.path.expanduser(op.move_to))
            changes.append(FileUpdate(path=path, kind="move", move_to=moved))
        else:
            changes.append(FileUpdate(path=path, kind="update"))
    return changes, base


_STEP_STATUS: dict[str, Literal["pending", "in_progress", "completed"]] = {
    "completed": "completed", "done": "completed", "in_progress": "in_progress",
    "inprogress": "in_progress", "active": "in_progress",
}


def _todo_entries(args: dict[str, Any]) -> list[TodoEntry]:
    # Our plan is {plan: [{step, status}]}; emulated todo tools send {todos: [{content,
    # status}]} and similar.
    entries = []
    for step in args.get("plan") or args.get("todos") or []:
        if isinstance(step, dict):
            raw = str(step.get("status") or "").lower().replace("-", "_").replace(" ", "_")
            status = _STEP_STATUS.get(raw, "pending")
            text = step.get("step") or step.get("content") or step.get("title") or ""
            entries.append(TodoEntry(text=str(text), completed=status == "completed",
                                     status=status))
    return entries


def _finish_item(item: Any, value: Any, error: str | None, base: Path) -> None:
    failed = error is not None
    if isinstance(item, CommandExecutionItem):
        if isinstance(value, dict):
            item.aggregated_output = str(value.get("output", ""))
            item.exit_code = value.get("exit_code")
            failed = item.exit_code != 0
        else:
            item.aggregated_output = error or ""
        item.status = "failed" if failed else "completed"
    elif isinstance(item, FileChangeItem):
        if isinstance(value, dict):
            item.changes = [
                FileUpdate(
                    path=_absolute(base, str(c.get("path", ""))),
                    kind=c.get("kind", "update"),
                    move_to=_absolute(base, str(c["move_to"])) if c.get("move_to") else None,
                )
                for c in value.get("changes", [])
                if c.get("kind") in ("add", "update", "delete", "move")
            ]
            item.diff = str(value.get("diff", ""))
        item.status = "failed" if failed else "completed"
    elif isinstance(item, TodoListItem):
        pass  # the plan was shown when the call started
    elif isinstance(item, ToolCallItem | McpToolCallItem):
        item.result = value
        item.error = error
        item.status = "failed" if failed else "completed"
