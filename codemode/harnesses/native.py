"""The native harness: our own prompt and tool names, in either dialect.

Classic: each tool is a function the model calls with JSON arguments. Code: one
``exec`` tool takes a JavaScript program whose ``tools.*`` are those same tools.
"""

from __future__ import annotations

import json
from typing import Any

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
from codemode.harnesses.render import render_exec_result, render_result
from codemode.harnesses.schema import parameters_schema
from codemode.providers.base import (
    AssistantMessage,
    FreeformSpec,
    Message,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
)
from codemode.tools.registry import ToolRegistry

EXEC_TOOL = "exec"


class ArgumentError(ValueError):
    """Tool-call arguments that cannot be used; the message is for the model."""


def parse_arguments(call: ToolCall, freeform_field: str | None) -> Any:
    """The arguments of a function call as JSON data (or the raw text of a freeform call)."""
    if call.freeform:
        if freeform_field is None:
            raise ArgumentError(f"{call.name} takes JSON arguments, not raw text")
        return {freeform_field: call.arguments}
    text = call.arguments.strip() or "{}"
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ArgumentError(
            f"the arguments of {call.name} are not valid JSON ({exc.msg} at line {exc.lineno} "
            f"column {exc.colno}); send a JSON object"
        ) from None


class NativeHarness:
    """Our own scaffold. ``dialect`` picks function calls or code mode."""

    name = "native"

    def __init__(self, dialect: Dialect = "classic") -> None:
        self.dialect: Dialect = dialect

    def instructions(self, env: PromptEnv) -> str:
        return render_template(load_prompt(f"native_{self.dialect}"), env_values(env)).strip()

    def tool_specs(self, registry: ToolRegistry) -> list[ToolSpec]:
        if self.dialect == "code":
            return [exec_tool_spec(registry)]
        specs = []
        for tool in registry:
            field = getattr(tool, "freeform_field", None)
            freeform = (
                FreeformSpec(field=field, grammar=getattr(tool, "grammar", None)) if field else None
            )
            specs.append(
                ToolSpec(
                    name=tool.name,
                    description=tool.description,
                    parameters=parameters_schema(tool.args_model),
                    freeform=freeform,
                )
            )
        return specs

    def actions(self, message: AssistantMessage) -> Actions:
        # Function calling: a reply without calls is the answer.
        return Actions(calls=list(message.tool_calls))

    async def execute(self, call: ToolCall, runner: ToolRunner) -> Outcome:
        if self.dialect == "code":
            return await run_exec_call(call, runner)
        tool = runner.registry.get(call.name)
        if tool is None:
            hint = runner.registry.closest(call.name)
            names = ", ".join(runner.registry.names())
            suggestion = f"; did you mean {hint}?" if hint else ""
            return Outcome(
                f"unknown tool {call.name!r}{suggestion} (tools: {names})", is_error=True
            )
        try:
            args = parse_arguments(call, getattr(tool, "freeform_field", None))
        except ArgumentError as exc:
            return Outcome(str(exc), is_error=True)
        output = await runner.call_tool(call.name, args)
        if not output.ok:
            return Outcome(output.error or "the tool failed", is_error=True)
        return Outcome(render_result(call.name, output.value))

    def result_messages(self, calls: list[ToolCall], outcomes: list[Outcome]) -> list[Message]:
        return [
            ToolResultMessage(
                call_id=call.id,
                name=call.name,
                content=outcome.content,
                is_error=outcome.is_error,
                freeform=call.freeform,
            )
            for call, outcome in zip(calls, outcomes, strict=True)
        ]


def exec_tool_spec(registry: ToolRegistry) -> ToolSpec:
    """The code dialect's one tool; its description carries the tools' declarations."""
    from codemode.tools.typescript import typescript_declarations

    description = render_template(
        load_prompt("exec_tool"), {"declarations": typescript_declarations(registry).strip()}
    )
    return ToolSpec(
        name=EXEC_TOOL,
        description=description.strip(),
        parameters={
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The JavaScript program to run."}
            },
            "required": ["code"],
            "additionalProperties": False,
        },
        freeform=FreeformSpec(field="code"),
    )


async def run_exec_call(call: ToolCall, runner: ToolRunner) -> Outcome:
    """Run the program in an ``exec`` call and render what it did."""
    if call.name != EXEC_TOOL:
        return Outcome(
            f"unknown tool {call.name!r}: in code mode the only tool is {EXEC_TOOL}; "
            f"call tools.{call.name}(...) from inside a program instead",
            is_error=True,
        )
    try:
        args = parse_arguments(call, "code")
    except ArgumentError as exc:
        return Outcome(str(exc), is_error=True)
    code = args.get("code") if isinstance(args, dict) else None
    if not isinstance(code, str) or not code.strip():
        return Outcome('exec needs {"code": "<JavaScript program>"}', is_error=True)
    result = await runner.run_program(code)
    return Outcome(render_exec_result(result), is_error=not result.ok)
