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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from codemode.harnesses.spec import HarnessTable, ToolTable
from codemode.harnesses.terminal import TerminalResult, terminal
from codemode.tools.base import StrictArgs, Tool
from codemode.tools.context import ToolContext, ToolError
from codemode.tools.doc_text import unwrap
from codemode.tools.registry import ToolRegistry

Invoke = Callable[[str, dict[str, Any]], Awaitable[Any]]
# (arguments by role, the tool's table, our tools, this tool's state for the session)
Translate = Callable[[dict[str, Any], ToolTable, Invoke, dict[str, Any]], Awaitable[Any]]

# Our tools that the adapters stand in front of; other tools in a session (MCP servers,
# embedders' tools) are offered unchanged next to the adapters.
COVERED = {"shell", "read_file", "write_file", "list_dir", "glob", "grep", "update_plan",
           "edit", "apply_patch"}


@dataclass(frozen=True)
class AdapterTool(Tool):
    """A tool of an emulated surface; ``target`` is the tool of ours it mostly calls.

    The sandbox's approval hook should act on the canonical calls the handler makes
    through the base registry, not on the adapter call itself.
    """

    target: str = ""
    table: ToolTable | None = None


# --- argument models from JSON schema ------------------------------------------------


def _pascal(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^A-Za-z0-9]+", name) if p)


def _annotation(schema: dict[str, Any], hint: str) -> Any:
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [_annotation(sub, f"{hint}{i}") for i, sub in enumerate(schema[key])]
            union = options[0]
            for option in options[1:]:
                union = union | option
            return union
    if "enum" in schema:
        return Literal[tuple(schema["enum"])]
    kind = schema.get("type")
    if isinstance(kind, list):  # ["integer", "null"]
        kind = next((k for k in kind if k != "null"), None)
    if kind == "string":
        return str
    if kind == "integer":
        return int
    if kind == "number":
        return float
    if kind == "boolean":
        return bool
    if kind == "array":
        return list[_annotation(schema.get("items", {}), hint + "Item")]  # type: ignore[misc]
    if kind == "object" and "properties" in schema:
        return model_from_schema(hint, schema)
    if kind == "object":
        return dict[str, Any]
    return Any


