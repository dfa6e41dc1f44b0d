"""The seam between the turn loop and a model family's way of working: ``Harness``.

A harness decides what the model is told (a prompt template), what tools it is
offered (names and argument shapes), how its replies become actions (function calls,
or commands parsed from text) and how results go back. It never runs a tool itself:
it asks a ``ToolRunner``, which sends every call down the same registry path, so
policy, approvals and sandboxing do not depend on the harness.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from codemode.js_runtime.outcome import Outcome as ProgramOutcome
    from codemode.providers.base import AssistantMessage, Message, ToolCall, ToolSpec
    from codemode.tools.context import ToolContext
    from codemode.tools.registry import ToolRegistry

Dialect = Literal["classic", "code"]


@dataclass
class PromptEnv:
    """Facts about the session a prompt template may mention."""

    cwd: str
    date: str
    platform: str
    shell: str
    sandbox_mode: str
    approval_policy: str
    # AGENTS.md files, outermost first: (path shown to the model, text).
    project_docs: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class ToolOutput:
    """What a tool call produced, before a harness renders it for the model."""

    ok: bool
    value: Any = None  # the tool's JSON result when ok
    error: str | None = None


@dataclass
class Outcome:
    """One action's result as the model will read it."""

    content: str
    is_error: bool = False
    # Set when this action's result completes the task (a completion sentinel in a
    # command's output): the loop ends the turn with this as the final answer.
    final_answer: str | None = None


@dataclass
class Actions:
    """What a model reply asks for.

    ``calls`` empty and ``reminder`` None means the reply is the final answer. A
    ``reminder`` means the reply was neither an action nor an answer in the form this
    harness expects; the loop sends it back to the model as a user message. A
    ``final_answer`` ends the turn with that text (a harness's explicit completion
    signal, such as a ``submit`` command).
    """

    calls: list[ToolCall] = field(default_factory=list)
    reminder: str | None = None
    final_answer: str | None = None


class ToolRunner(Protocol):
    """The session side of tool execution, as a harness sees it."""

    registry: ToolRegistry
    context: ToolContext

    async def call_tool(self, name: str, args: Any) -> ToolOutput: ...

    async def run_program(self, code: str) -> ProgramOutcome:
        """Run a program (code mode); raises ``ToolError`` when it cannot start."""
        ...

    async def wait_program(
        self, cell_id: str, yield_ms: int | None = None, terminate: bool = False
    ) -> ProgramOutcome:
        """Come back to a program that yielded; raises ``ToolError`` for an unknown cell."""
        ...


class Harness(Protocol):
    """A model family's scaffold around the same tools."""

    name: str
    dialect: Dialect

    def registry(self, base: ToolRegistry) -> ToolRegistry:
        """The tools this harness's session runs, built over the session's ``base`` tools
        (an emulated surface wraps them in adapters that still call ``base``)."""
        ...

    def instructions(self, env: PromptEnv) -> str:
        """The system prompt."""
        ...

    def tool_specs(self, registry: ToolRegistry) -> list[ToolSpec]:
        """The tools offered through function calling (empty for text-parsed harnesses)."""
        ...

    def actions(self, message: AssistantMessage) -> Actions:
        """The actions a reply asks for."""
        ...

    async def execute(self, call: ToolCall, runner: ToolRunner) -> Outcome:
        """Run one action and render its result."""
        ...

    def result_messages(self, calls: list[ToolCall], outcomes: list[Outcome]) -> list[Message]:
        """How the results of one reply's actions go back into the conversation."""
        ...


_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def load_prompt(name: str) -> str:
    """The text of ``prompts/NAME.md`` shipped with this package."""
    return (resources.files("codemode.harnesses") / "prompts" / f"{name}.md").read_text("utf-8")


def render_template(template: str, values: dict[str, str]) -> str:
    """Fill ``{{name}}`` placeholders; an unknown name is an error, not a silent gap.

    Double braces rather than ``str.format`` or ``$name`` because prompts quote
    JavaScript, where single braces and ``${...}`` are everywhere.
    """

    def fill(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"prompt template uses {{{{{key}}}}}, which is not provided")
        return values[key]

    return _PLACEHOLDER.sub(fill, template)


def env_values(env: PromptEnv) -> dict[str, str]:
    """The placeholders every template may use."""
    docs = "\n\n".join(
        f"## Instructions from {path}\n\n{text.strip()}" for path, text in env.project_docs
    )
    return {
        "cwd": env.cwd,
        "date": env.date,
        "platform": env.platform,
        "shell": env.shell,
        "sandbox_mode": env.sandbox_mode,
        "approval_policy": env.approval_policy,
        "project_docs": docs,
    }
