"""Which event item a tool call becomes, read off the tool's definition.

``Tool.item`` names the item type (``command_execution`` for the shell, ``file_change``
for apply_patch, ``todo_list`` for the plan tool, ``mcp_tool_call`` for an MCP server's
tools, ``tool_call`` for everything else); ``Tool.item_args`` gives the call's arguments
in our own tools' shapes, so an emulated harness's ``Bash`` or ``TodoWrite`` call is shown
as the command or the plan it stands for. No tool is recognised by its name here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from codemode.agent.events import (
    CommandExecutionItem,
    FileChangeItem,
    FileUpdate,
    McpToolCallItem,
    TodoEntry,
    TodoListItem,
    ToolCallItem,
)
from codemode.tools.registry import split_namespace

if TYPE_CHECKING:
    from codemode.tools.base import Tool

CallItem = CommandExecutionItem | FileChangeItem | TodoListItem | McpToolCallItem | ToolCallItem


def start_item(
    tool: Tool | None, name: str, args: Any, item_id: str, parent_id: str | None, workspace: Path
) -> tuple[CallItem, Path]:
    """The item a call of ``tool`` (registered as ``name``) starts as, and the directory
    its relative paths start from (a patch may name another)."""
    kind = tool.item if tool is not None else "tool_call"
    canonical = tool.item_args(args) if tool is not None else args
    if kind == "command_execution" and isinstance(canonical, dict):
        command = str(canonical.get("command", ""))
        return CommandExecutionItem(id=item_id, parent_id=parent_id, command=command), workspace
    if kind == "file_change":
        changes, base = planned_changes(canonical, workspace)
        return FileChangeItem(id=item_id, parent_id=parent_id, changes=changes), base
    if kind == "todo_list" and isinstance(canonical, dict):
        entries = todo_entries(canonical)
        return TodoListItem(id=item_id, parent_id=parent_id, items=entries), workspace
    mcp = split_namespace(name) if kind == "mcp_tool_call" else None
    if mcp is not None:
        item: CallItem = McpToolCallItem(
            id=item_id, parent_id=parent_id, server=mcp[0], tool=mcp[1], arguments=args
        )
        return item, workspace
    return ToolCallItem(id=item_id, parent_id=parent_id, name=name, arguments=args), workspace


def _patch_text(args: object) -> str | None:
    if isinstance(args, str):
        return args
    if isinstance(args, dict):
        text = args.get("input", args.get("patch"))
        return text if isinstance(text, str) else None
    return None


def _absolute(base: Path, path: str) -> str:
    return os.path.normpath(Path(base, path))


def planned_changes(args: object, workspace: Path) -> tuple[list[FileUpdate], Path]:
    """The files a patch names, with absolute paths, before it is applied (Codex reports
    them as the call starts); also the directory its relative paths start from. A patch
    that does not parse names none: its call fails and says why."""
    text = _patch_text(args)
    if text is None:
        return [], workspace
    from codemode.tools.patch import AddFile, DeleteFile, PatchError
    from codemode.tools.patch.parser import parse_patch

    try:
        patch, workdir = parse_patch(text)
    except PatchError:
        return [], workspace
    base = Path(workspace, os.path.expanduser(workdir)) if workdir else workspace
    changes = []
    for op in patch.operations:
        path = _absolute(base, os.path.expanduser(op.path))
        if isinstance(op, AddFile):
            changes.append(FileUpdate(path=path, kind="add"))
        elif isinstance(op, DeleteFile):
            changes.append(FileUpdate(path=path, kind="delete"))
        elif op.move_to:
            moved = _absolute(base, os.path.expanduser(op.move_to))
            changes.append(FileUpdate(path=path, kind="move", move_to=moved))
        else:
            changes.append(FileUpdate(path=path, kind="update"))
    return changes, base


_STEP_STATUS: dict[str, Literal["pending", "in_progress", "completed"]] = {
    "completed": "completed", "in_progress": "in_progress",
}


def todo_entries(args: dict[str, Any]) -> list[TodoEntry]:
    """The plan of an ``update_plan`` call (``{plan: [{step, status}]}``) as todo entries;
    a step that is not that shape is left out (the call itself then fails and says why)."""
    entries = []
    steps = args.get("plan")
    for step in steps if isinstance(steps, list) else []:
        if isinstance(step, dict):
            status = _STEP_STATUS.get(str(step.get("status") or ""), "pending")
            entries.append(TodoEntry(text=str(step.get("step") or ""),
                                     completed=status == "completed", status=status))
    return entries


def finish_item(item: BaseModel, value: Any, error: str | None, base: Path) -> None:
    """Fill in what a call returned (``value``) or why it failed (``error``)."""
    failed = error is not None
    if isinstance(item, CommandExecutionItem):
        if isinstance(value, dict):
            item.aggregated_output = str(value.get("output", ""))
            item.exit_code = value.get("exit_code")
            failed = item.exit_code != 0
        else:
            item.aggregated_output = error or ""
        item.status = "failed" if failed else "completed"
    elif isinstance(item, FileChangeItem):
        if isinstance(value, dict):
            item.changes = [
                FileUpdate(
                    path=_absolute(base, str(c.get("path", ""))),
                    kind=c.get("kind", "update"),
                    move_to=_absolute(base, str(c["move_to"])) if c.get("move_to") else None,
                )
                for c in value.get("changes", [])
                if c.get("kind") in ("add", "update", "delete", "move")
            ]
            item.diff = str(value.get("diff", ""))
        item.status = "failed" if failed else "completed"
    elif isinstance(item, TodoListItem):
        pass  # the plan was shown when the call started
    elif isinstance(item, ToolCallItem | McpToolCallItem):
        item.result = value
        item.error = error
        item.status = "failed" if failed else "completed"