def model_from_schema(name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """A strict pydantic model accepting exactly the objects ``schema`` describes.

    Property names that are not Python identifiers (``-i``, ``-A``) become aliases.
    """
    required = set(schema.get("required", []))
    fields: dict[str, Any] = {}
    for prop, sub in schema.get("properties", {}).items():
        attr = prop if prop.isidentifier() and not prop.startswith("_") else (
            "arg_" + re.sub(r"\W", "_", prop).strip("_")
        )
        annotation = _annotation(sub, name + _pascal(prop))
        extra: dict[str, Any] = {"description": sub.get("description")}
        if attr != prop:
            extra["alias"] = prop
        if prop in required:
            fields[attr] = (annotation, Field(..., **extra))
        else:
            fields[attr] = (annotation | None, Field(default=None, **extra))
    return create_model(name, __base__=StrictArgs, **fields)


# --- the adapters ------------------------------------------------------------------------


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


async def _shell(
    r: dict[str, Any], t: ToolTable, invoke: Invoke, state: dict[str, Any]
) -> Any:
    args: dict[str, Any] = {"command": r["command"]}
    if r.get("timeout_ms") is not None:
        args["timeout_ms"] = max(1, _int(r["timeout_ms"]) or 1)
    elif r.get("timeout_s") is not None:
        args["timeout_ms"] = max(1, int(float(r["timeout_s"]) * 1000))
    if r.get("workdir"):
        args["workdir"] = r["workdir"]
    return await invoke("shell", args)


async def _read(
    r: dict[str, Any], t: ToolTable, invoke: Invoke, state: dict[str, Any]
) -> Any:
    args: dict[str, Any] = {"path": r["path"]}
    offset = r.get("offset1")
    if r.get("offset0") is not None:
        offset = int(r["offset0"]) + 1
    if offset is not None and int(offset) < 0:
        # Negative: count from the end of the file (kimi's line_offset).
        whole = await invoke("read_file", {"path": r["path"]})
        offset = max(1, whole["total_lines"] + int(offset) + 1)
    if offset is not None and int(offset) > 1:
        args["offset"] = int(offset)
    if r.get("limit") is not None and int(r["limit"]) > 0:
        args["limit"] = int(r["limit"])
    return await invoke("read_file", args)


async def _write(
    r: dict[str, Any], t: ToolTable, invoke: Invoke, state: dict[str, Any]
) -> Any:
    content = r["content"]
    if r.get("mode") == "append":
        try:
            old = await invoke("read_file", {"path": r["path"]})
            content = old["content"] + content
        except ToolError:
            pass  # a new file: append is a plain write
    return await invoke("write_file", {"path": r["path"], "content": content})


async def _edit(
    r: dict[str, Any], t: ToolTable, invoke: Invoke, state: dict[str, Any]
) -> Any:
    edits = r.get("edits")
    if edits is None:
        every = r.get("replace_all")
        if every is None:
            every = t.options.get("replace_all_default", False)  # DeepSeek TUI: every one
        edits = [{"old": r.get("old"), "new": r.get("new"), "replace_all": every}]
    elif isinstance(edits, dict):
        edits = [edits]
    keys = t.options.get("edit_keys", {})  # pi's {oldText, newText} items
    if keys:
        edits = [{keys.get(k, k): v for k, v in e.items()} if isinstance(e, dict) else e
                 for e in edits]
    total, result = 0, None
    for e in edits:
        if e.get("old") is None or e.get("new") is None:
            raise ToolError(f"{t.name}: each edit needs the old and the new text")
        result = await invoke(
            "edit",
            {
                "path": r["path"],
                "old_string": e["old"],
                "new_string": e["new"],
                "replace_all": bool(e.get("replace_all")),
            },
        )
        total += result["replacements"]
    assert result is not None
    return {**result, "replacements": total}


async def _glob(
    r: dict[str, Any], t: ToolTable, invoke: Invoke, state: dict[str, Any]
) -> Any:
    args = {"pattern": r["pattern"]}
    if r.get("path"):
        args["path"] = r["path"]
    return await invoke("glob", args)


async def _grep(
    r: dict[str, Any], t: ToolTable, invoke: Invoke, state: dict[str, Any]
) -> Any:
    if r.get("multiline"):
        from codemode.harnesses.grep_more import multiline_grep

        return await multiline_grep(r, invoke)
    args: dict[str, Any] = {"pattern": r["pattern"]}
    for role in ("path", "glob"):
        if r.get(role):
            args[role] = r[role]
    if r.get("case_insensitive") or (
        r.get("case_sensitive") is False
        or (r.get("case_sensitive") is None and t.options.get("case_insensitive_default"))
    ):
        args["case_insensitive"] = True
    if r.get("limit") is not None and int(r["limit"]) > 0:
        args["max_results"] = int(r["limit"])
    result = await invoke("grep", args)
    before = _int(r.get("before") if r.get("before") is not None else r.get("context")) or 0
    after = _int(r.get("after") if r.get("after") is not None else r.get("context")) or 0
    if before > 0 or after > 0:
        from codemode.harnesses.grep_more import context_lines

        result["context"] = await context_lines(result["matches"], before, after, invoke)
    return result


async def _list(
    r: dict[str, Any], t: ToolTable, invoke: Invoke, state: dict[str, Any]
) -> Any:
    result = await invoke("list_dir", {"path": r.get("path") or "."})
    ignore = r.get("ignore") or []
    if ignore:
        from codemode.tools.search import compile_glob

        # RE2 globs, as the glob tool's: a model's pattern runs in linear time.
        globs = [compile_glob(str(g)) for g in ignore]
        result["entries"] = [
            e for e in result["entries"]
            if not any(g.fullmatch(e["path"].rsplit("/", 1)[-1]) for g in globs)
        ]
    return result


_STATUS = {"pending": "pending", "todo": "pending", "in_progress": "in_progress",
           "inprogress": "in_progress", "completed": "completed", "done": "completed",
           "cancelled": "completed"}


async def _todo(
    r: dict[str, Any], t: ToolTable, invoke: Invoke, state: dict[str, Any]
) -> Any:
    text_key = t.options.get("todo_text", "content")
    if r.get("todos") is None and t.options.get("read_when_omitted"):
        # Kimi Code's TodoList: called without todos, it shows the current list.
        plan = state.get("plan", [])
        return {"plan": plan, "message": _plan_text(plan)}
    plan = []
    for item in r.get("todos") or []:
        status = str(item.get("status", "pending")).lower().replace(" ", "_").replace("-", "_")
        if status not in _STATUS:
            raise ToolError(f"{t.name}: unknown status {item.get('status')!r}")
        plan.append({"step": str(item.get(text_key, "")), "status": _STATUS[status]})
    result = await invoke("update_plan", {"plan": plan})
    state["plan"] = plan
    return result


def _plan_text(plan: list[dict[str, Any]]) -> str:
    if not plan:
        return "The todo list is empty."
    return "Current todo list:\n" + "\n".join(f"  [{p['status']}] {p['step']}" for p in plan)


async def _editor(
    r: dict[str, Any], t: ToolTable, invoke: Invoke, state: dict[str, Any]
) -> Any:
    """SWE-agent's str_replace_editor: view, create, str_replace, insert."""
    command, path = r.get("command"), r["path"]
    if command == "view":
        view = r.get("view_range")
        try:
            if view:
                start, end = int(view[0]), int(view[1])
                args: dict[str, Any] = {"path": path, "offset": max(1, start)}
                if end > 0:
                    args["limit"] = max(1, end - max(1, start) + 1)
                return await invoke("read_file", args)
            return await invoke("read_file", {"path": path})
        except ToolError as exc:
            if "directory" not in str(exc).lower():
                raise
            return await invoke("list_dir", {"path": path, "depth": 2})
    if command == "create":
        if r.get("file_text") is None:
            raise ToolError(f"{t.name} create: file_text is required")
        return await invoke("write_file", {"path": path, "content": r["file_text"]})
    if command == "str_replace":
        if r.get("old") is None:
            raise ToolError(f"{t.name} str_replace: old_str is required")
        return await invoke(
            "edit", {"path": path, "old_string": r["old"], "new_string": r.get("new") or ""}
        )
    if command == "insert":
        if r.get("insert_line") is None or r.get("new") is None:
            raise ToolError(f"{t.name} insert: insert_line and new_str are required")
        old = await invoke("read_file", {"path": path})
        lines = old["content"].splitlines(keepends=True)
        at = int(r["insert_line"])
        if not 0 <= at <= len(lines):
            raise ToolError(f"{t.name} insert: insert_line must be between 0 and {len(lines)}")
        text = r["new"] if r["new"].endswith("\n") else r["new"] + "\n"
        if at > 0 and not lines[at - 1].endswith("\n"):
            lines[at - 1] += "\n"
        lines.insert(at, text)
        return await invoke("write_file", {"path": path, "content": "".join(lines)})
    raise ToolError(
        f"{t.name}: unknown command {command!r} (use view, create, str_replace or insert)"
    )


ADAPTERS: dict[str, tuple[str, Translate]] = {
    "shell": ("shell", _shell),
    "read": ("read_file", _read),
    "write": ("write_file", _write),
    "edit": ("edit", _edit),
    "glob": ("glob", _glob),
    "grep": ("grep", _grep),
    "list": ("list_dir", _list),
    "todo": ("update_plan", _todo),
    "editor": ("", _editor),
    "terminal": ("", terminal),
}
# Result models of adapters that stand for none of our tools.
ADAPTER_RESULTS: dict[str, type[BaseModel]] = {"terminal": TerminalResult}


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
    model = model_from_schema(_pascal(table.name) + "Args", table.parameters)
    target_tool = base.get(target) if target else None
    result_model = (
        target_tool.result_model if target_tool is not None else ADAPTER_RESULTS.get(table.adapter)
    )
    if text and result_model is not None and "output" not in result_model.model_fields:
        result_model = create_model(
            _pascal(table.name) + "Result",
            __base__=result_model,
            output=(str, Field(description="The result as text, as a direct call shows it.")),
        )

    state: dict[str, Any] = {}  # this tool's memory for the session (a todo list, a terminal)

    async def handler(args: BaseModel, ctx: ToolContext) -> Any:
        async def invoke(name: str, raw: dict[str, Any]) -> Any:
            return await base.invoke(name, raw, ctx)

        values = args.model_dump(by_alias=True, exclude_none=True)
        try:
            value = await translate(_roles(values, table), table, invoke, state)
        except ToolError as exc:
            raise ToolError(_in_own_words(str(exc), table, target)) from None
        if text and isinstance(value, dict) and "output" not in value:
            value = {**value, "output": render_value(table, target, values, value)}
        return value

    return AdapterTool(
        name=table.name,
        description=unwrap(table.description),
        args_model=model,
        result_model=result_model,
        handler=handler,
        target=target,
        table=table,
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
        if name not in COVERED and name not in registry.names():
            tool = base.get(name)
            assert tool is not None
            registry.add(tool)
    return registry
