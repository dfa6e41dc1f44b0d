"""What a session reports while it runs.

One stream of these feeds the terminal printer, ``exec --json`` and the session log.
The public events and items follow the shapes of Codex's ``exec --json`` output
(``thread.started``, ``turn.started``, ``item.started|updated|completed``,
``turn.completed``, ``turn.failed``, ``error``) so tools written for it can read ours.
Three item types are ours: ``code_execution`` (a code-mode program), ``tool_call``
(a tool Codex has no item for, such as ``read_file``) and ``hook_run`` (a user's hook);
a call a program makes carries its program's item id in ``parent_id``. So is one event,
``workspace.recovered`` (an interrupted write rolled back as the session started). Deltas and
notices are for live display only and are left out of ``--json``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from codemode.providers.base import Usage

ItemStatus = Literal["in_progress", "completed", "failed", "declined"]


class _Item(BaseModel):
    id: str
    parent_id: str | None = None


class AgentMessageItem(_Item):
    type: Literal["agent_message"] = "agent_message"
    text: str = ""


class ReasoningItem(_Item):
    type: Literal["reasoning"] = "reasoning"
    text: str = ""


class CommandExecutionItem(_Item):
    type: Literal["command_execution"] = "command_execution"
    command: str
    aggregated_output: str = ""
    exit_code: int | None = None
    status: ItemStatus = "in_progress"


class FileUpdate(BaseModel):
    # Absolute, as Codex reports it.
    path: str
    # Ours has "move" (Codex: "update"; ``codex_json`` maps it).
    kind: Literal["add", "update", "delete", "move"]
    move_to: str | None = None


class FileChangeItem(_Item):
    type: Literal["file_change"] = "file_change"
    # Known when the call starts (read from the patch), confirmed when it ends.
    changes: list[FileUpdate] = Field(default_factory=list)
    diff: str = ""
    status: ItemStatus = "in_progress"


class McpToolCallItem(_Item):
    """``result`` is what the call returned to the model or program (the server's
    structuredContent, else its content blocks); when it was structured, ``content``
    and ``structured_content`` are the server's result as it sent them. ``exec --json``
    reports them in Codex's shape (see ``codex_json``)."""

    type: Literal["mcp_tool_call"] = "mcp_tool_call"
    server: str
    tool: str
    arguments: Any = None
    result: Any = None
    content: list[dict[str, Any]] | None = None
    structured_content: Any = None
    error: str | None = None
    status: ItemStatus = "in_progress"


class TodoEntry(BaseModel):
    text: str
    completed: bool
    # Ours (Codex has only ``completed``): the step's own status, so an editor can show
    # the step in progress.
    status: Literal["pending", "in_progress", "completed"] | None = None


class TodoListItem(_Item):
    type: Literal["todo_list"] = "todo_list"
    items: list[TodoEntry] = Field(default_factory=list)


class ToolCallItem(_Item):
    type: Literal["tool_call"] = "tool_call"
    name: str
    arguments: Any = None
    result: Any = None
    error: str | None = None
    status: ItemStatus = "in_progress"


class CodeExecutionItem(_Item):
    type: Literal["code_execution"] = "code_execution"
    code: str
    output: str = ""
    value: Any = None
    error: str | None = None
    tool_calls: int = 0
    status: ItemStatus = "in_progress"


class HookRunItem(_Item):
    """One of the user's hooks running (``codemode.hooks``); ``parent_id`` is the
    program whose call it hooked, if any. ``status``: completed, failed (the hook did
    not work: ``error`` says how) or declined (it denied or blocked: ``reason``)."""

    type: Literal["hook_run"] = "hook_run"
    event: str
    command: str
    source: str
    status_message: str | None = None
    decision: str | None = None
    reason: str | None = None
    additional_context: str | None = None
    error: str | None = None
    duration_ms: float | None = None
    status: ItemStatus = "in_progress"


class ErrorItem(_Item):
    type: Literal["error"] = "error"
    message: str


