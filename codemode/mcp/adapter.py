"""An MCP server's tools as registry tools: ``mcp__SERVER__TOOL``, ``tools.SERVER.TOOL``.

The server's ``inputSchema`` / ``outputSchema`` stand in for the pydantic models a
built-in tool has, so the classic dialect's JSON schema, the code dialect's TypeScript
declarations and argument checking all come from what the server published. A call
returns ``structuredContent`` when the server gives it, else the content blocks
(``CallToolResult``); a result marked ``isError`` rejects with a ToolError.
"""

from __future__ import annotations

import copy
import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from codemode.mcp.client import McpManager
from codemode.mcp.connection import ServerStatus
from codemode.tools.base import Tool, Trust
from codemode.tools.context import ToolContext, ToolError
from codemode.tools.registry import NAMESPACE_PREFIX, ToolRegistry, code_name

if TYPE_CHECKING:
    from jsonschema.protocols import Validator
    from mcp.types import CallToolResult as McpCallToolResult
    from mcp.types import Tool as McpToolSpec

# Schemas nested deeper than this are cut to "any" (a hostile server's 10,000 levels
# would otherwise overflow the stack of every writer that walks them).
MAX_SCHEMA_DEPTH = 48
# OpenAI-style wires cap function names at 64 characters.
_MAX_NAME = 64


class _SchemaModel(BaseModel):
    """Arguments or result described by a JSON schema we were given, not by fields."""

    model_config = ConfigDict(extra="allow")
    json_schema: ClassVar[dict[str, Any]] = {}

    @classmethod
    def model_json_schema(cls, *args: object, **kwargs: object) -> dict[str, Any]:
        return copy.deepcopy(cls.json_schema)


def schema_model(name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """A model whose JSON schema is ``schema`` and which accepts any object."""
    return type(name, (_SchemaModel,), {"json_schema": schema, "__module__": __name__})


# What a result without an output schema looks like to a program (the MCP content blocks).
class TextContent(BaseModel):
    type: Literal["text"]
    text: str


class ImageContent(BaseModel):
    type: Literal["image"]
    data: str
    mimeType: str


class AudioContent(BaseModel):
    type: Literal["audio"]
    data: str
    mimeType: str


class ResourceLink(BaseModel):
    type: Literal["resource_link"]
    uri: str
    name: str
    mimeType: str | None = None


class ResourceContents(BaseModel):
    uri: str
    mimeType: str | None = None
    text: str | None = None
    blob: str | None = None


class EmbeddedResource(BaseModel):
    type: Literal["resource"]
    resource: ResourceContents


class CallToolResult(BaseModel):
    """A tool result as content blocks: text, images, audio, resources."""

    ts_name: ClassVar[str] = "CallToolResult"
    content: list[TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource]


def identifier(text: str) -> str:
    """``text`` as a JavaScript identifier: other characters become ``_``."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", text) or "_"
    return "_" + ident if ident[0].isdigit() else ident


def registry_name(server: str, tool: str) -> str:
    """``mcp__SERVER__TOOL``, shortened with a hash when a wire would refuse its length."""
    name = f"{NAMESPACE_PREFIX}{server}__{identifier(tool).strip('_') or 'tool'}"
    if len(name) > _MAX_NAME:
        digest = hashlib.sha1(name.encode()).hexdigest()[:8]
        name = f"{name[: _MAX_NAME - 9]}_{digest}"
    return name


def normalize_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    """A server's schema in the shape the wires and the declaration writer accept.

    ``definitions`` become ``$defs``; refs we cannot follow become "any"; titles go
    (they would name TypeScript interfaces, and two servers may use the same ones).
    """
    if not schema:
        return {"type": "object", "properties": {}}
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}

    def ref(target: str) -> str | None:
        for prefix in ("#/$defs/", "#/definitions/"):
            if target.startswith(prefix) and target[len(prefix) :] in defs:
                return "#/$defs/" + target[len(prefix) :]
        return None

    def walk(node: Any, depth: int = 0) -> Any:
        if not isinstance(node, dict):
            return node
        if depth > MAX_SCHEMA_DEPTH:
            return {}  # deeper than any real schema: "any" from here down
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("title", "$schema", "definitions", "$defs", "$id"):
                continue
            if key == "$ref":
                fixed = ref(str(value))
                if fixed is None:
                    return {}
                out[key] = fixed
            elif key in ("properties", "patternProperties") and isinstance(value, dict):
                out[key] = {k: walk(v, depth + 1) for k, v in value.items()}
            elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
                out[key] = walk(value, depth + 1)
            elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
                out[key] = [walk(v, depth + 1) for v in value]
            else:
                out[key] = value
        return out

    result: dict[str, Any] = walk(schema)
    result.setdefault("type", "object")
    result.setdefault("properties", {})
    if defs:
        result["$defs"] = {k: walk(v) for k, v in defs.items()}
    return result


def content_blocks(result: McpCallToolResult) -> list[dict[str, Any]]:
    """The result's content blocks (text, image, audio, resource...) as JSON data."""
    return [
        b.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"meta"})
        for b in result.content
    ]


