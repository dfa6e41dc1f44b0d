"""How an emulated tool's result reads as text: the way that agent would show it.

Used for the classic dialect's tool results and, on surfaces whose code mode returns
text (Qwen Code's ``result.output``), for the ``output`` field of code-mode results.
The text is the ``render`` of the tool of ours that produced the result (an adapter
knows which it called), with the emulated agent's own output modes on top.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codemode.harnesses.render import render_result
from codemode.harnesses.spec import ToolTable

if TYPE_CHECKING:
    from codemode.tools.base import Tool


def arg_for_role(tool: ToolTable, role: str) -> str | None:
    """The emulated argument that plays ``role`` (an argument without a mapping plays
    the role of its own name)."""
    for arg, mapped in tool.roles.items():
        if mapped == role:
            return arg
    props = tool.parameters.get("properties", {})
    return role if role in props and role not in tool.roles else None


def _grep_mode(table: ToolTable, args: object, value: dict[str, Any]) -> str | None:
    """A grep adapter's result in the output mode the call asked for (files, counts);
    None for the default, matching lines."""
    if not isinstance(args, dict):
        return None
    mode_arg = arg_for_role(table, "output_mode")
    mode = (args.get(mode_arg) if mode_arg else None) or table.options.get(
        "output_mode_default", "content"
    )
    matches = value.get("matches", [])
    if mode == "files_with_matches":
        files = list(dict.fromkeys(m["path"] for m in matches))
        return "\n".join(files) or "No files found"
    if mode in ("count", "count_matches"):
        counts: dict[str, int] = {}
        for m in matches:
            counts[m["path"]] = counts.get(m["path"], 0) + 1
        return "\n".join(f"{p}:{c}" for p, c in counts.items()) or "No matches found"
    return None


def render_value(table: ToolTable, producer: Tool | None, args: object, value: object) -> str:
    """``value``, returned by the adapter for ``table`` after calling our tool
    ``producer``, as text. Without a producer (an adapter that may call several tools
    and says which in its result's ``output``, or one that calls none), that text or
    JSON."""
    if producer is None:
        if isinstance(value, dict) and isinstance(value.get("output"), str):
            return str(value["output"])
        return render_result(None, value)
    if table.adapter == "grep" and isinstance(value, dict):
        text = _grep_mode(table, args, value)
        if text is not None:
            return text
    return render_result(producer, value)
