"""TypeScript declarations for the code dialect, generated from the tools' pydantic models."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel

from codemode.tools.doc_text import first_sentence, jsdoc
from codemode.tools.registry import ToolRegistry, split_namespace


def _pascal(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _ident(name: str) -> str:
    """``name`` as a TypeScript type name (a schema's ``$defs`` key can be anything)."""
    parts = re.split(r"[^A-Za-z0-9_$]+", name)
    ident = "".join(p[:1].upper() + p[1:] for p in parts if p) or "Type"
    return "T" + ident if ident[0].isdigit() else ident


# Names the declarations must not take: global types of TypeScript's standard library
# (an `interface Promise` or `interface Array` would merge with the real one) and our own.
_RESERVED = frozenset(
    "Array ArrayBuffer BigInt Boolean DataView Date Error EvalError Function Iterable "
    "Iterator JSON Map Math Number Object Partial Pick Omit Promise PromiseLike Proxy "
    "RangeError Readonly ReadonlyArray Record ReferenceError Reflect RegExp Required Set "
    "String Symbol SyntaxError TypeError URIError WeakMap WeakRef WeakSet ToolError "
    "Uint8Array Int8Array Float32Array Float64Array Exclude Extract NonNullable "
    "ReturnType Parameters Awaited Console".split()
)


# Deeper types are written as ``unknown``: no real schema nests this far, and a hostile
# one must not overflow the stack.
_MAX_DEPTH = 64


def _key(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class _Emitter:
    """Writes one interface per distinct shape: a name is never given to two shapes
    (the second ``Item`` becomes ``Item2``), and the same shape under the same name is
    written once."""

    def __init__(self, *, field_docs: bool = True) -> None:
        self.field_docs = field_docs
        self.interfaces: dict[str, str] = {}
        self._shapes: dict[tuple[str, str], str] = {}  # (wanted name, shape) -> name
        self._defs: dict[str, Any] = {}
        self._scope = ""
        self._depth = 0
        self._schemas: dict[type[BaseModel], dict[str, Any]] = {}

    def schema(self, model: type[BaseModel]) -> dict[str, Any]:
        """``model``'s JSON Schema, made once (pydantic makes it anew at every call)."""
        if model not in self._schemas:
            self._schemas[model] = model.model_json_schema(mode="serialization")
        return self._schemas[model]

    def model(self, model: type[BaseModel], name: str) -> str:
        schema = self.schema(model)
        self._defs = schema.get("$defs", {})
        # A ``$ref`` means what this model's ``$defs`` say: two servers may both say Item.
        self._scope = _key(self._defs) if self._defs else ""
        if not (schema.get("type", "object") == "object" and "properties" in schema):
            # A RootModel (a result annotated ``float``, ``list[str]``, ``dict``...):
            # its type itself, not an interface around it.
            schema = {k: v for k, v in schema.items() if k != "title"}
            return self.type(schema, name)
        return self.object(schema, name)

    def _claim(self, wanted: str, shape: str) -> tuple[str, bool]:
        """The name for ``shape`` wanted as ``wanted``; True when it is new to write."""
        wanted = _ident(wanted)
        known = self._shapes.get((wanted, shape))
        if known is not None:
            return known, False
        name, n = wanted, 2
        while name in self.interfaces or name in _RESERVED:
            name, n = f"{wanted}{n}", n + 1
        self._shapes[(wanted, shape)] = name
        self.interfaces[name] = ""  # reserved now, for recursive schemas
        return name, True

    def object(self, schema: dict[str, Any], name: str, shape: str | None = None) -> str:
        body = {k: v for k, v in schema.items() if k != "$defs"}
        raw = _key(body)
        name, new = self._claim(name, shape or (raw + self._scope if "$ref" in raw else raw))
        if not new:
            return name
        required = set(schema.get("required", []))
        lines = [f"interface {name} {{"]
        for prop, sub in schema.get("properties", {}).items():
            sub = sub if isinstance(sub, dict) else {}
            doc = sub.get("description") if self.field_docs else None
            if isinstance(doc, str) and doc.strip():
                lines.append(jsdoc(doc, "  "))
            opt = "" if prop in required else "?"
            key = prop if re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$]*", prop) else json.dumps(prop)
            lines.append(f"  {key}{opt}: {self.type(sub, name + _pascal(_ident(prop)))};")
        lines.append("}")
        self.interfaces[name] = "\n".join(lines)
        return name

    def type(self, s: dict[str, Any], hint: str) -> str:
        self._depth += 1
        try:
            return "unknown" if self._depth > _MAX_DEPTH else self._type(s, hint)
        finally:
            self._depth -= 1

    def _type(self, s: dict[str, Any], hint: str) -> str:
        if "$ref" in s:
            ref = str(s["$ref"]).rsplit("/", 1)[-1]
            target = self._defs.get(ref)
            if not isinstance(target, dict):
                return "unknown"
            if target.get("type", "object") != "object" or "properties" not in target:
                return self.type(target, hint)
            # Keyed by where the ref points (scope + name), so recursion finds the
            # name it reserved and two scopes' ``Item`` stay apart.
            return self.object(target, ref, shape=f"$ref:{ref}:{_key(target)}:{self._scope}")
        if "const" in s:
            return json.dumps(s["const"])
        if "enum" in s and isinstance(s["enum"], list) and s["enum"]:
            return " | ".join(json.dumps(v) for v in s["enum"])
        for key in ("anyOf", "oneOf"):
            if key in s and isinstance(s[key], list) and s[key]:
                options = list(dict.fromkeys(self.type(sub, hint) for sub in s[key]))
                return " | ".join(options)
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
            items = s.get("items")
            item = self.type(items if isinstance(items, dict) else {}, hint + "Item")
            return f"({item})[]" if "|" in item else f"{item}[]"
        if t == "object" or (t is None and "properties" in s):
            if "properties" in s:
                return self.object(s, s.get("title") or hint)
            extra = s.get("additionalProperties")
            value = self.type(extra, hint + "Value") if isinstance(extra, dict) else "unknown"
            return f"Record<string, {value}>"
        return "unknown"


def _optional_args(schema: dict[str, Any]) -> bool:
    """Whether every argument is optional, so the tool can be called with none."""
    return not schema.get("required")


def _comment(doc: str, indent: str) -> str:
    """A doc comment and its line break, or nothing for a tool without a description."""
    return f"{jsdoc(doc, indent)}\n" if doc and doc.strip() else ""


_ARGV = (
    "/** Arguments given after the script name to `interpreter run`. */\n"
    "declare const argv: string[];\n"
)

_STANDALONE = (
    "/** Printed lines are captured and returned with the program's result. (Declared\n"
    " * so that they merge with a DOM or Node `console` when those libraries are on.) */\n"
    "interface Console {\n"
    "  log(...data: any[]): void;\n"
    "  info(...data: any[]): void;\n"
    "  warn(...data: any[]): void;\n"
    "  error(...data: any[]): void;\n"
    "  debug(...data: any[]): void;\n"
    "}\n"
    "declare var console: Console;\n"
    "/** The same as console.log. */\n"
    "declare function print(...data: any[]): void;\n"
)


def typescript_declarations(
    registry: ToolRegistry,
    *,
    standalone: bool = False,
    argv: bool | None = None,
    brief: bool = False,
) -> str:
    """Declarations of ``tools.*`` as the program in the isolate sees them.

    Namespaced tools (``mcp__NS__NAME``) are declared as ``tools.NS.NAME``. A result
    model may name its interface with a ``ts_name`` class attribute (MCP tools without
    an output schema share one ``CallToolResult``). ``standalone`` adds the isolate's
    ``console`` and ``print``, for a file that tsc checks a program against (prompts
    leave them out: models know console.log). ``argv`` (default: ``standalone``)
    declares the global ``interpreter run`` gives scripts; no other host has it.
    ``brief``: the types only, each tool with the first sentence of its description
    (``mcp-server``'s description, whose ``describe_tool`` gives the rest).
    """
    from codemode.tools.declarations_cache import cached

    return cached(
        registry,
        (standalone, bool(standalone if argv is None else argv), brief),
        lambda: _declarations(registry, standalone=standalone, argv=argv, brief=brief),
    )


def _declarations(
    registry: ToolRegistry, *, standalone: bool, argv: bool | None, brief: bool
) -> str:
    emit = _Emitter(field_docs=not brief)
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
        param = "args?" if _optional_args(emit.schema(tool.args_model)) else "args"
        parts = split_namespace(tool.name)
        description = first_sentence(tool.description) if brief else tool.description
        if parts is None:
            doc = _comment(description, "  ")
            methods.append(f"{doc}  {tool.name}({param}: {args}): Promise<{result}>;")
        else:
            doc = _comment(description, "    ")
            spaces.setdefault(parts[0], []).append(
                f"{doc}    {parts[1]}({param}: {args}): Promise<{result}>;"
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
    ) + (_ARGV if (standalone if argv is None else argv) else "") + (
        _STANDALONE if standalone else ""
    )
