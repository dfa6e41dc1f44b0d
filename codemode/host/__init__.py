"""The embedding API: a tool host that runs JavaScript against Python tools.

host = ToolHost("path/to/repo")

@host.tool
def word_count(text: str) -> int:
    "Count the words in a text."
    return len(text.split())

result = await host.execute("return await tools.word_count({text: 'a b c'})")

docs/embedding.md is the embedder's page: defaults, limits, cells, delegated calls and
the model-facing tool.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from codemode.agent.cells import Cell
from codemode.assembly.program import program_parts
from codemode.host.delegate import DelegatedProgram, PendingCall, terminated
from codemode.host.model_tool import ModelTool
from codemode.js_runtime.bridge import Bridge, EventSink
from codemode.js_runtime.models import ExecEvent, ExecResult, Limits
from codemode.tools.context import ToolError
from codemode.tools.registry import ToolFn, ToolRegistry

if TYPE_CHECKING:
    from codemode.sandbox.approval import Approver
    from codemode.sandbox.session import SandboxSession
    from codemode.sandbox.settings import SandboxSettings
    from codemode.tools.dry_run import DryRun
    from codemode.tools.pipeline import Interceptor

__all__ = ["DelegatedProgram", "ModelTool", "PendingCall", "ToolHost"]

_MODES = ("read-only", "workspace-write", "danger-full-access")
# Output a yielded cell keeps for the next ``wait`` (the oldest goes first beyond it).
_CELL_OUTPUT_CHARS = 50_000


def _sandbox_arg(
    sandbox: SandboxSettings | SandboxSession | Mapping[str, Any] | str | None,
) -> SandboxSettings | SandboxSession | Mapping[str, Any]:
    """``None``: the sandbox ``interpreter run`` has (workspace-write, the execpolicy,
    no one to approve a ``prompt`` command: refused); a mode's name: that mode."""
    if sandbox is None:
        return {}
    if isinstance(sandbox, str):
        if sandbox not in _MODES:
            raise ValueError(f"sandbox={sandbox!r}: choose one of {', '.join(_MODES)}")
        return {"sandbox_mode": sandbox}
    return sandbox


def _lines(text: str) -> str:
    """A cell's unseen lines as ``ExecResult.output`` has them: each ends with a newline."""
    return text + "\n" if text else ""


