"""Every surface a tool is offered on, derived from its one definition (``Tool``).

- classic dialect (OpenAI / Anthropic function tools): ``function_spec`` -- name,
  description, ``parameters`` (the args model's schema, or the one a harness table
  writes out), freeform text and its grammar;
- what a function-calling wire sends: ``wire_schema`` (``interpreter tools --json``);
- code dialect, and the MCP server's ``execute`` and ``describe_tool``:
  ``declarations`` / ``declaration``, TypeScript from the args and result models;
- event items, ACP kinds, classic-dialect text: the traits themselves (``Tool.item``,
  ``Tool.acp_kind``, ``Tool.render``), read where they are used.

Nothing here, nor anywhere else, keys a tool by its name.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from codemode.tool_terms.spec import FreeformSpec, ToolSpec, function_parameters
from codemode.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from codemode.tools.base import Tool


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[-1]]
            return _inline({k: v for k, v in target.items() if k != "title"}, defs)
        return {k: _inline(v, defs) for k, v in node.items() if k not in ("title", "$defs")}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def parameters_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema with ``$ref``s inlined and titles dropped.

    Several providers reject ``$defs``/``$ref`` in function parameters, and titles
    only cost the model tokens.
    """
    text = _SCHEMAS.get(model)
    if text is None:
        schema = model.model_json_schema()
        text = _SCHEMAS[model] = json.dumps(_inline(schema, schema.get("$defs", {})))
    inlined: dict[str, Any] = json.loads(text)  # a copy of its own for each caller
    return inlined


# A model's schema, found once a process: pydantic builds it anew on every call (~5 ms for
# `exec`'s on every session's start); a warm server's runs share what it found.
_SCHEMAS: dict[type[BaseModel], str] = {}


def parameters(tool: Tool) -> dict[str, Any]:
    """The JSON schema of ``tool``'s arguments as the classic dialect offers it."""
    return tool.parameters if tool.parameters is not None else parameters_schema(tool.args_model)


def function_spec(tool: Tool, *, freeform: bool = True) -> ToolSpec:
    """``tool`` as a function tool; with ``freeform``, a tool that takes raw text
    (apply_patch) is offered as such on wires that have freeform tools."""
    spec = None
    if freeform and tool.freeform_field is not None:
        spec = FreeformSpec(field=tool.freeform_field, grammar=tool.grammar)
    return ToolSpec(
        name=tool.name, description=tool.description, parameters=parameters(tool), freeform=spec
    )


def function_specs(tools: Iterable[Tool], *, freeform: bool = True) -> list[ToolSpec]:
    return [function_spec(tool, freeform=freeform) for tool in tools]


def wire_schema(spec: ToolSpec) -> dict[str, Any]:
    """The function a chat-completions or Anthropic wire sends for ``spec``: name,
    description and parameters exactly as they go out (a freeform tool as the object
    holding its text)."""
    return {
        "name": spec.name,
        "description": spec.description,
        "parameters": function_parameters(spec),
    }


def declarations(registry: ToolRegistry, *, standalone: bool = False) -> str:
    """TypeScript declarations of ``tools.*`` as a program in the isolate sees them."""
    from codemode.tools.typescript import typescript_declarations

    return typescript_declarations(registry, standalone=standalone)


def declaration(tool: Tool) -> str:
    """One tool's declarations (its interfaces and its ``tools.*`` member), without the
    shared preamble that ends every file of declarations."""
    return declarations(ToolRegistry([tool])).split("\n/** Raised")[0].strip()
