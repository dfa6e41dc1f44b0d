"""Making JavaScript errors useful to the model that caused them.

Positions are mapped back to the program's own lines, frames from the host's
prelude are dropped, and where the fix is obvious a hint says it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from codemode.js_runtime.models import ExecError
from codemode.js_runtime.source import WRAPPER_LINES, Program

# `    at fn (file:L:C)` or `    at file:L:C` — QuickJS names every script <input>,
# V8 uses the sourceURL we give the program.
_FRAME = re.compile(
    r"^\s*at (?:(?P<fn>.+?) \()?(?P<file><input>|program\.js):(?P<line>\d+):(?P<col>\d+)\)?\s*$"
)
# V8 parse errors: `program.js:3: SyntaxError: ...` then the line and a caret line.
_V8_PARSE = re.compile(r"^(?:program\.js|<anonymous>):(?P<line>\d+): (?P<name>\w+): (?P<msg>.*)$")
_HEAD = re.compile(r"^(?P<name>[A-Z]\w*(?:Error|Exception)): (?P<msg>.*)$")

_NO_SUCH_GLOBAL = {
    "require", "module", "exports", "process", "fetch", "XMLHttpRequest", "WebAssembly",
    "SharedArrayBuffer", "Atomics", "Buffer", "Deno", "Bun", "setInterval", "window",
    "document", "__dirname", "__filename",
}  # fmt: skip


class Frame(NamedTuple):  # not a dataclass: see ``source.Program``
    function: str | None
    line: int
    column: int


def user_frames(stack: str, program: Program) -> list[Frame]:
    """Frames that lie in the program, with positions in the program's own text."""
    frames = []
    for raw in stack.splitlines():
        m = _FRAME.match(raw)
        if not m:
            continue
        fn = m["fn"]
        if fn and (fn.startswith("__cm") or fn in ("ToolError", "new ToolError")):
            continue
        line = int(m["line"]) - WRAPPER_LINES
        if not 1 <= line <= program.line_count:
            continue
        if fn in ("<eval>", "<anonymous>", "async <anonymous>", "eval"):
            fn = None
        frames.append(Frame(fn, line + program.line_offset, int(m["col"])))
    return frames


def _render_stack(name: str, message: str, frames: Sequence[Frame]) -> str:
    lines = [f"{name}: {message}"]
    for f in frames:
        where = f"program.js:{f.line}:{f.column}"
        lines.append(f"    at {f.function} ({where})" if f.function else f"    at {where}")
    return "\n".join(lines)


def from_thrown(
    name: str, message: str, stack: str, program: Program, tool_names: Sequence[str]
) -> ExecError:
    """An exception the program threw (or a Promise it let reject)."""
    frames = user_frames(stack, program)
    first = frames[0] if frames else None
    return ExecError(
        kind="syntax" if name == "SyntaxError" else "runtime",
        name=name,
        message=message,
        line=first.line if first else None,
        column=first.column if first else None,
        stack=_render_stack(name, message, frames),
        hint=hint_for(name, message, tool_names),
    )


def from_script_error(text: str, program: Program, tool_names: Sequence[str]) -> ExecError:
    """An exception raised while evaluating the wrapped program (usually a SyntaxError)."""
    lines = text.strip().splitlines() or ["Error: unknown error"]
    parse = _V8_PARSE.match(lines[0])
    if parse:
        # V8 reports a parse error's column only as a caret under the source line.
        caret = next((ln for ln in lines[1:4] if ln.strip() == "^"), None)
        col = caret.index("^") + 1 if caret else 1
        name, message = parse["name"], parse["msg"]
        stack = f"    at program.js:{parse['line']}:{col}"
    else:
        head = _HEAD.match(lines[0])
        name, message = (head["name"], head["msg"]) if head else ("Error", lines[0])
        stack = text
    if name == "SyntaxError" and _past_end(stack, program):
        # The parser met the wrapper's closing lines: the program itself ended too soon.
        # Say so at the program's own end, never naming a token it does not contain.
        last = program.code.split("\n")[-1]
        message = "unexpected end of the program"
        stack = f"    at program.js:{program.line_count + WRAPPER_LINES}:{len(last) + 1}"
        error = from_thrown(name, message, stack, program, tool_names)
        error.hint = "something is not finished: a bracket, string, comment or expression"
        return error
    return from_thrown(name, message, stack, program, tool_names)


def _past_end(stack: str, program: Program) -> bool:
    """Whether the stack's first position lies after the program's last line."""
    for raw in stack.splitlines():
        m = _FRAME.match(raw)
        if m:
            return int(m["line"]) - WRAPPER_LINES > program.line_count
    return False


def hint_for(name: str, message: str, tool_names: Sequence[str]) -> str | None:
    """A one-line suggestion when the mistake is a common one."""
    undefined = re.match(r"'?([\w$]+)'? is not defined", message)
    if name == "ReferenceError" and undefined:
        ident = undefined.group(1)
        if ident in tool_names:
            return f"tools are called as tools.{ident}({{...}})"
        if ident in _NO_SUCH_GLOBAL:
            return (
                f"the isolate has no {ident}: files, processes and the network are reached "
                f"only through tools.* ({', '.join(tool_names)})"
            )
    lowered = message.lower()
    if name == "SyntaxError" and "await" in lowered:
        return (
            "await works at the top level and inside async functions: mark the callback "
            "async, or use a for...of loop instead of forEach"
        )
    if (
        "could not load module" in lowered
        or message == "Not supported"
        or (name == "SyntaxError" and ("import" in lowered or "export" in lowered))
    ):
        return "there are no modules here: call tools.* directly"
    return None
