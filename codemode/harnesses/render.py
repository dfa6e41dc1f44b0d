"""Tool results and program outcomes as the text a model reads.

Structured results stay structured for code mode; in the classic dialect a result is
shown as its tool's ``render`` makes it (``Tool.render``, e.g. numbered file lines for
read_file), and a tool without one as compact JSON.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from codemode.js_runtime.models import ExecResult
from codemode.js_runtime.outcome import Completed, Terminated, Yielded
from codemode.js_runtime.outcome import Outcome as ProgramOutcome

if TYPE_CHECKING:
    from codemode.tools.base import Tool


def render_result(tool: Tool | None, value: object) -> str:
    """A tool's JSON result as text for the model: the tool's own ``render``, else the
    text itself or compact JSON."""
    text = tool.text(value) if tool is not None else None
    if text is not None:
        return text
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def render_exec_result(outcome: ProgramOutcome | ExecResult, source: str | None = None) -> str:
    """A code-mode program's outcome: its output, return value and any error (shown in
    ``source``, the program, as Node shows an uncaught error); for a program still
    running, how to come back to it. (An ``ExecResult`` is a program run to its end.)"""
    if isinstance(outcome, ExecResult):
        outcome = Completed("", outcome, outcome.output)
    parts = []
    if outcome.output:
        parts.append(outcome.output.rstrip("\n"))
    if isinstance(outcome, Yielded):
        cell = outcome.cell_id
        parts.append(
            f'[still running as cell {cell}: call wait({{"cell_id": "{cell}"}})'
            ' for more output or its result; add "terminate": true to stop it]'
        )
        return "\n".join(parts)
    if isinstance(outcome, Terminated):
        parts.append(f"[cell {outcome.cell_id} terminated: the program was stopped]")
        return "\n".join(parts)
    result = outcome.result
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
