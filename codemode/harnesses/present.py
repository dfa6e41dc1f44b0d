"""How an emulated tool's result reads as text: the way that agent would show it.

Used for the classic dialect's tool results and, on surfaces whose code mode returns
text (Qwen Code's ``result.output``), for the ``output`` field of code-mode results.
"""

from __future__ import annotations

from typing import Any

from codemode.harnesses.render import render_result
from codemode.harnesses.spec import ToolTable


def arg_for_role(tool: ToolTable, role: str) -> str | None:
    """The emulated argument that plays ``role`` (an argument without a mapping plays
    the role of its own name)."""
    for arg, mapped in tool.roles.items():
        if mapped == role:
            return arg
    props = tool.parameters.get("properties", {})
    return role if role in props and role not in tool.roles else None


def _target_of(value: Any) -> str:
    """Which of our tools produced ``value`` (for adapters that call several)."""
    if not isinstance(value, dict):
        return ""
    for key, target in (("start_line", "read_file"), ("exit_code", "shell"),
                        ("replacements", "edit"), ("bytes_written", "write_file"),
                        ("entries", "list_dir")):
        if key in value:
            return target
    return ""


def render_value(table: ToolTable, target: str, args: Any, value: Any) -> str:
    """``value``, returned by the adapter for ``table`` (our tool ``target``), as text."""
    target = target or _target_of(value)
    if not isinstance(value, dict):
        return render_result(target or table.name, value)
    if target == "grep" and isinstance(args, dict):
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
    if target == "list_dir" and "entries" in value:
        return "\n".join(
            e["path"] + ("/" if e["type"] == "dir" else "") for e in value["entries"]
        ) or "(empty directory)"
    if target == "edit":
        return f"Edited {value['path']} ({value['replacements']} replacement(s))."
    if target == "write_file":
        verb = "Created" if value.get("created") else "Wrote"
        return f"{verb} {value['path']} ({value['bytes_written']} bytes)."
    if target == "update_plan":
        return str(value.get("message", "Todo list updated."))
    return render_result(target or table.name, value)
