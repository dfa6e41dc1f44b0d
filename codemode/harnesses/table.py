"""Harnesses defined by a table (``tables/NAME.toml``): an emulated agent's prompt and
tool surface over our own tools, in the classic or the code dialect.

``TableHarness`` is for agents that use function calling. ``TextHarness`` is for
agents whose actions are parsed from the reply text (SWE-agent's one fenced command
after a discussion, mini-swe-agent's one bash block and its completion sentinel).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from codemode.harnesses.adapters import AdapterTool, adapter_registry
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
    exec_call,
    function_call_actions,
    result_messages,
    run_classic_call,
    run_exec_call,
)
from codemode.harnesses.present import arg_for_role, render_value
from codemode.harnesses.program_tools import EXEC_TOOL, exec_tool, wait_tool
from codemode.harnesses.render import render_result
from codemode.harnesses.repair import RECOVERED_PREFIX, ArgumentError
from codemode.harnesses.spec import HarnessTable
from codemode.providers.base import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolSpec,
    UserMessage,
)
from codemode.tools.doc_text import unwrap
from codemode.tools.registry import ToolRegistry
from codemode.tools.surfaces import function_spec, function_specs


class DialectError(ValueError):
    """A harness asked for in a dialect it does not have."""


def _values(env: PromptEnv, registry_names: list[str]) -> dict[str, str]:
    return {**env_values(env), "tool_names": ", ".join(registry_names)}


def exec_spec(registry: ToolRegistry, table: HarnessTable) -> ToolSpec:
    """The ``exec`` tool of a table harness: its declarations are the emulated tools."""
    from codemode.tools.typescript import typescript_declarations

    description = render_template(
        load_prompt("exec_tool_surface"),
        {
            "declarations": typescript_declarations(registry).strip(),
            "example": _example(table),
            "notes": unwrap(table.code_notes),
        },
    )
    return function_spec(exec_tool(re.sub(r"\n{3,}", "\n\n", description).strip()))


def _example(table: HarnessTable) -> str:
    """A two-call example using this surface's own names, built from the table."""
    by_kind = {t.adapter: t for t in table.tools}
    shell, grep = by_kind.get("shell"), by_kind.get("grep")
    if shell is None:
        return ""
    cmd_arg = arg_for_role(shell, "command") or "command"
    lines = ["```js"]
    if grep is not None:
        pat_arg = arg_for_role(grep, "pattern") or "pattern"
        lines.append(
            f'const [hits, run] = await Promise.all([\n'
            f'  tools.{grep.name}({{ {pat_arg}: "TODO" }}),\n'
            f'  tools.{shell.name}({{ {cmd_arg}: "ls" }}),\n'
            f"]);\nconsole.log(hits, run);"
        )
    else:
        lines.append(f'const run = await tools.{shell.name}({{ {cmd_arg}: "ls" }});\n'
                     "console.log(run);")
    lines.append("```")
    return "Example:\n" + "\n".join(lines)