Item = Annotated[
    AgentMessageItem
    | ReasoningItem
    | CommandExecutionItem
    | FileChangeItem
    | McpToolCallItem
    | TodoListItem
    | ToolCallItem
    | CodeExecutionItem
    | HookRunItem
    | ErrorItem,
    Field(discriminator="type"),
]


class ThreadStarted(BaseModel):
    type: Literal["thread.started"] = "thread.started"
    thread_id: str


class TurnStarted(BaseModel):
    type: Literal["turn.started"] = "turn.started"


class ItemStarted(BaseModel):
    type: Literal["item.started"] = "item.started"
    item: Item


class ItemUpdated(BaseModel):
    type: Literal["item.updated"] = "item.updated"
    item: Item


class ItemCompleted(BaseModel):
    type: Literal["item.completed"] = "item.completed"
    item: Item


class TurnUsage(BaseModel):
    """Codex's ``Usage`` (as its SDK types it), plus ``reasoning_tokens``, the name this
    field had here before, kept for readers written against it."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0
    reasoning_tokens: int = 0

    @classmethod
    def of(cls, usage: Usage) -> TurnUsage:
        return cls(
            input_tokens=usage.input_tokens,
            cached_input_tokens=usage.cached_input_tokens,
            cache_write_input_tokens=usage.cache_write_input_tokens,
            output_tokens=usage.output_tokens,
            reasoning_output_tokens=usage.reasoning_tokens,
            reasoning_tokens=usage.reasoning_tokens,
        )


class TurnCompleted(BaseModel):
    type: Literal["turn.completed"] = "turn.completed"
    usage: TurnUsage
    # Ours: the whole session's usage so far, and how many model round trips this took.
    total_usage: TurnUsage | None = None
    model_requests: int = 0


class TurnError(BaseModel):
    message: str


class TurnFailed(BaseModel):
    type: Literal["turn.failed"] = "turn.failed"
    error: TurnError


class StreamError(BaseModel):
    type: Literal["error"] = "error"
    message: str


# --- live-only events (not in --json) ------------------------------------------------


class TextDeltaEvent(BaseModel):
    type: Literal["delta.text"] = "delta.text"
    item_id: str
    text: str


class ReasoningDeltaEvent(BaseModel):
    type: Literal["delta.reasoning"] = "delta.reasoning"
    item_id: str
    text: str


class OutputDeltaEvent(BaseModel):
    """A line a running code-mode program printed."""

    type: Literal["delta.output"] = "delta.output"
    item_id: str
    level: str
    text: str


class CommandOutputDeltaEvent(BaseModel):
    """Output a running command wrote, as it arrives (its item has all of it at the end)."""

    type: Literal["delta.command_output"] = "delta.command_output"
    item_id: str
    text: str


class Notice(BaseModel):
    """Something the user should see that is not part of the conversation (a retry)."""

    type: Literal["notice"] = "notice"
    message: str


class WorkspaceRecovered(BaseModel):
    """A write killed partway (kill -9, a crash) in the workspace, rolled back as the
    session started, before anything read it (``codemode.tools.store.recovery``). Public:
    ``exec --json`` prints it, before ``thread.started``; Codex has no such event."""

    type: Literal["workspace.recovered"] = "workspace.recovered"
    message: str


Event = Annotated[
    ThreadStarted
    | TurnStarted
    | ItemStarted
    | ItemUpdated
    | ItemCompleted
    | TurnCompleted
    | TurnFailed
    | StreamError
    | TextDeltaEvent
    | ReasoningDeltaEvent
    | OutputDeltaEvent
    | CommandOutputDeltaEvent
    | Notice
    | WorkspaceRecovered,
    Field(discriminator="type"),
]

LIVE_ONLY = frozenset(
    {"delta.text", "delta.reasoning", "delta.output", "delta.command_output", "notice"}
)


def is_public(event: BaseModel) -> bool:
    """Whether ``event`` belongs in ``--json`` output."""
    return getattr(event, "type", "") not in LIVE_ONLY
