"""The code dialect's own tools, ``exec`` and ``wait``, defined once as tools are.

Each is a ``Tool`` (name, description, argument model, freeform field), so its wire
spec comes from ``function_spec`` like every other tool's and its arguments are
checked by ``Tool.validate``. Their handler runs the program in the session's code
session (``ToolRunner.run_program``/``wait_program``) and returns the runtime's
``Outcome``; they are offered to the model, never to programs (a program cannot start
another program).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from codemode.tools.base import StrictArgs, Tool, ToolContext, ToolError

if TYPE_CHECKING:
    from codemode.harnesses.base import ToolRunner

EXEC_TOOL = "exec"
WAIT_TOOL = "wait"


class ExecArgs(StrictArgs):
    code: str = Field(description="The JavaScript program to run.")


class WaitArgs(StrictArgs):
    cell_id: str = Field(description="The running program's cell id.")
    yield_time_ms: int | None = Field(
        default=None, ge=0, description="Longest wait for something new."
    )
    terminate: bool = Field(default=False, description="Stop the program.")


def _unbound(args: Any, ctx: ToolContext) -> Any:
    raise ToolError("this session runs no programs")


def exec_tool(description: str, runner: ToolRunner | None = None) -> Tool:
    """``exec``: its description carries the declarations of the tools programs call."""

    async def run(args: ExecArgs, ctx: ToolContext) -> Any:
        if runner is None:
            return _unbound(args, ctx)
        return await runner.run_program(args.code)

    return Tool(
        name=EXEC_TOOL,
        description=description,
        args_model=ExecArgs,
        result_model=None,
        handler=run,
        freeform_field="code",
        effect="run",
    )


def wait_tool(runner: ToolRunner | None = None) -> Tool:
    """``wait``: come back to a program that yielded (or stop it)."""
    from codemode.harnesses.base import load_prompt

    async def wait(args: WaitArgs, ctx: ToolContext) -> Any:
        if runner is None:
            return _unbound(args, ctx)
        return await runner.wait_program(args.cell_id, args.yield_time_ms, args.terminate)

    return Tool(
        name=WAIT_TOOL,
        description=load_prompt("wait_tool").strip(),
        args_model=WaitArgs,
        result_model=None,
        handler=wait,
        effect="run",
    )