class TableHarness:
    """A function-calling agent's surface, from its table."""

    def __init__(self, table: HarnessTable, dialect: Dialect) -> None:
        if dialect not in table.dialects:
            raise DialectError(f"harness {table.name} has no {dialect} dialect")
        self.table = table
        self.name = table.name
        self.dialect: Dialect = dialect
        self._specs: list[ToolSpec] = []
        self._names: list[str] = [t.name for t in table.tools]

    def registry(self, base: ToolRegistry) -> ToolRegistry:
        return adapter_registry(self.table, base)

    def instructions(self, env: PromptEnv) -> str:
        values = _values(env, self._names)
        text = render_template(load_prompt(self.table.prompt), values).strip()
        if self.dialect == "code":
            text += "\n\n" + render_template(load_prompt("code_surface"), values).strip()
        return text

    def tool_specs(self, registry: ToolRegistry) -> list[ToolSpec]:
        self._names = registry.names()
        if self.dialect == "code":
            self._specs = [exec_spec(registry, self.table), function_spec(wait_tool())]
            return self._specs
        # The emulated agent's tools offer no freeform text: its tables say what it sent.
        self._specs = function_specs(registry, freeform=False)
        return self._specs

    def actions(self, message: AssistantMessage) -> Actions:
        return function_call_actions(
            message, self._specs, self.table.nudge, code=self.dialect == "code"
        )

    async def execute(self, call: ToolCall, runner: ToolRunner) -> Outcome:
        if self.dialect == "code":
            return await run_exec_call(call, runner, self._prelude(call))
        return await run_classic_call(
            call, runner, lambda name, args, value: render_adapted(runner, name, args, value)
        )

    def _prelude(self, call: ToolCall) -> str:
        table = self.table
        if table.code_prelude and re.search(table.code_prelude_if or ".", call.arguments):
            return " ".join(table.code_prelude.split())
        return ""

    def result_messages(self, calls: list[ToolCall], outcomes: list[Outcome]) -> list[Message]:
        return result_messages(calls, outcomes)


def render_adapted(runner: ToolRunner, name: str, args: Any, value: Any) -> str:
    """An adapter tool's result as the emulated agent would show it."""
    tool = runner.registry.get(name)
    if not isinstance(tool, AdapterTool) or tool.table is None:
        return render_result(tool, value)
    return render_value(tool.table, tool.target_tool, args, value)


# --- text-parsed harnesses ---------------------------------------------------------------

_BLOCK = re.compile(r"```([\w+-]*)[ \t]*\n(.*?)\n?```", re.DOTALL)


def parse_command_line(tool: AdapterTool, line: str) -> dict[str, Any]:
    """A command such as ``str_replace_editor str_replace f.py --old_str 'a' --new_str 'b'``
    as the tool's arguments: positionals in table order, then ``--name value`` pairs."""
    assert tool.table is not None
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise ArgumentError(f"cannot parse the {tool.name} command: {exc}") from None
    props: dict[str, Any] = tool.table.parameters.get("properties", {})
    positional = list(tool.table.options.get("positional", []))
    args: dict[str, Any] = {}
    i = 1
    while i < len(words):
        word = words[i]
        if word.startswith("--"):
            key = word[2:]
            if key not in props:
                raise ArgumentError(
                    f"{tool.name}: unknown option --{key} (options: "
                    + ", ".join(f"--{p}" for p in props if p not in positional) + ")"
                )
            kind = props[key].get("type")
            if kind == "array":
                items = []
                while i + 1 < len(words) and re.fullmatch(r"-?\d+", words[i + 1]):
                    items.append(int(words[i + 1]))
                    i += 1
                args[key] = items
            else:
                if i + 1 >= len(words):
                    raise ArgumentError(f"{tool.name}: --{key} needs a value")
                raw = words[i + 1]
                args[key] = int(raw) if kind == "integer" and re.fullmatch(r"-?\d+", raw) else raw
                i += 1
        elif positional:
            args[positional.pop(0)] = word
        else:
            raise ArgumentError(f"{tool.name}: unexpected argument {word!r}")
        i += 1
    return args


