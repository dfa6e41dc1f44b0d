"""A program's delegate over a tool registry: how a code-mode program's nested calls
reach the tools, with their provenance, from every program host (``ToolHost``, on which
``interpreter run``, batch workers and ``mcp-server`` run their programs)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from codemode.tools.provenance import ProgramProvenance, current_model_call, current_program

if TYPE_CHECKING:
    from codemode.js_runtime.delegate import NestedCall
    from codemode.js_runtime.models import ExecEvent
    from codemode.tools.context import ToolContext
    from codemode.tools.registry import ToolRegistry

__all__ = ["RegistryDelegate"]


class RegistryDelegate:
    """A program's delegate (``codemode.js_runtime.Delegate``, handed to
    ``CodeSession.execute``) over a tool registry: each nested call goes down the
    registry's path (policy, approval, interceptors, hooks) in ``context``, carrying its
    provenance — the program's source (approval requests show it) and its cell
    (``codemode.tools.provenance``: hooks see which cell made the call, and its place
    in it), as an agent session's calls do; each notification goes to ``on_event``,
    when given. ``calls``, when given, runs the calls instead (the caller answers
    them: ``ToolHost.delegate``)."""

    def __init__(
        self,
        registry: ToolRegistry,
        context: ToolContext,
        on_event: Callable[[str, ExecEvent], None] | None = None,
        *,
        calls: Callable[[str, object], Awaitable[object]] | None = None,
    ) -> None:
        self.registry = registry
        self.context = context
        self.on_event = on_event
        self.calls = calls
        self._programs: dict[str, tuple[str, ProgramProvenance]] = {}

    def call_tool(self, call: NestedCall) -> Coroutine[Any, Any, object]:
        known = self._programs.get(call.cell_id)
        # Each call knows its program (hooks). Set without a token: each nested call
        # runs in a task (a context) of its own and may finish in another one.
        current_program.set(known[1] if known is not None else None)
        if self.calls is not None:
            return _answered(self.calls, call)
        # The registry's coroutine itself, not one awaiting it: one frame fewer a call.
        return self.registry.invoke(
            call.name,
            call.args,
            self.context,
            program=known[0] if known is not None else None,
        )

    def notify(self, cell_id: str, event: ExecEvent) -> None:
        if event.type == "cell.started":
            provenance = ProgramProvenance(exec_call_id=current_model_call.get(), cell_id=cell_id)
            self._programs[cell_id] = (event.source, provenance)
        elif event.type == "cell.finished":
            self._programs.pop(cell_id, None)
        if self.on_event is not None:
            self.on_event(cell_id, event)


async def _answered(calls: Callable[[str, object], Awaitable[object]], call: NestedCall) -> object:
    return await calls(call.name, call.args)
