"""Adapter tools: an emulated agent's tool names and argument shapes over our own tools.

An adapter tool is a real ``Tool`` (so it has an argument model, a TypeScript
declaration, and a place in a registry) whose handler translates its arguments and
calls our own tool through the *base* registry's ``invoke``. Policy, approval and the
sandbox therefore see the same canonical calls (``shell``, ``edit``, ...) whichever
surface the model used.

Each adapter kind knows a few *roles* (``path``, ``old``, ``timeout_ms`` ...); a
harness table maps the emulated argument names onto those roles.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, create_model

from codemode.harnesses.adapter_kinds import (
    ADAPTER_RESULTS,
    ADAPTER_TRAITS,
    ADAPTERS,
    Traits,
    plan_steps,
)
from codemode.harnesses.arg_models import model_from_schema, pascal
from codemode.harnesses.spec import HarnessTable, ToolTable
from codemode.tools.base import Tool
from codemode.tools.context import ToolContext, ToolError
from codemode.tools.doc_text import unwrap
from codemode.tools.registry import ToolRegistry


@dataclass(frozen=True)
class AdapterTool(Tool):
    """A tool of an emulated surface; ``target`` is the tool of ours it mostly calls
    (``target_tool`` its definition, whose traits the adapter shares).

    The sandbox's approval hook should act on the canonical calls the handler makes
    through the base registry, not on the adapter call itself.
    """

    target: str = ""
    table: ToolTable | None = None
    target_tool: Tool | None = None

    def item_args(self, raw: object) -> object:
        """The emulated arguments by role (``command``, ``path``...); a todo list as our
        plan (``{plan: [{step, status}]}``)."""
        if self.table is None or not isinstance(raw, dict):
            return raw
        by_role = _roles(raw, self.table)
        if self.table.adapter == "todo":
            todos = by_role.get("todos")
            return {"plan": plan_steps(todos if isinstance(todos, list) else [], self.table, False)}
        return by_role


# Our tools' argument names -> the adapter role they come from, to name in an error the
# argument the model actually sent (pi's oldText rather than our old_string).
# (Only names no path or message would contain by chance.)
_OUR_ARGS = {"old_string": "old", "new_string": "new", "replace_all": "replace_all",
             "timeout_ms": "timeout_ms"}


def _in_own_words(message: str, table: ToolTable, target: str) -> str:
    """An error from one of our tools, worded with the emulated tool's names."""
    from codemode.harnesses.present import arg_for_role

    if target and message.startswith(f"{target}: "):
        message = f"{table.name}: " + message[len(target) + 2 :]
    for ours, role in _OUR_ARGS.items():
        theirs = arg_for_role(table, role)
        if theirs and theirs != ours:
            message = re.sub(rf"(?<![\w/.-]){re.escape(ours)}(?![\w/.-])", theirs, message)
    return message


def _roles(values: dict[str, Any], table: ToolTable) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in values.items():
        role = table.roles.get(name, name)
        if role != "drop":
            out[role] = value
    return out


def adapter_tool(table: ToolTable, base: ToolRegistry, *, text: bool = False) -> AdapterTool:
    """The adapter for one emulated tool, calling through ``base``. With ``text``, each
    result also carries ``output``: the text a direct call would have shown."""
    from codemode.harnesses.present import render_value

    if table.adapter not in ADAPTERS:
        raise ValueError(f"tool {table.name}: unknown adapter {table.adapter!r}")
    target, translate = ADAPTERS[table.adapter]
    model = model_from_schema(pascal(table.name) + "Args", table.parameters)
    target_tool = base.get(target) if target else None
    result_model = (
        target_tool.result_model if target_tool is not None else ADAPTER_RESULTS.get(table.adapter)
    )
    if text and result_model is not None and "output" not in result_model.model_fields:
        result_model = create_model(
            pascal(table.name) + "Result",
            __base__=result_model,
            output=(str, Field(description="The result as text, as a direct call shows it.")),
        )

    state: dict[str, Any] = {}  # this tool's memory for the session (a todo list, a terminal)

    async def handler(args: BaseModel, ctx: ToolContext) -> object:
        called: list[str] = []  # our tools this call used, in order: the last one answered

        async def invoke(name: str, raw: dict[str, object]) -> Any:
            called.append(name)
            return await base.invoke(name, raw, ctx)

        values = args.model_dump(by_alias=True, exclude_none=True)
        try:
            value = await translate(_roles(values, table), table, invoke, state)
        except ToolError as exc:
            raise ToolError(_in_own_words(str(exc), table, target)) from None
        producer = target_tool or (base.get(called[-1]) if called and not target else None)
        # An adapter that may answer with several of our tools (str_replace_editor) says
        # in its result which text that tool shows, as a result_text surface does.
        if (text or (not target and producer is not None)) and isinstance(value, dict) and (
            "output" not in value
        ):
            value = {**value, "output": render_value(table, producer, values, value)}
        return value

    # A call shows as the call of ours it stands for (a command, a plan, a file read).
    traits: Traits = ADAPTER_TRAITS.get(table.adapter, {})
    if target_tool is not None:
        traits = {
            "effect": target_tool.effect,
            "effects": target_tool.effects,
            "dry_run": target_tool.dry_run,
            "item": target_tool.item,
            "acp_kind": target_tool.acp_kind,
        }
    return AdapterTool(
        name=table.name,
        description=unwrap(table.description),
        args_model=model,
        result_model=result_model,
        handler=handler,
        parameters=table.parameters,
        target=target,
        table=table,
        target_tool=target_tool,
        **traits,
    )


def adapter_registry(harness: HarnessTable, base: ToolRegistry) -> ToolRegistry:
    """The registry a harness's session uses: its adapters, then the session's other tools."""
    base = base.copy()
    if base.get("edit") is None:
        base.add_lazy("edit", "codemode.tools.edit:EDIT")
    registry = ToolRegistry()
    for table in harness.tools:
        registry.add(adapter_tool(table, base, text=harness.result_text))
    for name in base.names():
        tool = base.get(name)
        assert tool is not None
        if not tool.core and name not in registry.names():
            registry.add(tool)
    return registry


def find_tool(registry: ToolRegistry, name: str) -> Tool | None:
    """The definition of ``name`` in a session whose tools are ``registry``: one of its
    tools, or one of ours that an emulated tool stands in front of (an approval asks
    about the canonical call, ``shell``, while the session offers ``Bash``)."""
    tool = registry.get(name)
    if tool is not None:
        return tool
    for offered in registry:
        if isinstance(offered, AdapterTool) and offered.target == name:
            return offered.target_tool
    return None
