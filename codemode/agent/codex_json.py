"""Events as ``exec --json`` prints them: Codex's shapes, where ours differ inside.

Two items carry more here than Codex's types allow, and are reshaped on the way out
(extra fields stay; the Codex SDK's types are the contract):

- ``mcp_tool_call``: ``result`` is ``{content: [...], structured_content: ...}`` and a
  failure is ``error: {message}``. Our item keeps what the call returned to the model
  (structuredContent, else the content blocks); when that was structured, the content
  is its JSON in one text block, which is what the MCP specification asks a server
  returning structured content to send as well.
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
    if item.get("status") != "completed":
        return  # Codex: a result only for a call that succeeded
    if isinstance(result, dict) and set(result) == {"content"} and isinstance(
        result["content"], list
    ):
        item["result"] = {"content": result["content"], "structured_content": None}
    else:
        text = json.dumps(result, ensure_ascii=False)
        item["result"] = {
            "content": [{"type": "text", "text": text}],
            "structured_content": result,
        }
