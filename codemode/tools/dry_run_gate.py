"""Which tools may run during a dry run (``codemode.tools.dry_run``).

Only tools that honour the overlay may: readers (``effect="read"`` on their definition)
and writers marked ``dry_run=True``. ``dry_run_gate`` (an interceptor, which
``dry_run_registry`` puts in a registry's pipeline) refuses every other tool, since a
tool that writes behind the overlay's back (the shell, or one a plugin adds) would
change files that the diff never shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codemode.tool_terms.errors import ToolError
from codemode.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from codemode.tools.base import Tool
    from codemode.tools.pipeline import Call, Interceptor, Next


def allowed_in_dry_run(tool: Tool) -> bool:
    """Readers, and the writers that record into the overlay (``Tool.dry_run``: set once
    a writer writes through ``DryRun.write``/``DryRun.remove``)."""
    return tool.effect == "read" or tool.dry_run


def _refused_in_dry_run(tool: Tool) -> bool:
    return not allowed_in_dry_run(tool)


def dry_run_gate(registry: ToolRegistry) -> Interceptor:
    """A ``gate``-stage interceptor refusing, during a dry run (``ctx.dry_run`` set),
    every tool of ``registry`` not ``allowed_in_dry_run``."""

    async def gate(call: Call, next_: Next) -> Any:
        tool = call.tool
        if call.ctx.dry_run is None or tool is None or allowed_in_dry_run(tool):
            return await next_(call)
        why = (
            "commands could change files without the change being recorded"
            if tool.effect == "run"
            else "it does not record its changes in the dry run"
        )
        available = sorted(t.name for t in registry if allowed_in_dry_run(t))
        raise ToolError(
            f"tools.{call.name} is refused in a dry run ({why}); "
            f"tools available: {', '.join(available)}"
        )

    return gate


def dry_run_registry(registry: ToolRegistry) -> ToolRegistry:
    """A copy of ``registry`` that refuses, in a dry run, the tools that would write
    behind the overlay's back."""
    guarded = registry.copy()
    # Readers and overlay writers pass whatever the call: their calls skip the gate.
    guarded.use(dry_run_gate(guarded), "gate", applies=_refused_in_dry_run)
    return guarded
