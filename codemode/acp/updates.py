"""Session events -> ACP session updates.

Text and reasoning deltas become message and thought chunks; every tool item (a
classic call, a code-mode program, and each call a program makes) becomes an ACP tool
call whose status follows the item. ACP has no nesting, so a program's calls carry
their program's id in ``_meta.codemode.parent_id`` and say so in their title.
"""

from __future__ import annotations

import json
from typing import Any

from acp import (
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
)
from acp.schema import PlanEntry, ToolCallLocation, ToolKind
from pydantic import BaseModel

from codemode.agent.events import (
    AgentMessageItem,
    CodeExecutionItem,
    CommandExecutionItem,
    FileChangeItem,
    ItemCompleted,
    ItemStarted,
    McpToolCallItem,
    OutputDeltaEvent,
    ReasoningDeltaEvent,
    ReasoningItem,
    TextDeltaEvent,
    TodoListItem,
    ToolCallItem,
)

_KINDS: dict[str, ToolKind] = {
    "shell": "execute",
    "exec": "execute",
    "read_file": "read",
    "load_skill": "read",
    "write_file": "edit",
    "apply_patch": "edit",
    "list_dir": "search",
    "glob": "search",
    "grep": "search",
    "update_plan": "think",
}
_TOOL_ITEMS = (
    CommandExecutionItem,
    FileChangeItem,
    ToolCallItem,
    CodeExecutionItem,
    McpToolCallItem,
)
MAX_TITLE = 80


def tool_name(item: Any) -> str:
    """The registry name of the tool an item reports."""
    if isinstance(item, CommandExecutionItem):
        return "shell"
    if isinstance(item, FileChangeItem):
        return "apply_patch"
    if isinstance(item, CodeExecutionItem):
        return "exec"
    if isinstance(item, McpToolCallItem):
        return f"{item.server}.{item.tool}"
    return str(getattr(item, "name", "tool"))


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_TITLE else line[: MAX_TITLE - 1] + "…"


def _title(item: Any) -> str:
    if isinstance(item, CommandExecutionItem):
        title = f"$ {item.command}"
    elif isinstance(item, CodeExecutionItem):
        lines = item.code.strip().splitlines()
        title = f"Run program ({len(lines)} line{'s' if len(lines) != 1 else ''})"
    elif isinstance(item, FileChangeItem):
        title = "Apply patch"
    elif isinstance(item, ToolCallItem):
        args = item.arguments
        target = args.get("path") or args.get("pattern") if isinstance(args, dict) else None
        title = f"{item.name} {target}" if target else item.name
    else:
        title = tool_name(item)
    return _short(title) + (" (in program)" if item.parent_id else "")


def _locations(item: Any, cwd: str) -> list[ToolCallLocation] | None:
    args = getattr(item, "arguments", None)
    if isinstance(item, ToolCallItem) and isinstance(args, dict) and args.get("path"):
        from pathlib import Path

        path = Path(str(args["path"]))
        return [ToolCallLocation(path=str(path if path.is_absolute() else Path(cwd) / path))]
    return None


def _input(item: Any) -> Any:
    if isinstance(item, CommandExecutionItem):
        return {"command": item.command}
    if isinstance(item, CodeExecutionItem):
        return {"code": item.code}
    return getattr(item, "arguments", None)


def _output(item: Any) -> tuple[Any, str]:
    """(raw output, text shown in the tool call)."""
    if isinstance(item, CommandExecutionItem):
        return {"exit_code": item.exit_code, "output": item.aggregated_output}, (
            item.aggregated_output
        )
    if isinstance(item, CodeExecutionItem):
        shown = item.output
        if item.value is not None:
            shown += ("\n" if shown else "") + json.dumps(item.value, ensure_ascii=False)
        if item.error:
            shown += ("\n" if shown else "") + item.error
        return {"output": item.output, "value": item.value, "error": item.error}, shown
    if isinstance(item, FileChangeItem):
        return {"diff": item.diff}, item.diff
    error = getattr(item, "error", None)
    result = getattr(item, "result", None)
    if error:
        return {"error": error}, error
    text = json.dumps(result, ensure_ascii=False, indent=1) if result is not None else ""
    return result, text[:4000]


class UpdateMapper:
    """Turns one session's events into ACP updates, remembering what it has sent."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self._streamed: set[str] = set()
        self._outputs: dict[str, list[str]] = {}
        # Tool calls started and not finished: item id -> tool name, in start order.
        self.open_calls: dict[str, str] = {}

    def updates(self, event: BaseModel) -> list[Any]:
        if isinstance(event, TextDeltaEvent):
            self._streamed.add(event.item_id)
            return [update_agent_message_text(event.text)]
        if isinstance(event, ReasoningDeltaEvent):
            self._streamed.add(event.item_id)
            return [update_agent_thought_text(event.text)]
        if isinstance(event, OutputDeltaEvent):
            lines = self._outputs.setdefault(event.item_id, [])
            lines.append(event.text)
            return [
                update_tool_call(
                    event.item_id, content=[tool_content(text_block("\n".join(lines)))]
                )
            ]
        if isinstance(event, ItemStarted):
            return self._started(event.item)
        if isinstance(event, ItemCompleted):
            return self._completed(event.item)
        return []

    def _meta(self, item: Any) -> dict[str, Any]:
        return {"codemode": {"item_type": item.type, "parent_id": item.parent_id}}

    def _started(self, item: Any) -> list[Any]:
        if isinstance(item, TodoListItem):
            entries = [
                PlanEntry(
                    content=e.text, priority="medium",
                    status=e.status or ("completed" if e.completed else "pending"),
                )
                for e in item.items
            ]
            return [update_plan(entries)]
        if not isinstance(item, _TOOL_ITEMS):
            return []
        name = tool_name(item)
        self.open_calls[item.id] = name
        start = start_tool_call(
            item.id,
            _title(item),
            kind=_KINDS.get(name, "other"),
            status="in_progress",
            locations=_locations(item, self.cwd),
            raw_input=_input(item),
        )
        start.field_meta = self._meta(item)
        return [start]

    def _completed(self, item: Any) -> list[Any]:
        if isinstance(item, AgentMessageItem):
            return [] if item.id in self._streamed else [update_agent_message_text(item.text)]
        if isinstance(item, ReasoningItem):
            return [] if item.id in self._streamed else [update_agent_thought_text(item.text)]
        if not isinstance(item, _TOOL_ITEMS):
            return []
        self.open_calls.pop(item.id, None)
        self._outputs.pop(item.id, None)
        raw, shown = _output(item)
        failed = getattr(item, "status", "completed") in ("failed", "declined")
        update = update_tool_call(
            item.id,
            status="failed" if failed else "completed",
            content=[tool_content(text_block(shown))] if shown else None,
            raw_output=raw,
        )
        update.field_meta = self._meta(item)
        return [update]

    def open_call_for(self, tool: str) -> str | None:
        """The most recent unfinished call of ``tool`` (the one asking for approval)."""
        for item_id, name in reversed(self.open_calls.items()):
            if name == tool:
                return item_id
        return None
