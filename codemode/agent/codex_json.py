"""Events as ``exec --json`` prints them: Codex's shapes, where ours differ inside.

Two items carry more here than Codex's types allow, and are reshaped on the way out
(extra fields stay; the Codex SDK's types are the contract):

- ``mcp_tool_call``: ``result`` is ``{content: [...], structured_content: ...}`` and a
  failure is ``error: {message}``. ``content`` is the server's own content blocks and
  ``structured_content`` its structuredContent, as the item recorded them; an item
  recorded without them (older sessions) gives what the call returned to the model,
  a structured result's JSON in one text block.
- ``file_change``: a change's kind is ``add``, ``update`` or ``delete``; a move is an
  ``update`` of its old path, with the new one in ``move_to``.
- ``command_execution``: ``exit_code`` is left out while the command runs (the SDK
  types it ``exit_code?: number``; null would not be undefined).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel


def codex_event(event: BaseModel) -> dict[str, Any]:
    """``event`` as one ``exec --json`` line's object."""
    data = event.model_dump(mode="json")
    item = data.get("item")
    if isinstance(item, dict):
        if item.get("type") == "mcp_tool_call":
            _mcp_call(item)
        elif item.get("type") == "command_execution" and item.get("exit_code") is None:
            item.pop("exit_code", None)
        elif item.get("type") == "file_change":
            for change in item.get("changes") or []:
                if change.get("kind") == "move":
                    change["kind"] = "update"
    return data


def _mcp_call(item: dict[str, Any]) -> None:
    error = item.pop("error", None)
    if error is not None:
        item["error"] = {"message": str(error)}
    result = item.pop("result", None)
    content, structured = item.pop("content", None), item.pop("structured_content", None)
    if item.get("status") != "completed":
        return  # Codex: a result only for a call that succeeded
    if content is not None:  # the server's own blocks, as Codex passes them on
        item["result"] = {"content": content, "structured_content": structured}
    elif isinstance(result, dict) and set(result) == {"content"} and isinstance(
        result["content"], list
    ):
        item["result"] = {"content": result["content"], "structured_content": None}
    else:
        text = json.dumps(result, ensure_ascii=False)
        item["result"] = {
            "content": [{"type": "text", "text": text}],
            "structured_content": result,
        }