class ToolHost:
    """Runs code-mode programs in a workspace with the built-in tools plus your own.

    ``engine`` is "quickjs" (default) or "v8"; ``persistent=True`` keeps globals
    between ``execute`` calls. A host belongs to the event loop that first uses it.

    Sandboxed by default: every command the tools start is checked by the execpolicy
    and confined to ``workspace-write`` (writes only in the workspace, no network), as
    in ``interpreter run``; a command the rules mark ``prompt`` is refused unless an
    ``approver`` says yes. ``sandbox`` picks another: a mode's name ("read-only", or
    "danger-full-access": commands run unconfined, with the user's own rights and
    network, only the execpolicy's ``forbidden`` rules still apply), ``SandboxSettings``
    (or a dict of its fields), or a ``SandboxSession`` to share. The file tools write
    only inside the workspace whatever the mode.

    ``dry_run=True`` writes no file: the writing tools record their changes in
    ``host.dry_run`` (``changed_paths``, ``diff``) and the reading tools see them.

    ``interceptors`` (each ``async (call, next) -> result``, ``codemode.tools.pipeline``)
    see every tool call the policy lets through, in order, and may refuse, change or
    answer it; they are added to a copy of ``registry``.
    """

    def __init__(
        self,
        workspace: str | Path = ".",
        *,
        engine: str = "quickjs",
        limits: Limits | None = None,
        persistent: bool = False,
        registry: ToolRegistry | None = None,
        globals: dict[str, Any] | None = None,
        sandbox: SandboxSettings | SandboxSession | Mapping[str, Any] | str | None = None,
        approver: Approver | None = None,
        dry_run: bool = False,
        interceptors: Iterable[Interceptor] = (),
    ) -> None:
        parts = program_parts(
            workspace,
            registry,
            sandbox=_sandbox_arg(sandbox),
            approver=approver,
            dry_run=dry_run,
            interceptors=interceptors,
        )
        self.registry = parts.registry
        self.context = parts.context
        self.dry_run: DryRun | None = parts.dry_run
        self._bridge = Bridge(
            self.registry.dispatch(self.context),
            self.registry,
            engine=engine,
            limits=limits,
            persistent=persistent,
            globals=globals,
        )
        self._cells: dict[str, Cell] = {}
        self._cell_ids = itertools.count(1)

    @property
    def workspace(self) -> Path:
        return self.context.workspace

    @property
    def limits(self) -> Limits:
        return self._bridge.limits

    @overload
    def tool(
        self, fn: ToolFn, *, name: str | None = None, description: str | None = None
    ) -> ToolFn: ...

    @overload
    def tool(
        self, fn: None = None, *, name: str | None = None, description: str | None = None
    ) -> Callable[[ToolFn], ToolFn]: ...

    def tool(
        self,
        fn: ToolFn | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> ToolFn | Callable[[ToolFn], ToolFn]:
        """Decorator: expose a function (plain or async) to programs as ``tools.<name>``.

        Its annotations declare it (the return annotation its result); one that cannot
        be declared raises TypeError here. A plain function runs in a worker thread."""
        if fn is None:
            return self.registry.tool(name=name, description=description)
        return self.registry.tool(fn, name=name, description=description)

    async def execute(
        self,
        code: str,
        *,
        on_event: EventSink | None = None,
        limits: Limits | None = None,
        yield_time_ms: int | None = None,
    ) -> ExecResult:
        """Run one program; never raises for a failing program (see ``ExecResult.error``).

        With ``yield_time_ms``, a program still running then hands back its output so
        far as a cell (``result.running``, ``result.cell_id``) and goes on: ``wait`` for
        more, ``terminate`` to stop it. Its time limit holds across yields."""
        if yield_time_ms is None:
            return await self._run(code, on_event, limits)
        cell = self._start_cell(code, on_event, limits)
        if await cell.wait(max(yield_time_ms, 0) / 1000):
            self._cells.pop(cell.id, None)  # finished in time: an ordinary result
            return self._finished(cell)
        return self._report(cell)

    async def wait(self, cell_id: str, *, yield_time_ms: int = 10_000) -> ExecResult:
        """A yielded cell's new output as soon as there is some, or its result when it
        finishes; after ``yield_time_ms`` with nothing new, ``running`` and no output."""
        cell = self._cell(cell_id)
        await cell.wait(max(yield_time_ms, 0) / 1000)
        return self._report(cell)

    async def terminate(self, cell_id: str) -> ExecResult:
        """Stop a yielded cell now; the result carries the output it had not handed back."""
        cell = self._cell(cell_id)
        if cell.task.done():
            return self._report(cell)
        await cell.stop()
        self._cells.pop(cell.id, None)
        result = terminated(_lines(cell.take_output()))
        result.cell_id = cell.id
        return result

    def delegate(
        self, code: str, *, on_event: EventSink | None = None, limits: Limits | None = None
    ) -> DelegatedProgram:
        """Start a program whose tool calls the caller runs: iterate the returned
        program for each ``PendingCall`` and answer it (``codemode.host.delegate``)."""

        def check(name: str, args: object) -> None:
            tool = self.registry.get(name)
            if tool is None:
                hint = self.registry.closest(name)
                suffix = f" — did you mean tools.{hint}?" if hint else ""
                raise ToolError(f"tools.{name} is not a tool{suffix}")
            tool.validate(args)

        async def start(dispatch: Any) -> ExecResult:
            return await self._bridge.execute(
                code, on_event=on_event, limits=limits, dispatch=dispatch
            )

        return DelegatedProgram(start, check)

    def model_tool(self, name: str = "execute") -> ModelTool:
        """This host as one tool for a model (``codemode.host.model_tool``): its handler
        runs the program to completion and returns the outcome as text."""
        from codemode.harnesses.render import render_exec_result
        from codemode.mcp.description import execute_description

        async def handler(code: str) -> str:
            return render_exec_result(await self.execute(code), code)

        description = execute_description(
            self.registry, self.workspace, declarations=self.typescript().strip()
        )
        return ModelTool(name=name, description=description, handler=handler)

    def typescript(self) -> str:
        """TypeScript declarations of the tools, as given to a model in code mode."""
        from codemode.tools.typescript import typescript_declarations

        return typescript_declarations(self.registry, argv="argv" in self._bridge.globals)

    def close(self) -> None:
        for cell in self._cells.values():
            cell.task.cancel()
        self._cells.clear()
        self._bridge.close()
        if self.context.sandbox is not None:
            self.context.sandbox.close()

    def __enter__(self) -> ToolHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _run(
        self, code: str, on_event: EventSink | None, limits: Limits | None
    ) -> ExecResult:
        # Its calls carry the program: approval requests show the program making them.
        dispatch = self.registry.dispatch(self.context, program=code)
        return await self._bridge.execute(
            code, on_event=on_event, limits=limits, dispatch=dispatch
        )

    def _start_cell(
        self, code: str, on_event: EventSink | None, limits: Limits | None
    ) -> Cell:
        holder: list[Cell] = []

        def events(event: ExecEvent) -> None:
            if event.type == "log" and holder:
                holder[0].add(event.text)
            if on_event is not None:
                on_event(event)

        task = asyncio.ensure_future(self._run(code, events, limits))
        cell = Cell(id=str(next(self._cell_ids)), task=task, cap=_CELL_OUTPUT_CHARS)
        holder.append(cell)
        self._cells[cell.id] = cell
        return cell

    def _cell(self, cell_id: str) -> Cell:
        cell = self._cells.get(str(cell_id))
        if cell is None:
            known = ", ".join(self._cells) or "none"
            raise KeyError(f"no cell {cell_id!r} (cells: {known})")
        return cell

    def _report(self, cell: Cell) -> ExecResult:
        unseen = _lines(cell.take_output())
        if not cell.task.done():
            return ExecResult(ok=True, output=unseen, cell_id=cell.id, running=True)
        self._cells.pop(cell.id, None)
        result = self._finished(cell)
        result.output = unseen  # only what was not handed back at a yield
        result.cell_id = cell.id
        return result

    @staticmethod
    def _finished(cell: Cell) -> ExecResult:
        try:
            return cell.task.result()
        except asyncio.CancelledError:
            return terminated()
