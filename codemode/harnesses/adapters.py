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
from typing import Any, TypedDict

from pydantic import BaseModel, Field, create_model

from codemode.harnesses.arg_models import model_from_schema, pascal
from codemode.harnesses.spec import HarnessTable, ToolTable
from codemode.harnesses.terminal import TerminalResult, terminal
from codemode.tools.base import Access, AcpKind, Effect, ItemKind, Tool
from codemode.tools.context import ToolContext, ToolError
from codemode.tools.doc_text import unwrap
from codemode.tools.registry import ToolRegistry

Invoke = Callable[[str, dict[str, object]], Awaitable[Any]]
# (arguments by role, the tool's table, our tools, this tool's state for the session)
Translate = Callable[[dict[str, Any], ToolTable, Invoke, dict[str, Any]], Awaitable[object]]



class Traits(TypedDict, total=False):
    """The traits an adapter tool takes over (``Tool``'s fields of the same names)."""

    effect: Access
    effects: frozenset[Effect]
    dry_run: bool
    item: ItemKind
    acp_kind: AcpKind


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
            return {"plan": _plan(todos if isinstance(todos, list) else [], self.table, False)}
        return by_role


# --- the adapters ------------------------------------------------------------------------


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


async def _shell(
    r: dict[str, Any], t: ToolTable, invoke: Invoke, state: dict[str, Any]
) -> object:
    args: dict[str, object] = {"command": r["command"]}
    if r.get("timeout_ms") is not None:
        args["timeout_ms"] = max(1, _int(r["timeout_ms"]) or 1)
    elif r.get("timeout_s") is not None:
        args["timeout_ms"] = max(1, int(float(r["timeout_s"]) * 1000))
    if r.get("workdir"):
        args["workdir"] = r["workdir"]
    return await invoke("shell", args)


async def _read(
    r: dict[str, Any], t: ToolTable, invoke: Invoke, state: dict[str, Any]
) -> object:
    args: dict[str, object] = {"path": r["path"]}
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
) -> object:
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
) -> object:
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
) -> object:
    args = {"pattern": r["pattern"]}
    if r.get("path"):
        args["path"] = r["path"]
    return await invoke("glob", args)


async def _grep(
    r: dict[str, Any], t: ToolTable, invoke: Invoke, state: dict[str, Any]
) -> object:
    if r.get("multiline"):
        from codemode.harnesses.grep_more import multiline_grep

        return await multiline_grep(r, invoke)
    args: dict[str, object] = {"pattern": r["pattern"]}
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
) -> object:
    result = await invoke("list_dir", {"path": r.get("path") or "."})
    ignore = r.get("ignore") or []
    if ignore:
        from codemode.tools.glob_pattern import compile_glob

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
) -> object:
    if r.get("todos") is None and t.options.get("read_when_omitted"):
        # Kimi Code's TodoList: called without todos, it shows the current list.
        plan = state.get("plan", [])
        return {"plan": plan, "message": _plan_text(plan)}
    plan = _plan(r.get("todos") or [], t, True)
    result = await invoke("update_plan", {"plan": plan})
    state["plan"] = plan
    return result


def _plan(todos: list[object], t: ToolTable, strict: bool) -> list[dict[str, str]]:
    """An emulated todo list as our plan steps. ``strict``: an unknown status is an error
    (else it reads as pending, and an item that is not an object is left out)."""
    text_key = t.options.get("todo_text", "content")
    plan = []
    for item in todos:
        if not isinstance(item, dict):
            if strict:
                raise ToolError(f"{t.name}: each todo must be an object")
            continue
        status = str(item.get("status", "pending")).lower().replace(" ", "_").replace("-", "_")
        if status not in _STATUS and strict:
            raise ToolError(f"{t.name}: unknown status {item.get('status')!r}")
        plan.append({"step": str(item.get(text_key, "")), "status": _STATUS.get(status, "pending")})
    return plan


def _plan_text(plan: list[dict[str, str]]) -> str:
    if not plan:
        return "The todo list is empty."
    return "Current todo list:\n" + "\n".join(f"  [{p['status']}] {p['step']}" for p in plan)


async def _editor(
    r: dict[str, Any], t: ToolTable, invoke: Invoke, state: dict[str, Any]
) -> object:
    """SWE-agent's str_replace_editor: view, create, str_replace, insert."""
    command, path = r.get("command"), r["path"]
    if command == "view":
        view = r.get("view_range")
        try:
            if view:
                start, end = int(view[0]), int(view[1])
                args: dict[str, object] = {"path": path, "offset": max(1, start)}
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
# The traits of adapters that stand for none of our tools (the others carry the traits
# of the tool they stand for).
ADAPTER_TRAITS: dict[str, Traits] = {
    "terminal": {"effects": frozenset({"execute"}), "acp_kind": "execute"},
    "editor": {"effects": frozenset({"read", "write"}), "acp_kind": "edit"},
}


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