def result_data(result: McpCallToolResult, display: str) -> object:
    """A call's result as a program sees it; ``isError`` becomes a ToolError."""
    if result.is_error:
        texts = [b.text for b in result.content if b.type == "text"]
        message = " ".join(texts).strip() or "the tool reported an error"
        raise ToolError(f"tools.{display}: {message}")
    if result.structured_content is not None:
        return result.structured_content
    return {"content": content_blocks(result)}


def _argument_problems(validator: Validator, args: dict[str, Any]) -> list[str]:
    problems = []
    for err in sorted(validator.iter_errors(args), key=lambda e: list(e.path)):
        where = ".".join(str(p) for p in err.path)
        problems.append(f'"{where}": {err.message}' if where else err.message)
    return problems


def mcp_tool(
    manager: McpManager, server: str, spec: McpToolSpec, name: str, trust: Trust = "untrusted"
) -> Tool:
    """The registry tool ``name`` calling ``spec`` on ``server``, trusted as ``trust``
    (the server's ``trust`` config; see ``codemode.tools.base.Trust``)."""
    display = code_name(name)
    input_schema = normalize_schema(spec.input_schema)
    args_model = schema_model(f"{name}_args", input_schema)
    result_model = (
        schema_model(f"{name}_result", normalize_schema(spec.output_schema))
        if spec.output_schema
        else CallToolResult
    )
    checker: list[Validator] = []

    async def handler(args: BaseModel, ctx: ToolContext) -> object:
        raw = args.model_dump()
        if not checker:
            import jsonschema  # lazy: jsonschema, with the first MCP call

            cls = jsonschema.validators.validator_for(input_schema, jsonschema.Draft202012Validator)
            checker.append(cls(input_schema))
        problems = _argument_problems(checker[0], raw)
        if problems:
            raise ToolError(f"tools.{display}: " + "; ".join(problems))
        result = await manager.call(server, spec.name, raw)
        value = result_data(result, display)
        if ctx.mcp_result is not None:  # the caller reports the server's own blocks
            ctx.mcp_result(content_blocks(result), result.structured_content)
        return value

    description = (spec.description or spec.title or "").strip()
    return Tool(
        name,
        description,
        args_model,
        result_model,
        handler,
        trust=trust,
        item="mcp_tool_call",
        render=text_content,
    )


def text_content(result: dict[str, object]) -> str | None:
    """An MCP result of text blocks only, as its text; None (shown as JSON) otherwise."""
    blocks = result.get("content")
    if set(result) != {"content"} or not isinstance(blocks, list):
        return None
    if not all(isinstance(b, dict) and b.get("type") == "text" for b in blocks):
        return None
    return "\n".join(str(b.get("text", "")) for b in blocks)


def add_mcp_tools(registry: ToolRegistry, manager: McpManager) -> list[ServerStatus]:
    """Start the enabled servers and register their tools; the statuses say what happened.

    A server that fails to start contributes no tools (its status carries the reason);
    a server whose name is already a tool's is skipped, since ``tools.NAME`` would be both.
    """
    statuses = manager.start_all()
    for status in statuses:
        if status.state != "ready":
            continue
        if status.name in registry.flat_names():
            status.error = f"not added: {status.name} is already a tool's name"
            continue
        config = manager.servers[status.name].config
        for spec in status.tools:
            if config.wants_tool(spec.name):
                name = registry_name(status.name, spec.name)
                while name in registry.names():
                    name += "_"
                trust = config.trust or "untrusted"
                registry.add(mcp_tool(manager, status.name, spec, name, trust))
                if spec.annotations is not None and spec.annotations.read_only_hint:
                    manager.read_only_tools.add(name)
    return statuses


def add_configured_servers(
    registry: ToolRegistry, tables: dict[str, dict[str, Any]], log_dir: Path
) -> tuple[McpManager, list[ServerStatus]]:
    """Validate ``[mcp_servers.*]``, start the servers and register their tools."""
    from codemode.mcp.config import parse_mcp_servers

    manager = McpManager(parse_mcp_servers(tables), log_dir)
    registry.on_close(manager.close)
    return manager, add_mcp_tools(registry, manager)
