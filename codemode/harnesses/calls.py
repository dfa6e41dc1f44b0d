"""What function-calling harnesses share: reading a reply into actions, running one
call or one program, and sending the results back."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from codemode.harnesses.base import Actions, Outcome, ToolRunner
from codemode.harnesses.program_tools import EXEC_TOOL, WAIT_TOOL, exec_tool, wait_tool
from codemode.harnesses.render import render_exec_result
from codemode.harnesses.repair import (
    RECOVERED_PREFIX,
    ArgumentError,
    parse_call_arguments,
    recover_text_calls,
    strip_fence,
    unknown_tool_message,
    unwrap_program,
)
from codemode.providers.base import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from codemode.tool_terms.elide import elide_middle
from codemode.tools.context import ToolError
from codemode.tools.shell import MAX_OUTPUT_CHARS

if TYPE_CHECKING:
    from codemode.js_runtime.outcome import Outcome as ProgramOutcome

_JS_FENCE_LANGS = ("```js", "```javascript", "```ts", "```typescript")


def function_call_actions(
    message: AssistantMessage, specs: list[ToolSpec], nudge: str, *, code: bool = False
) -> Actions:
    """Actions of a reply in a function-calling harness.

    Wire tool calls win. Otherwise calls written into the text are recovered; in code
    mode a reply that is nothing but a JavaScript fence is taken as a program. An empty
    reply is neither an action nor an answer and gets ``nudge``.
    """
    if message.tool_calls:
        return Actions(calls=list(message.tool_calls))
    text = message.text
    schemas = {s.name: s.parameters for s in specs}
    calls, problem = recover_text_calls(text, schemas)
    if calls:
        return Actions(calls=calls)
    if problem is not None:
        return Actions(reminder=f"I could not read your tool call: {problem}. Send it again.")
    stripped = text.strip()
    if code and stripped.startswith(_JS_FENCE_LANGS) and stripped.endswith("```"):
        body = strip_fence(stripped)
        if body != stripped:
            return Actions(
                calls=[
                    ToolCall(
                        id=f"{RECOVERED_PREFIX}0", name=EXEC_TOOL, arguments=body, freeform=True
                    )
                ]
            )
    if not stripped:
        return Actions(reminder=nudge)
    return Actions()


async def run_classic_call(
    call: ToolCall,
    runner: ToolRunner,
    render: Callable[[str, Any, Any], str],
) -> Outcome:
    """Run one function call through the runner; ``render(name, args, value)`` makes the text."""
    tool = runner.registry.get(call.name)
    if tool is None:
        return Outcome(unknown_tool_message(call.name, runner.registry.names()), is_error=True)
    try:
        args = parse_call_arguments(call, getattr(tool, "freeform_field", None))
    except ArgumentError as exc:
        return Outcome(str(exc), is_error=True)
    output = await runner.call_tool(call.name, args)
    if not output.ok:
        return Outcome(_capped(output.error or "the tool failed"), is_error=True)
    return Outcome(_capped(render(call.name, args, output.value)))


def _capped(text: str) -> str:
    # Whatever a tool returns (an MCP server's reply can be any size), what goes back to
    # the model is bounded like a command's output: head and tail kept, the middle marked.
    return elide_middle(text, MAX_OUTPUT_CHARS)[0]


async def run_exec_call(call: ToolCall, runner: ToolRunner, prelude: str = "") -> Outcome:
    """Run the program in an ``exec`` call and render what it did."""
    return (await exec_call(call, runner, prelude))[0]


async def exec_call(
    call: ToolCall, runner: ToolRunner, prelude: str = ""
) -> tuple[Outcome, ProgramOutcome | None]:
    """Run the program in an ``exec`` call: its rendered outcome, and the program's
    (None when no program ran). ``prelude`` goes in front of the program, on its first
    line so that line numbers in errors stay the model's own."""
    if call.name == WAIT_TOOL:
        return await _wait_call(call, runner)
    if call.name != EXEC_TOOL:
        names = runner.registry.names()
        if call.name in names:
            hint = f"call tools.{call.name}(...) from inside a program instead"
        else:
            hint = unknown_tool_message(call.name, names, prefix="tools.")
        message = f"unknown tool {call.name!r}: in code mode the only tool is {EXEC_TOOL}; {hint}"
        return Outcome(message, is_error=True), None
    try:
        args: Any = call.arguments
        if not call.freeform:
            try:
                args = parse_call_arguments(call)
            except ArgumentError:
                # Raw JavaScript sent where a JSON object was due: still a program.
                if call.arguments.lstrip().startswith("{"):
                    raise
        code = unwrap_program(args)
    except ArgumentError as exc:
        return Outcome(str(exc), is_error=True), None
    if not code:
        return Outcome('exec needs {"code": "<JavaScript program>"}', is_error=True), None
    program = f"{prelude} {code}" if prelude else code
    tool = exec_tool("", runner)
    try:
        args = tool.validate({"code": program})
        outcome: ProgramOutcome = await tool.handler(args, runner.context)
    except ToolError as exc:
        return Outcome(str(exc), is_error=True), None
    return Outcome(render_exec_result(outcome, program), is_error=_failed(outcome)), outcome


def _failed(outcome: ProgramOutcome) -> bool:
    return outcome.kind == "completed" and not outcome.ok


async def _wait_call(
    call: ToolCall, runner: ToolRunner
) -> tuple[Outcome, ProgramOutcome | None]:
    tool = wait_tool(runner)
    try:
        raw = parse_call_arguments(call)
        if isinstance(raw, dict) and isinstance(raw.get("cell_id"), int):
            raw = {**raw, "cell_id": str(raw["cell_id"])}  # a number is a fine cell id
        args = tool.validate(raw)
        outcome: ProgramOutcome = await tool.handler(args, runner.context)
    except (ArgumentError, ToolError) as exc:
        # (``wait`` is the model's tool, not a ``tools.*`` member programs call)
        message = str(exc).replace(f"tools.{WAIT_TOOL}:", f"{WAIT_TOOL}:", 1)
        return Outcome(message, is_error=True), None
    return Outcome(render_exec_result(outcome), is_error=_failed(outcome)), outcome


def result_messages(calls: list[ToolCall], outcomes: list[Outcome]) -> list[Message]:
    """Tool results for wire calls; recovered calls (not on the wire) get a user message."""
    messages: list[Message] = []
    recovered: list[str] = []
    for call, outcome in zip(calls, outcomes, strict=True):
        if call.id.startswith(RECOVERED_PREFIX):
            status = "error" if outcome.is_error else "result"
            recovered.append(f"[{status} of {call.name}]\n{outcome.content}")
            continue
        messages.append(
            ToolResultMessage(
                call_id=call.id,
                name=call.name,
                content=outcome.content,
                is_error=outcome.is_error,
                freeform=call.freeform,
            )
        )
    if recovered:
        messages.append(UserMessage(text="\n\n".join(recovered)))
    return messages