class TextHarness:
    """An agent whose one action per reply is a fenced block in its text."""

    def __init__(self, table: HarnessTable, dialect: Dialect) -> None:
        if dialect not in table.dialects:
            raise DialectError(f"harness {table.name} has no {dialect} dialect")
        self.table = table
        self.name = table.name
        self.dialect: Dialect = dialect
        self._count = 0

    def registry(self, base: ToolRegistry) -> ToolRegistry:
        return adapter_registry(self.table, base)

    def instructions(self, env: PromptEnv) -> str:
        values = _values(env, [t.name for t in self.table.tools])
        text = render_template(load_prompt(self.table.prompt), values).strip()
        if self.dialect == "code":
            from codemode.tools.builtin import builtin_registry
            from codemode.tools.typescript import typescript_declarations

            registry = adapter_registry(self.table, builtin_registry())
            values["declarations"] = typescript_declarations(registry).strip()
            sentinel, submit = self.table.completion_sentinel, self.table.submit_command
            values["finish"] = (
                f"To finish, make `{sentinel}` the first line your program prints."
                if sentinel
                else f"To finish, reply with a block holding only `{submit}`." if submit else ""
            )
            text += "\n\n" + render_template(load_prompt("code_text"), values).strip()
        return text

    def tool_specs(self, registry: ToolRegistry) -> list[ToolSpec]:
        return []  # actions come from the text, never from function calling

    def _reminder(self, problem: str) -> Actions:
        lang = "js" if self.dialect == "code" else "bash"
        return Actions(
            reminder=f"Format error: {problem}. Every reply must contain exactly one fenced "
            f"```{lang} block holding your next "
            f"{'program' if self.dialect == 'code' else 'command'}"
            + (
                f", or the command `{self.table.submit_command}` when you are done."
                if self.table.submit_command
                else (
                    f"; when the task is done, run `echo {self.table.completion_sentinel}`."
                    if self.table.completion_sentinel
                    else "."
                )
            )
        )

    def actions(self, message: AssistantMessage) -> Actions:
        blocks = _BLOCK.findall(message.text)
        if message.tool_calls:
            return self._reminder("function calls are not available here")
        if len(blocks) != 1:
            found = "no fenced block" if not blocks else f"{len(blocks)} fenced blocks"
            return self._reminder(f"your reply had {found}")
        body = blocks[0][1].strip()
        if not body:
            return self._reminder("the fenced block was empty")
        discussion = _BLOCK.sub("", message.text).strip()
        if self.table.submit_command and body == self.table.submit_command:
            return Actions(final_answer=discussion or "Submitted.")
        self._count += 1
        call_id = f"{RECOVERED_PREFIX}{self._count}"
        if self.dialect == "code":
            return Actions(calls=[ToolCall(id=call_id, name=EXEC_TOOL, arguments=body,
                                           freeform=True)])
        return Actions(calls=[ToolCall(id=call_id, name="", arguments=body, freeform=True)])

    async def execute(self, call: ToolCall, runner: ToolRunner) -> Outcome:
        if self.dialect == "code":
            outcome, program = await exec_call(call, runner)
            return self._check_sentinel(outcome, program.output if program is not None else "")
        body = call.arguments
        first = body.split(None, 1)[0] if body.split() else ""
        tool = runner.registry.get(first)
        shell = next(t for t in self.table.tools if t.adapter == "shell")
        if isinstance(tool, AdapterTool) and tool.table is not None and first != shell.name:
            try:
                args: dict[str, Any] = parse_command_line(tool, body)
            except ArgumentError as exc:
                return Outcome(str(exc), is_error=True)
            name = first
        else:
            cmd_arg = arg_for_role(shell, "command") or "command"
            args, name = {cmd_arg: body}, shell.name
        output = await runner.call_tool(name, args)
        if not output.ok:
            return Outcome(output.error or "the command failed", is_error=True)
        text = render_adapted(runner, name, args, output.value)
        raw = output.value.get("output", "") if isinstance(output.value, dict) else text
        return self._check_sentinel(Outcome(text), raw)

    def _check_sentinel(self, outcome: Outcome, output: str) -> Outcome:
        sentinel = self.table.completion_sentinel
        if not sentinel:
            return outcome
        lines = output.lstrip().splitlines()
        if lines and lines[0].strip() == sentinel:
            rest = "\n".join(lines[1:]).strip()
            outcome.final_answer = rest or "Task complete."
        return outcome

    def result_messages(self, calls: list[ToolCall], outcomes: list[Outcome]) -> list[Message]:
        parts = []
        for outcome in outcomes:
            body = outcome.content if outcome.content.strip() else "(no output)"
            parts.append(
                f"OBSERVATION:\n{body}" if self.table.parser == "swe_agent" else body
            )
        return [UserMessage(text="\n\n".join(parts))]
