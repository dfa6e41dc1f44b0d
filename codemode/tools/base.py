"""The one definition of a tool, from which every surface is generated.

A tool is a name, a description, a pydantic model for its arguments, a pydantic model
for its result, and an async handler. The classic dialect (JSON schema), the code
dialect (``tools.<name>()`` in the isolate plus TypeScript declarations) and, later,
the MCP server are all derived from this one object.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

# Re-exported: tool modules import both from here, with the definition helpers.
from codemode.tools.context import ToolContext as ToolContext
from codemode.tools.context import ToolError as ToolError


class StrictArgs(BaseModel):
    """Base for argument models: unknown fields are an error, so a misspelt field
    name is reported instead of silently ignored."""

    # Validators are built on first use, not at import: `interpreter run` of a script
    # that calls two tools should not pay for building all of them.
    model_config = ConfigDict(extra="forbid", defer_build=True)


class ToolResult(BaseModel):
    """Base for result models (built lazily, like StrictArgs)."""

    model_config = ConfigDict(defer_build=True)


Handler = Callable[[Any, ToolContext], Awaitable[Any]]

# How far a tool is trusted, which decides whether the sandbox session lets a call
# through (codemode.sandbox.tool_trust). "host": code of this process that checks what
# it does itself (the built-ins: the shell goes through the execpolicy, the file tools
# through the writable roots; an embedder's own tools). The others are for tools the
# program reaches outside it (an MCP server's), as that server's `trust` config says:
# "read" (only reads: allowed in every mode), "write" (may change things: refused in
# read-only, asked about under untrusted), "untrusted" (nothing said: refused in
# read-only, asked about unless the approval policy is never).
Trust = Literal["host", "read", "write", "untrusted"]
# What a call can do, for surfaces that decide without running it (mcp-server's policy,
# dry runs): "read" only looks, "write" changes files, "run" may do anything (commands,
# a tool whose effect nobody declared).
Effect = Literal["read", "write", "run"]


@dataclass(frozen=True)
class Tool:
    """A tool, defined once. ``handler(args, ctx)`` receives a validated ``args_model``."""

    name: str
    description: str
    args_model: type[BaseModel]
    result_model: type[BaseModel] | None
    handler: Handler
    # The one string field a raw-text call fills: with it, `tools.x("text")` means
    # `tools.x({field: "text"})`, and wires with freeform tools send the text as is.
    freeform_field: str | None = None
    # A lark grammar for that text, for wires that constrain freeform tool input.
    grammar: str | None = None
    trust: Trust = "host"
    effect: Effect = "run"
    # True for a writer that records into ``ToolContext.dry_run`` instead of writing
    # (codemode.tools.dry_run lets only these and readers run in a dry run).
    dry_run: bool = False

    def validate(self, raw: Any) -> BaseModel:
        """Validate raw JSON arguments; raises ToolError naming the offending fields."""
        if raw is None:
            raw = {}
        if isinstance(raw, str) and self.freeform_field is not None:
            raw = {self.freeform_field: raw}
        if not isinstance(raw, dict):
            raise ToolError(
                f"tools.{self.name}: expected an object of arguments, got {_js_type(raw)}"
            )
        try:
            return self.args_model.model_validate(raw)
        except ValidationError as exc:
            raise ToolError(describe_validation_error(self, exc)) from None

    async def call(self, raw_args: Any, ctx: ToolContext) -> Any:
        """Validate, run the handler and return a JSON-ready result."""
        args = self.validate(raw_args)
        result = await self.handler(args, ctx)
        return to_json(result)


def to_json(value: Any) -> Any:
    """Turn a handler's result into plain JSON data."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value


def _js_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


_TYPE_WORDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "a boolean",
    "bool_parsing": "a boolean",
    "list_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
}


def describe_validation_error(tool: Tool, exc: ValidationError) -> str:
    """One line per problem, each naming the field, e.g. ``"command" is required``."""
    problems = []
    fields = sorted(tool.args_model.model_fields)
    for err in exc.errors():
        loc = ".".join(str(part) for part in err["loc"]) or "(arguments)"
        kind = err["type"]
        if kind == "missing":
            problems.append(f'"{loc}" is required')
        elif kind == "extra_forbidden":
            problems.append(f'unknown field "{loc}" (fields: {", ".join(fields)})')
        elif kind in _TYPE_WORDS:
            got = _js_type(err.get("input"))
            problems.append(f'"{loc}" must be {_TYPE_WORDS[kind]}, got {got}')
        else:
            problems.append(f'"{loc}": {err["msg"]}')
    return f"tools.{tool.name}: " + "; ".join(problems)


def define_tool(
    fn: Callable[..., Awaitable[Any]],
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool:
    """Build a Tool from a plain async function, the way embedders write them.

    Either the function takes one pydantic-model parameter (the arguments), optionally
    followed by a ``ToolContext``; or it takes keyword parameters with type hints, from
    which the argument model is generated.
    """
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"tool {fn.__name__!r} must be an async function")
    tool_name = name or fn.__name__
    doc = description or inspect.getdoc(fn) or ""
    hints = get_type_hints(fn)
    params = [p for p in inspect.signature(fn).parameters.values() if p.name != "return"]
    wants_ctx = [p.name for p in params if hints.get(p.name) is ToolContext]
    data_params = [p for p in params if hints.get(p.name) is not ToolContext]
    result_hint = hints.get("return")
    result_model = (
        result_hint
        if isinstance(result_hint, type) and issubclass(result_hint, BaseModel)
        else None
    )

    first = hints.get(data_params[0].name) if len(data_params) == 1 else None
    if isinstance(first, type) and issubclass(first, BaseModel):
        args_model: type[BaseModel] = first
        arg_name = data_params[0].name

        async def handler(args: BaseModel, ctx: ToolContext) -> Any:
            extra = {n: ctx for n in wants_ctx}
            return await fn(**{arg_name: args}, **extra)

    else:
        model_fields: dict[str, Any] = {}
        for p in data_params:
            default = ... if p.default is inspect.Parameter.empty else p.default
            model_fields[p.name] = (hints.get(p.name, Any), default)
        args_model = create_model(
            f"{tool_name}_args", __base__=StrictArgs, **model_fields
        )

        async def handler(args: BaseModel, ctx: ToolContext) -> Any:
            values = {p.name: getattr(args, p.name) for p in data_params}
            extra = {n: ctx for n in wants_ctx}
            return await fn(**values, **extra)

    return Tool(tool_name, doc, args_model, result_model, handler)
