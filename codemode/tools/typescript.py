"""TypeScript declarations for the code dialect, generated from the tools' pydantic models."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from codemode.tools.doc_text import jsdoc
from codemode.tools.registry import ToolRegistry, split_namespace


def _pascal(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


class _Emitter:
    def __init__(self) -> None:
        self.interfaces: dict[str, str] = {}

    def model(self, model: type[BaseModel], name: str) -> str:
        schema = model.model_json_schema(mode="serialization")
        self._defs = schema.get("$defs", {})
        self.object(schema, name)
        return name

    def object(self, schema: dict[str, Any], name: str) -> str:
        if name in self.interfaces:
            return name
        self.interfaces[name] = ""  # reserve, for recursive models
        required = set(schema.get("required", []))
        lines = [f"interface {name} {{"]
        for prop, sub in schema.get("properties", {}).items():
            doc = sub.get("description")
            if doc:
                lines.append(jsdoc(doc, "  "))
            opt = "" if prop in required else "?"
            key = prop if prop.isidentifier() else json.dumps(prop)  # e.g. "-i"
            lines.append(f"  {key}{opt}: {self.type(sub, name + _pascal(prop))};")
        lines.append("}")
        self.interfaces[name] = "\n".join(lines)
        return name

    def type(self, s: dict[str, Any], hint: str) -> str:
        if "$ref" in s:
            ref = s["$ref"].rsplit("/", 1)[-1]
            return self.object(self._defs[ref], ref)
        if "const" in s:
            return json.dumps(s["const"])
        if "enum" in s:
            return " | ".join(json.dumps(v) for v in s["enum"])
        for key in ("anyOf", "oneOf"):
            if key in s:
                return " | ".join(self.type(sub, hint) for sub in s[key])
        t = s.get("type")
        if isinstance(t, list):  # JSON Schema's ["string", "null"] (MCP servers use it)
            return " | ".join(self.type({**s, "type": one}, hint) for one in t) or "unknown"
        if t == "string":
            return "string"
        if t in ("integer", "number"):
            return "number"
        if t == "boolean":
            return "boolean"
        if t == "null":
            return "null"
        if t == "array":
            item = self.type(s.get("items", {}), hint + "Item")
            return f"({item})[]" if "|" in item else f"{item}[]"
        if t == "object":
            if "properties" in s:
                return self.object(s, s.get("title") or hint)
            extra = s.get("additionalProperties")
            value = self.type(extra, hint + "Value") if isinstance(extra, dict) else "unknown"
            return f"Record<string, {value}>"
        return "unknown"


def typescript_declarations(registry: ToolRegistry) -> str:
    """Declarations of ``tools.*`` as the program in the isolate sees them.

    Namespaced tools (``mcp__NS__NAME``) are declared as ``tools.NS.NAME``. A result
    model may name its interface with a ``ts_name`` class attribute (MCP tools without
    an output schema share one ``CallToolResult``).
    """
    emit = _Emitter()
    methods = []
    spaces: dict[str, list[str]] = {}
    for tool in registry:
        args = emit.model(tool.args_model, _pascal(tool.name) + "Args")
        result = (
            emit.model(
                tool.result_model,
                getattr(tool.result_model, "ts_name", None) or _pascal(tool.name) + "Result",
            )
            if tool.result_model is not None
            else "unknown"
        )
        if tool.freeform_field is not None:
            args = f"string | {args}"  # the text itself, or the object holding it
        parts = split_namespace(tool.name)
        if parts is None:
            doc = jsdoc(tool.description, "  ")
            methods.append(f"{doc}\n  {tool.name}(args: {args}): Promise<{result}>;")
        else:
            doc = jsdoc(tool.description, "    ")
            spaces.setdefault(parts[0], []).append(
                f"{doc}\n    {parts[1]}(args: {args}): Promise<{result}>;"
            )
    for ns, members in spaces.items():
        joined = "\n".join(members)
        methods.append(f"  /** Tools of the MCP server {ns}. */\n  {ns}: {{\n{joined}\n  }};")
    body = "\n".join(methods)
    decls = "\n\n".join(v for v in emit.interfaces.values() if v)
    return (
        f"{decls}\n\n"
        "/** Tools provided by the host. Each call returns a Promise of a structured result;\n"
        " * a failed call rejects with a ToolError whose message says what went wrong. */\n"
        f"declare const tools: {{\n{body}\n}};\n\n"
        "/** Raised (as a rejected Promise) when a tool call fails. */\n"
        "declare class ToolError extends Error { tool: string; }\n"
        "/** Arguments given after the script name to `interpreter run`. */\n"
        "declare const argv: string[];\n"
    )
