"""The one definition of a tool, from which every surface is generated.

A tool is a name, a description, a pydantic model for its arguments, a pydantic model
for its result, an async handler, and its traits: what it may do (``effects``), which
event item a call becomes, how an editor shows it, how its result reads as text. Every
surface is derived from this one object (``codemode.tools.surfaces``): the classic
dialect's JSON schema, the code dialect's ``tools.<name>()`` and TypeScript
declarations, the MCP server's tool list, harness tables, ACP kinds; no other module
keeps a list of tool names.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

# Re-exported: how a handler's result becomes JSON (one stated rule).
from codemode.tools.annotations import NotJson, check_annotation, check_model, result_model
from codemode.tools.annotations import to_json as to_json

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
# through (codemode.sandbox.approvals.tool_trust). "host": code of this process that checks what
# it does itself (the built-ins: the shell goes through the execpolicy, the file tools
# through the writable roots; an embedder's own tools). The others are for tools the
# program reaches outside it (an MCP server's), as that server's `trust` config says:
# "read" (only reads: allowed in every mode), "write" (may change things: refused in
# read-only, asked about under untrusted), "untrusted" (nothing said: refused in
# read-only, asked about unless the approval policy is never).
Trust = Literal["host", "read", "write", "untrusted"]
# What a call can do, for surfaces that decide without running it (mcp-server's policy,
# dry runs): "read" looks at files, "write" changes them, "execute" runs commands (so may
# do anything), "network" reaches other machines.
Effect = Literal["read", "write", "execute", "network"]
# The same as one word, for the checks that only ask "may it change anything?": "read"
# only looks, "write" changes files and nothing else, "run" may do anything (commands, the
# network, a tool whose effects nobody declared).
Access = Literal["read", "write", "run"]
# The event item a call becomes (``codemode.agent.items``): the ``type`` of an item in
# ``codemode.agent.events``.
ItemKind = Literal["command_execution", "file_change", "todo_list", "mcp_tool_call", "tool_call"]
# How an ACP client (an editor) shows the call: ACP's ``ToolKind`` values.
AcpKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode",
    "other",
]
# A result (the JSON a call returned) as the text a model reads in the classic dialect;
# None: not a shape it renders (then it is shown as JSON).
Render = Callable[[dict[str, Any]], str | None]

_ACCESS_EFFECTS: dict[str, frozenset[Effect]] = {
    "read": frozenset({"read"}),
    "write": frozenset({"write"}),
    "run": frozenset({"execute"}),
}


def access_of(effects: frozenset[Effect]) -> Access:
    """The one-word summary of ``effects``."""
    if not effects or effects & {"execute", "network"}:
        return "run"
    return "write" if "write" in effects else "read"


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
    # The arguments' JSON schema as the classic dialect offers it, when it is written out
    # rather than generated from ``args_model`` (an emulated tool's, from its harness
    # table); see ``codemode.tools.surfaces.parameters``.
    parameters: dict[str, Any] | None = None
    trust: Trust = "host"
    # What a call can do: ``effects`` as declared, ``effect`` its one-word summary
    # (derived from ``effects`` when they are given; a definition may give either, and
    # the default is "run"). ``effect_set`` is the set whichever was given.
    effect: Access = "run"
    effects: frozenset[Effect] = frozenset()
    # True for a writer that records into ``ToolContext.dry_run`` instead of writing
    # (codemode.tools.dry_run lets only these and readers run in a dry run).
    dry_run: bool = False
    # The event item a call becomes, and how an editor (ACP) shows it.
    item: ItemKind = "tool_call"
    acp_kind: AcpKind = "other"
    # The result as text for the classic dialect; None: shown as compact JSON.
    render: Render | None = None
    # One of the agent's own core tools: an emulated harness offers its own tools in
    # their place (codemode.harnesses.adapters); others (an MCP server's, an embedder's)
    # are offered next to them unchanged.
    core: bool = False
    # The names hooks written for Claude Code and Codex match this tool by ("Bash" for
    # the shell); the first is the ``tool_name`` a hook's input gives (codemode.hooks).
    hook_names: tuple[str, ...] = ()
    # For a tool whose arguments have no fields: the arguments every empty call gets,
    # once the first one has been validated (not a trait: no surface sees it).
    _no_arguments: BaseModel | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.effects:
            effects = frozenset(self.effects)
            derived = access_of(effects)
            if self.effect not in ("run", derived):
                raise ValueError(
                    f"tool {self.name}: effect={self.effect!r} contradicts "
                    f"effects={sorted(effects)}"
                )
            object.__setattr__(self, "effects", effects)
            object.__setattr__(self, "effect", derived)

    @property
    def effect_set(self) -> frozenset[Effect]:
        """What a call can do: the declared ``effects``, else what ``effect`` implies."""
        return self.effects or _ACCESS_EFFECTS[self.effect]

    def item_args(self, raw: object) -> object:
        """The call's arguments in our own tools' shapes, for its event item (an
        emulated harness's tool translates its own; ours are that shape already)."""
        return raw

    def text(self, value: object) -> str | None:
        """``value`` (this tool's JSON result) as text, or None when the tool has no
        renderer or the value is not the shape it renders (then callers show JSON)."""
        if self.render is None or not isinstance(value, dict):
            return None
        try:
            text = self.render(value)
        except Exception:  # an unexpected shape, or a broken renderer: JSON, not a failure
            return None
        return text if isinstance(text, str) else None

    def validate(self, raw: object) -> BaseModel:
        """Validate raw JSON arguments; raises ToolError naming the offending fields."""
        if raw is None:
            raw = {}
        if isinstance(raw, str) and self.freeform_field is not None:
            raw = {self.freeform_field: raw}
        if not isinstance(raw, dict):
            raise ToolError(
                f"tools.{self.name}: expected an object of arguments, got {_js_type(raw)}"
            )
        if not raw:
            # A tool without arguments, called as such: validated once, the same
            # (field-less, immutable) arguments every call after.
            empty = self._no_arguments
            if empty is not None:
                return empty
        try:
            args = self.args_model.model_validate(raw)
        except ValidationError as exc:
            raise ToolError(describe_validation_error(self, exc)) from None
        if not raw and not type(args).model_fields and not args.model_extra:
            object.__setattr__(self, "_no_arguments", args)
        return args

    async def call(self, raw_args: object, ctx: ToolContext) -> Any:
        """Validate, run the handler and return a JSON-ready result."""
        args = self.validate(raw_args)
        result = await self.handler(args, ctx)
        try:
            return to_json(result)
        except NotJson as exc:
            raise ToolError(f"tools.{self.name} {exc}") from None


def _call_async(fn: Callable[..., Any]) -> Callable[[dict[str, Any]], Awaitable[object]]:
    def call(kwargs: dict[str, Any]) -> Awaitable[object]:
        return fn(**kwargs)  # type: ignore[no-any-return]

    return call


def _js_type(value: object) -> str:
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
    fn: Callable[..., object],
    *,
    name: str | None = None,
    description: str | None = None,
    effects: frozenset[Effect] = frozenset(),
    item: ItemKind = "tool_call",
    acp_kind: AcpKind = "other",
    render: Render | None = None,
) -> Tool:
    """Build a Tool from a plain or async function, the way embedders write them.

    Either the function takes one pydantic-model parameter (the arguments), optionally
    followed by a ``ToolContext``; or it takes keyword parameters with type hints, from
    which the argument model is generated. A plain (not async) function runs in a worker
    thread, so it may block without stalling the event loop. The return annotation
    declares the result (``float``, ``list[str]``, a TypedDict, a pydantic model...).
    Every annotation is checked here: one that cannot be declared raises TypeError now.
    The traits (``effects``, ``item``, ``acp_kind``, ``render``) are those of ``Tool``;
    a tool that declares no effects may do anything ("run").
    """
    if not callable(fn):
        raise TypeError(f"a tool must be a function, got {type(fn).__name__}")
    tool_name = name or getattr(fn, "__name__", None) or type(fn).__name__
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    )
    doc = description or inspect.getdoc(fn) or ""
    try:
        hints = get_type_hints(fn)
    except Exception as exc:  # a name the annotations use that cannot be resolved
        raise TypeError(f"tool {tool_name!r}: its annotations cannot be read: {exc}") from None
    params = [p for p in inspect.signature(fn).parameters.values() if p.name != "return"]
    wants_ctx = [p.name for p in params if hints.get(p.name) is ToolContext]
    data_params = [p for p in params if hints.get(p.name) is not ToolContext]
    for p in data_params:  # each alone first, so that an error names the bad one
        check_annotation(hints.get(p.name, Any), tool_name, f"parameter {p.name!r} annotated")
    results = result_model(hints.get("return", inspect.Parameter.empty), tool_name)

    # Each returns the function's own coroutine for an async one (the handler is not a
    # coroutine awaiting it): two frames fewer on every call.
    call: Callable[[dict[str, Any]], Awaitable[object]]
    if is_async:
        call = _call_async(fn)
    else:

        async def call(kwargs: dict[str, Any]) -> object:
            # A plain function may block (a database call, a file read): not on the loop.
            value = await asyncio.to_thread(fn, **kwargs)
            return await value if inspect.isawaitable(value) else value

    first = hints.get(data_params[0].name) if len(data_params) == 1 else None
    handler: Handler
    if isinstance(first, type) and issubclass(first, BaseModel):
        args_model: type[BaseModel] = first
        arg_name = data_params[0].name

        def handler(args: BaseModel, ctx: ToolContext) -> Awaitable[object]:
            kwargs: dict[str, Any] = {arg_name: args}
            for n in wants_ctx:
                kwargs[n] = ctx
            return call(kwargs)

    else:
        model_fields: dict[str, Any] = {}
        for p in data_params:
            default = ... if p.default is inspect.Parameter.empty else p.default
            model_fields[p.name] = (hints.get(p.name, Any), default)
        try:
            args_model = create_model(
                f"{tool_name}_args", __base__=StrictArgs, **model_fields
            )
        except Exception as exc:
            raise TypeError(f"tool {tool_name!r}: its parameters: {exc}") from None
        names = [p.name for p in data_params]

        def handler(args: BaseModel, ctx: ToolContext) -> Awaitable[object]:
            kwargs = {name: getattr(args, name) for name in names} if names else {}
            for n in wants_ctx:
                kwargs[n] = ctx
            return call(kwargs)

    check_model(args_model, tool_name, "arguments")
    return Tool(
        tool_name, doc, args_model, results, handler,
        effects=effects, item=item, acp_kind=acp_kind, render=render,
    )
