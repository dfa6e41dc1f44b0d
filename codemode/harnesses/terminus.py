"""Terminus (Terminal-Bench's agent): the model drives a terminal with keystrokes.

Each reply is one JSON object: ``analysis`` (what the screen shows), ``plan`` (what to
do next), ``commands`` (keystrokes to type, each with a ``duration`` in seconds to wait
before the screen is read) and ``task_complete``. In the code dialect ``commands`` gives
way to ``program``, JavaScript that calls ``tools.send_keys``. A reply that does not
parse gets a re-prompt naming each problem; text around the object is ignored with a
warning. Marking the task complete is asked back once: the model sees the screen
again and must say ``task_complete: true`` a second time.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from codemode.harnesses.adapters import adapter_registry
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
from codemode.harnesses.calls import exec_call
from codemode.harnesses.program_tools import EXEC_TOOL
from codemode.harnesses.repair import RECOVERED_PREFIX, ArgumentError, repair_json
from codemode.harnesses.spec import HarnessTable
from codemode.providers.base import AssistantMessage, Message, ToolCall, ToolSpec, UserMessage
from codemode.tools.registry import ToolRegistry

KEYS_TOOL = "send_keys"
MAX_COMMANDS = 50
MAX_DURATION = 60.0
_FIELDS = {"analysis", "plan", "commands", "program", "task_complete"}


@dataclass
class Reply:
    analysis: str
    plan: str
    commands: list[dict[str, Any]] = field(default_factory=list)
    program: str = ""
    task_complete: bool = False


def _json_object(text: str) -> tuple[Any, list[str], str | None]:
    """The JSON object in ``text``: (value, warnings, problem)."""
    start = text.find("{")
    if start < 0:
        return None, [], "no JSON object found in the reply"
    warnings = []
    before = re.sub(r"```(?:json)?\s*$", "", text[:start]).strip()
    if before:
        warnings.append("text before the JSON object was ignored")
    try:
        value, end = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as exc:
        stop = text.rfind("}")
        try:
            value = repair_json(text[start : stop + 1], what="the reply")
        except ArgumentError:
            line, col = exc.lineno, exc.colno
            return None, warnings, f"invalid JSON: {exc.msg} (line {line}, column {col})"
        warnings.append("the JSON was malformed and has been repaired; send valid JSON")
        end = stop + 1
    after = re.sub(r"^\s*```", "", text[end:]).strip()
    if after:
        warnings.append("text after the JSON object was ignored")
    return value, warnings, None


def _flag(value: object, problems: list[str], warnings: list[str]) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        warnings.append('task_complete should be true or false, not a string')
        return value.strip().lower() == "true"
    problems.append("task_complete must be true or false")
    return False


def parse_reply(text: str, *, code: bool) -> tuple[Reply | None, list[str], list[str]]:
    """A reply as (parsed, problems, warnings); problems mean it cannot be acted on."""
    value, warnings, problem = _json_object(text)
    if problem is not None:
        return None, [problem], warnings
    if not isinstance(value, dict):
        return None, ["the reply must be a JSON object, not " + type(value).__name__], warnings
    problems: list[str] = []
    done = _flag(value.get("task_complete", False), problems, warnings)
    for name in ("analysis", "plan"):
        if not isinstance(value.get(name), str):
            problems.append(f'"{name}" is missing or not a string')
    action = "program" if code else "commands"
    unknown = sorted(set(value) - _FIELDS - {"commands" if code else "program"})
    if unknown:
        warnings.append("unknown fields ignored: " + ", ".join(unknown))
    reply = Reply(str(value.get("analysis", "")), str(value.get("plan", "")), task_complete=done)
    if action not in value:
        if not done:
            problems.append(f'"{action}" is missing')
    elif code:
        if not isinstance(value["program"], str):
            problems.append('"program" must be a string of JavaScript')
        else:
            reply.program = value["program"]
    else:
        reply.commands = _commands(value["commands"], problems, warnings)
    return (None if problems else reply), problems, warnings


def _commands(raw: object, problems: list[str], warnings: list[str]) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        problems.append('"commands" must be a list')
        return []
    if len(raw) > MAX_COMMANDS:
        problems.append(f"at most {MAX_COMMANDS} commands per reply")
        return []
    out = []
    for i, item in enumerate(raw):
        where = f"commands[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where} must be an object with keystrokes and duration")
            continue
        if not isinstance(item.get("keystrokes"), str):
            problems.append(f"{where}.keystrokes is missing or not a string")
            continue
        duration = item.get("duration", 1.0)
        if isinstance(duration, bool) or not isinstance(duration, int | float):
            problems.append(f"{where}.duration must be a number of seconds")
            continue
        if not 0 <= duration <= MAX_DURATION:
            warnings.append(f"{where}.duration was clamped to 0-{MAX_DURATION:g} seconds")
            duration = min(max(float(duration), 0.0), MAX_DURATION)
        extra = sorted(set(item) - {"keystrokes", "duration"})
        if extra:
            warnings.append(f"{where}: unknown fields ignored: {', '.join(extra)}")
        out.append({"keystrokes": item["keystrokes"], "duration": float(duration)})
    return out


class TerminusHarness:
    """Terminus's JSON keystroke loop over our shell."""

    def __init__(self, table: HarnessTable, dialect: Dialect) -> None:
        self.table = table
        self.name = table.name
        self.dialect: Dialect = dialect
        self._count = 0
        self._asked_to_confirm = False
        self._warnings: list[str] = []

    def registry(self, base: ToolRegistry) -> ToolRegistry:
        return adapter_registry(self.table, base)

    def instructions(self, env: PromptEnv) -> str:
        values = {**env_values(env), "tool_names": KEYS_TOOL}
        name = self.table.prompt
        if self.dialect == "code":
            from codemode.tools.builtin import builtin_registry
            from codemode.tools.typescript import typescript_declarations

            values["declarations"] = typescript_declarations(
                adapter_registry(self.table, builtin_registry())
            ).strip()
            name = self.table.code_prompt or name
        return render_template(load_prompt(name), values).strip()

    def tool_specs(self, registry: ToolRegistry) -> list[ToolSpec]:
        return []  # the reply's JSON is the action; no function calling

    def _format_problem(self, problems: list[str]) -> Actions:
        field_name = "program" if self.dialect == "code" else "commands"
        listed = "\n".join(f"- {p}" for p in problems)
        return Actions(
            reminder=f"Your previous reply could not be used:\n{listed}\n\nReply with exactly "
            f'one JSON object with the fields "analysis", "plan", "{field_name}" and, when '
            'you are done, "task_complete": true. Nothing else in the reply.'
        )

    def actions(self, message: AssistantMessage) -> Actions:
        if message.tool_calls:
            return self._format_problem(["function calls are not available here"])
        reply, problems, warnings = parse_reply(message.text, code=self.dialect == "code")
        if reply is None:
            return self._format_problem(problems)
        self._warnings = warnings
        if reply.task_complete and self._asked_to_confirm:
            return Actions(final_answer=reply.analysis.strip() or "Task complete.")
        self._asked_to_confirm = reply.task_complete
        self._count += 1
        call_id = f"{RECOVERED_PREFIX}{self._count}"
        if self.dialect == "code" and reply.program.strip():
            return Actions(
                calls=[ToolCall(id=call_id, name=EXEC_TOOL, arguments=reply.program, freeform=True)]
            )
        payload = json.dumps({"commands": reply.commands})
        return Actions(calls=[ToolCall(id=call_id, name=KEYS_TOOL, arguments=payload)])

    async def execute(self, call: ToolCall, runner: ToolRunner) -> Outcome:
        if call.name == EXEC_TOOL:
            outcome, _ = await exec_call(call, runner)
            return outcome
        commands = json.loads(call.arguments)["commands"] or [{"keystrokes": "", "duration": 0}]
        screens: list[str] = []
        for command in commands:
            output = await runner.call_tool(KEYS_TOOL, command)
            if not output.ok:
                return Outcome(output.error or "the keystrokes could not be sent", is_error=True)
            screens.append(str(output.value.get("screen", "")))
        return Outcome(_merge(screens))

    def result_messages(self, calls: list[ToolCall], outcomes: list[Outcome]) -> list[Message]:
        parts = [f"Warning: {w}." for w in self._warnings]
        self._warnings = []
        for outcome in outcomes:
            label = "Error" if outcome.is_error else "New terminal output"
            parts.append(f"{label}:\n\n{outcome.content.strip() or '(nothing new)'}")
        if self._asked_to_confirm:
            parts.append(
                "You marked the task complete. Check the screen above: is it really done? "
                'If so, reply again with "task_complete": true (nothing more can be '
                'changed after that). If not, carry on with "task_complete": false.'
            )
        return [UserMessage(text="\n\n".join(parts))]


def _merge(screens: list[str]) -> str:
    """Consecutive screens without the prompt line repeated between them."""
    lines: list[str] = []
    for screen in screens:
        new = screen.split("\n")
        if lines and new and lines[-1] == new[0]:
            lines.pop()  # the previous prompt is where this one's first line was typed
        elif lines and new and new[0].startswith(lines[-1]):
            lines.pop()
        lines.extend(new)
    return "\n".join(lines)
