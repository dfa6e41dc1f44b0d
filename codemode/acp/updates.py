"""Session events -> ACP session updates.

Text and reasoning deltas become message and thought chunks; every tool item (a
classic call, a code-mode program, and each call a program makes) becomes an ACP tool
call whose status follows the item; so does each run of the user's hooks (a
``hook_run`` item: ``_meta.codemode.hook`` has its event, decision and reason). ACP has
no nesting, so a program's calls carry their program's id in ``_meta.codemode.parent_id``
and say so in their title. Notices (a retry, a failed hook, a rolled-back write) are
message chunks set apart (``codemode.acp.notices``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from acp import (
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
)
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    PlanEntry,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolKind,
    UserMessageChunk,
)
from pydantic import BaseModel

from codemode.acp.notices import notice_update
from codemode.agent.events import (
    AgentMessageItem,
    CodeExecutionItem,
    CommandExecutionItem,
    FileChangeItem,
    HookRunItem,
    Item,
    ItemCompleted,
    ItemStarted,
    McpToolCallItem,
    Notice,
    OutputDeltaEvent,
    ReasoningDeltaEvent,
    ReasoningItem,
    TextDeltaEvent,
    TodoListItem,
    ToolCallItem,
    WorkspaceRecovered,
)

if TYPE_CHECKING:
    from codemode.tools.base import Tool
    from codemode.tools.registry import ToolRegistry

# The kind of a recorded item whose tool this session does not have (a replayed
# session's), by the item's type; every other item's kind is its tool's ``acp_kind``.
_ITEM_KINDS: dict[str, ToolKind] = {
    "command_execution": "execute",
    "code_execution": "execute",
    "file_change": "edit",
}
_TOOL_ITEMS = (
    CommandExecutionItem,
    FileChangeItem,
    ToolCallItem,
    CodeExecutionItem,
    McpToolCallItem,
    HookRunItem,
)
# The session updates ACP's ``session/update`` carries (a user's message only in a replay).
Update = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
)
ToolItem = (
    CommandExecutionItem
    | FileChangeItem
    | ToolCallItem
    | CodeExecutionItem
    | McpToolCallItem
    | HookRunItem
)
MAX_TITLE = 80


def tool_name(item: Item) -> str:
    """The registry name of the tool an item reports, where the item names it ("" for a
    command, a patch or a program: their items say what ran, not which tool ran it)."""
    if isinstance(item, McpToolCallItem):
        return f"mcp__{item.server}__{item.tool}"
    return str(getattr(item, "name", ""))


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_TITLE else line[: MAX_TITLE - 1] + "…"


def _title(item: ToolItem) -> str:
    if isinstance(item, CommandExecutionItem):
        title = f"$ {item.command}"
    elif isinstance(item, CodeExecutionItem):
        lines = item.code.strip().splitlines()
        title = f"Run program ({len(lines)} line{'s' if len(lines) != 1 else ''})"
    elif isinstance(item, FileChangeItem):
        title = "Apply patch"
    elif isinstance(item, HookRunItem):
        title = f"{item.event} hook: {item.status_message or item.command}"
    elif isinstance(item, ToolCallItem):
        args = item.arguments
        target = args.get("path") or args.get("pattern") if isinstance(args, dict) else None
        title = f"{item.name} {target}" if target else item.name
    else:
        title = f"{item.server}.{item.tool}" if isinstance(item, McpToolCallItem) else item.type
    return _short(title) + (" (in program)" if item.parent_id else "")


def _locations(item: ToolItem, cwd: str) -> list[ToolCallLocation] | None:
    args = getattr(item, "arguments", None)
    if isinstance(item, ToolCallItem) and isinstance(args, dict) and args.get("path"):
        from pathlib import Path

        path = Path(str(args["path"]))
        return [ToolCallLocation(path=str(path if path.is_absolute() else Path(cwd) / path))]
    return None


def _input(item: ToolItem) -> object:
    if isinstance(item, CommandExecutionItem):
        return {"command": item.command}
    if isinstance(item, CodeExecutionItem):
        return {"code": item.code}
    if isinstance(item, HookRunItem):
        return {"event": item.event, "command": item.command, "source": item.source}
    return getattr(item, "arguments", None)


def _output(item: ToolItem) -> tuple[object, str]:
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
    if isinstance(item, HookRunItem):
        raw = {"decision": item.decision, "reason": item.reason,
               "additional_context": item.additional_context, "error": item.error}
        shown = item.error or (f"{item.decision}: {item.reason}" if item.decision else "")
        return raw, shown
    error = getattr(item, "error", None)
    result = getattr(item, "result", None)
    if error:
        return {"error": error}, error
    text = json.dumps(result, ensure_ascii=False, indent=1) if result is not None else ""
    return result, text[:4000]


class UpdateMapper:
    """Turns one session's events into ACP updates, remembering what it has sent.

    ``tools`` is the session's registry: a call's ACP kind is its tool's ``acp_kind``.
    """

    def __init__(self, cwd: str, tools: ToolRegistry | None = None) -> None:
        self.cwd = cwd
        self.tools = tools
        self._streamed: set[str] = set()
        self._outputs: dict[str, list[str]] = {}
        # Tool calls started and not finished: item id -> (item type, tool name), in
        # start order.
        self.open_calls: dict[str, tuple[str, str]] = {}

    def _tool(self, name: str) -> Tool | None:
        if self.tools is None or not name:
            return None
        from codemode.harnesses.adapters import find_tool

        return find_tool(self.tools, name)

    def kind_of(self, item: Item) -> ToolKind:
        """How the editor shows ``item``'s call: its tool's ``acp_kind``."""
        tool = self._tool(tool_name(item))
        if tool is not None:
            return tool.acp_kind
        return _ITEM_KINDS.get(str(item.type), "other")

    def kind_for(self, tool: str) -> ToolKind:
        """The ``acp_kind`` of the tool registered as ``tool`` ("other": none such)."""
        found = self._tool(tool)
        return found.acp_kind if found is not None else "other"

    def updates(self, event: BaseModel) -> list[Update]:
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
        if isinstance(event, Notice | WorkspaceRecovered):
            return [notice_update(event.message, event.type)]
        if isinstance(event, ItemStarted):
            return self._started(event.item)
        if isinstance(event, ItemCompleted):
            return self._completed(event.item)
        return []

    def _meta(self, item: Item) -> dict[str, object]:
        meta: dict[str, object] = {"item_type": item.type, "parent_id": item.parent_id}
        if isinstance(item, HookRunItem):
            meta["hook"] = {"event": item.event, "decision": item.decision,
                            "reason": item.reason, "status": item.status}
        return {"codemode": meta}

    def _started(self, item: Item) -> list[Update]:
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
        self.open_calls[item.id] = (str(item.type), tool_name(item))
        start = start_tool_call(
            item.id,
            _title(item),
            kind=self.kind_of(item),
            status="in_progress",
            locations=_locations(item, self.cwd),
            raw_input=_input(item),
        )
        start.field_meta = self._meta(item)
        return [start]

    def _completed(self, item: Item) -> list[Update]:
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
        """The most recent unfinished call of ``tool`` (the one asking for approval):
        a call of that name, of an emulated tool standing in front of it, or an item of
        the type its calls become (a command for ``shell``)."""
        found = self._tool(tool)
        item_type = found.item if found is not None and found.item != "tool_call" else None
        for item_id, (kind, name) in reversed(self.open_calls.items()):
            if name == tool or (item_type is not None and kind == item_type):
                return item_id
            offered = self._tool(name)
            if offered is not None and getattr(offered, "target", None) == tool:
                return item_id
        return None
