"""Harness tables: the data files under ``tables/`` that describe each emulated agent.

A table names the harness, its prompt, how replies are parsed, and its tool surface:
each tool's name, description and JSON-schema parameters as that agent shows them,
the adapter that maps it onto our own tools, and which of its arguments plays which
role for that adapter.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Parser = Literal["function_calls", "swe_agent", "mini_swe_agent", "terminus"]


class ToolTable(BaseModel):
    """One emulated tool."""

    model_config = ConfigDict(extra="forbid")

    name: str
    adapter: str = Field(description="Adapter kind in codemode.harnesses.adapter_kinds.ADAPTERS.")
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    # emulated argument name -> adapter role (see adapter_kinds.py); "drop" ignores it.
    roles: dict[str, str] = Field(default_factory=dict)
    # adapter options, e.g. {todo_text = "content"} or {output_mode_default = "content"}
    options: dict[str, Any] = Field(default_factory=dict)


class HarnessTable(BaseModel):
    """A whole harness."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    prompt: str
    # Code dialect: a prompt to use instead of ``prompt`` (text-parsed harnesses whose
    # reply format changes with the dialect).
    code_prompt: str | None = None
    parser: Parser = "function_calls"
    # The wire the emulated agent speaks to its models (zcode: Z.AI's Anthropic
    # Messages endpoint); shown by `interpreter harness show`, informational.
    wire: str | None = None
    dialects: list[Literal["classic", "code"]] = ["classic", "code"]  # pydantic copies it
    nudge: str = (
        "Your last reply had neither a tool call nor an answer. Call one of your tools to "
        "make progress, or reply with your final answer."
    )
    # Text harnesses: the output line that marks the task as finished.
    completion_sentinel: str | None = None
    # Text harnesses: a reply whose command is exactly this ends the task.
    submit_command: str | None = None
    tools: list[ToolTable] = Field(default_factory=list)
    # Code dialect: JavaScript run before a program that matches ``code_prelude_if``
    # (helpers the emulated agent's own code mode provides), and extra notes for the
    # exec tool's description.
    code_prelude: str = ""
    code_prelude_if: str = ""
    code_notes: str = ""
    # Code dialect: every adapter result also carries ``output``, its text as a direct
    # call would show it (for agents whose code mode returns text results).
    result_text: bool = False
    # Reuse another table's tools: ``tools_from`` names it, ``tool_names`` picks some.
    tools_from: str | None = None
    tool_names: list[str] = Field(default_factory=list)


def _tables_dir() -> Any:
    return resources.files("codemode.harnesses") / "tables"


@cache
def table_names() -> tuple[str, ...]:
    """The harness tables shipped with the package, by name."""
    return tuple(
        sorted(p.name[: -len(".toml")] for p in _tables_dir().iterdir() if p.name.endswith(".toml"))
    )


@cache
def load_table(name: str) -> HarnessTable:
    """Parse ``tables/NAME.toml``; a malformed table is a bug, reported with its name."""
    text = (_tables_dir() / f"{name}.toml").read_text("utf-8")
    try:
        table = HarnessTable.model_validate(tomllib.loads(text))
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        raise ValueError(f"harness table {name}.toml is invalid: {exc}") from exc
    if table.tools_from:
        source = {t.name: t for t in load_table(table.tools_from).tools}
        missing = [n for n in table.tool_names if n not in source]
        if missing:
            raise ValueError(f"harness table {name}.toml: {table.tools_from} has no {missing}")
        names = table.tool_names or list(source)
        picked = [source[n] for n in names]
        table = table.model_copy(update={"tools": [*table.tools, *picked]})
    return table
