"""Tool results as the text a model reads in the classic dialect.

Structured results stay structured for code mode; a model reading them as a reply,
though, does better with familiar text: numbered file lines, ``path:line: text`` for
search hits, an exit code above command output. Tools without a renderer here are
shown as compact JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from codemode.js_runtime.models import ExecResult


def _shell(r: dict[str, Any]) -> str:
    head = f"exit code: {r['exit_code']}" + (" (timed out)" if r.get("timed_out") else "")
    return f"{head}\n{r.get('output', '')}".rstrip("\n")


def _read_file(r: dict[str, Any]) -> str:
    lines = r["content"].splitlines()
    width = len(str(r["start_line"] + len(lines)))
    body = "\n".join(f"{r['start_line'] + i:>{width}}\t{line}" for i, line in enumerate(lines))
    if r.get("truncated"):
        body += (
            f"\n[lines {r['start_line']}-{r['end_line']} of {r['total_lines']}; "
            f"continue with offset={r['end_line'] + 1}]"
        )
    if r.get("encoding", "utf-8") != "utf-8":
        body += (
            f"\n[{r['path']} is not valid UTF-8: read as {r['encoding']}, one character per "
            "byte; write_file and edit keep that encoding]"
        )
    return body or f"[{r['path']} is empty]"


def _grep(r: dict[str, Any]) -> str:
    if r.get("context"):
        lines = _with_context(r["matches"], r["context"])
    else:
        lines = [f"{m['path']}:{m['line']}: {m['text']}" for m in r["matches"]]
    if r.get("truncated"):
        lines.append("[more matches left out; narrow the pattern or raise max_results]")
    if r.get("latin1_files") and r["matches"]:
        lines.append(f"[not valid UTF-8, searched as Latin-1: {', '.join(r['latin1_files'])}]")
    return "\n".join(lines) or f"no matches ({r.get('files_searched', 0)} files searched)"


def _with_context(matches: list[dict[str, Any]], context: list[dict[str, Any]]) -> list[str]:
    """Matches and their context lines as grep -C prints them: ``path:N: text`` for a
    match, ``path-N- text`` for context, ``--`` between groups that do not touch."""
    rows = [(m["path"], m["line"], ":", m["text"]) for m in matches]
    rows += [(c["path"], c["line"], "-", c["text"]) for c in context]
    order = {path: i for i, path in enumerate(dict.fromkeys(m["path"] for m in matches))}
    rows.sort(key=lambda row: (order.get(row[0], len(order)), row[1]))
    lines: list[str] = []
    last: tuple[str, int] | None = None
    for path, n, mark, text in rows:
        if last is not None and (last[0] != path or n > last[1] + 1):
            lines.append("--")
        lines.append(f"{path}{mark}{n}{mark} {text}")
        last = (path, n)
    return lines


def _glob(r: dict[str, Any]) -> str:
    lines = list(r["matches"])
    if r.get("truncated"):
        lines.append("[more files matched; narrow the pattern]")
    return "\n".join(lines) or "no files matched"


def _apply_patch(r: dict[str, Any]) -> str:
    marks = {"add": "A", "update": "M", "delete": "D", "move": "R"}
    lines = []
    for change in r.get("changes", []):
        mark = marks.get(change.get("kind", ""), "?")
        target = change.get("move_to") or change.get("to")
        path = change.get("path") or change.get("from")
        lines.append(f"{mark} {path}" + (f" -> {target}" if target else ""))
    return "patch applied:\n" + "\n".join(lines) if lines else "patch applied (no changes)"


RENDERERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "shell": _shell,
    "read_file": _read_file,
    "grep": _grep,
    "glob": _glob,
    "apply_patch": _apply_patch,
}


def _mcp_content(r: dict[str, Any]) -> str | None:
    """An MCP result of text blocks only, as its text; None for anything else."""
    blocks = r.get("content")
    if set(r) != {"content"} or not isinstance(blocks, list):
        return None
    if not all(isinstance(b, dict) and b.get("type") == "text" for b in blocks):
        return None
    return "\n".join(str(b.get("text", "")) for b in blocks)


def render_result(tool: str, value: Any) -> str:
    """A tool's JSON result as text for the model."""
    if tool.startswith("mcp__") and isinstance(value, dict):
        text = _mcp_content(value)
        if text is not None:
            return text
    renderer = RENDERERS.get(tool)
    if renderer is not None and isinstance(value, dict):
        try:
            return renderer(value)
        except (KeyError, TypeError):
            pass  # an unexpected shape: fall back to JSON rather than fail the call
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def render_exec_result(result: ExecResult, source: str | None = None) -> str:
    """A code-mode program's outcome: its output, return value and any error (shown in
    ``source``, the program, as Node shows an uncaught error)."""
    parts = []
    if result.output:
        parts.append(result.output.rstrip("\n"))
    if result.error is None and result.value is not None:
        value = (
            result.value
            if isinstance(result.value, str)
            else json.dumps(result.value, ensure_ascii=False, indent=1)
        )
        parts.append(f"[return value]\n{value}")
    if result.error is not None:
        from codemode.js_runtime.error_render import render_error

        parts.append(f"[error]\n{render_error(result.error, source)}")
        if result.isolate_reset:
            parts.append("[the isolate was reset: globals from earlier programs are gone]")
    calls = len(result.tool_calls)
    failed = sum(1 for c in result.tool_calls if c.ok is False)
    summary = f"[{calls} tool call{'s' if calls != 1 else ''}"
    summary += f", {failed} failed" if failed else ""
    summary += f", {result.duration_ms:.0f} ms]"
    parts.append(summary)
    return "\n".join(parts)
