"""What each adapter kind does: the translation from an emulated tool's arguments, by
role, to calls of our own tools (``codemode.harnesses.adapters`` makes the tools).

A translation gets the arguments by role, the emulated tool's table, ``invoke`` (our
tools, through the base registry) and the tool's own state for the session (a todo
list, a terminal), and returns the result the emulated tool gives.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypedDict

from pydantic import BaseModel

from codemode.harnesses.spec import ToolTable
from codemode.harnesses.terminal import TerminalResult, terminal
from codemode.tools.base import Access, AcpKind, Effect, ItemKind
from codemode.tools.context import ToolError

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
    plan = plan_steps(r.get("todos") or [], t, True)
    result = await invoke("update_plan", {"plan": plan})
    state["plan"] = plan
    return result


def plan_steps(todos: list[object], t: ToolTable, strict: bool) -> list[dict[str, str]]:
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
