"""A recorded session as the ACP updates an editor saw live (``session/load``).

The session file holds the conversation and, in order, every public event the session
emitted. Replaying the item events through a fresh ``UpdateMapper`` gives the editor
the same tool calls it saw live: our item ids, the same titles and kinds, ``rawInput``
objects, a program's nested calls with their parent, the plan with each step's status.
Only the live-only parts differ: text arrives as one chunk per message instead of
deltas, and a running program's intermediate output is not repeated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import text_block, tool_content, update_tool_call, update_user_message_text
from pydantic import TypeAdapter, ValidationError

from codemode.acp.updates import Update, UpdateMapper
from codemode.agent.events import ItemCompleted, ItemStarted

if TYPE_CHECKING:
    from codemode.tools.registry import ToolRegistry

_ITEM_EVENT: TypeAdapter[ItemStarted | ItemCompleted] = TypeAdapter(ItemStarted | ItemCompleted)


def _records(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a cut last line, as read_session skips it
        if isinstance(record, dict):
            out.append(record)
    return out


def replay_updates(
    path: Path, cwd: str, tools: ToolRegistry | None = None
) -> list[Update]:
    """The updates that show the session recorded at ``path`` to an editor (``tools``:
    the session's, whose kinds its calls show with)."""
    mapper = UpdateMapper(cwd, tools)
    updates: list[Update] = []
    for record in _records(path):
        kind = record.get("type")
        if kind == "message" and record.get("prompt"):
            text = (record.get("message") or {}).get("text")
            if isinstance(text, str) and text:
                updates.append(update_user_message_text(text))
        elif kind == "event" and isinstance(record.get("event"), dict):
            if record["event"].get("type") not in ("item.started", "item.completed"):
                continue
            try:
                event = _ITEM_EVENT.validate_python(record["event"])
            except ValidationError:
                continue  # a record this version cannot read: leave it out, show the rest
            updates.extend(mapper.updates(event))
    # Calls that never finished (the process was killed mid-turn): the session answered
    # them "interrupted" when it was resumed, so say the same here.
    for item_id in list(mapper.open_calls):
        mapper.open_calls.pop(item_id)
        updates.append(
            update_tool_call(
                item_id, status="failed", content=[tool_content(text_block("interrupted"))]
            )
        )
    return updates
