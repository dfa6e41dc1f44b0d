"""The native harness: our own prompt and tool names, in either dialect.

Classic: each tool is a function the model calls with JSON arguments. Code: one
``exec`` tool takes a JavaScript program whose ``tools.*`` are those same tools.
"""

from __future__ import annotations

from codemode.harnesses.base import (
    Actions,
    Dialect,
    Outcome,
    PromptEnv,
    ToolRunner,
    env_values,
    load_prompt,
    render_template,
)
from codemode.harnesses.calls import (
    function_call_actions,
    result_messages,
    run_classic_call,
    run_exec_call,
)
from codemode.harnesses.program_tools import EXEC_TOOL, exec_tool, wait_tool
from codemode.harnesses.render import render_result
from codemode.harnesses.repair import ArgumentError
from codemode.providers.base import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolSpec,
)
from codemode.tools.registry import ToolRegistry
from codemode.tools.surfaces import function_spec, function_specs

__all__ = ["EXEC_TOOL", "ArgumentError", "NativeHarness", "exec_tool_spec"]

NUDGE = (
    "Your last reply was empty: it had no tool call and no answer. Call a tool to make "
    "progress, or reply with your final answer."
)


class NativeHarness:
    """Our own scaffold. ``dialect`` picks function calls or code mode."""

    name = "native"

    def __init__(self, dialect: Dialect = "classic") -> None:
        self.dialect: Dialect = dialect
        self._specs: list[ToolSpec] = []

    def instructions(self, env: PromptEnv) -> str:
        return render_template(load_prompt(f"native_{self.dialect}"), env_values(env)).strip()

    def tool_specs(self, registry: ToolRegistry) -> list[ToolSpec]:
        self._specs = self._tool_specs(registry)
        return self._specs

    def _tool_specs(self, registry: ToolRegistry) -> list[ToolSpec]:
        if self.dialect == "code":
            return [exec_tool_spec(registry), function_spec(wait_tool())]
        return function_specs(registry)

    def registry(self, base: ToolRegistry) -> ToolRegistry:
        return base

    def actions(self, message: AssistantMessage) -> Actions:
        return function_call_actions(message, self._specs, NUDGE, code=self.dialect == "code")

    async def execute(self, call: ToolCall, runner: ToolRunner) -> Outcome:
        if self.dialect == "code":
            return await run_exec_call(call, runner)
        return await run_classic_call(
            call, runner, lambda name, args, value: render_result(runner.registry.get(name), value)
        )

    def result_messages(self, calls: list[ToolCall], outcomes: list[Outcome]) -> list[Message]:
        return result_messages(calls, outcomes)


def exec_tool_spec(registry: ToolRegistry) -> ToolSpec:
    """The code dialect's one tool; its description carries the tools' declarations."""
    from codemode.tools.typescript import typescript_declarations

    description = render_template(
        load_prompt("exec_tool"), {"declarations": typescript_declarations(registry).strip()}
    )
    return function_spec(exec_tool(description.strip()))
