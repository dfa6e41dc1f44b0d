"""A program's error as Node prints an uncaught one, in the program's own coordinates.

    refactor.js:2:10
      return o.deep.x;
             ^

    TypeError: cannot read property 'x' of undefined
        at f (refactor.js:2:10)
        at refactor.js:5:3

The terminal and the model get the same text: the position, the line it points into
with a caret, the error, and the stack without the runtime's frames; then a hint when
there is one. An error with no position (a limit, an internal failure) is its one line.
"""

from __future__ import annotations

from codemode.js_runtime.models import ExecError

_MAX_SHOWN = 160  # characters of the source line shown around the caret


def render_error(error: ExecError, source: str | None, filename: str = "program.js") -> str:
    """``error`` with its place in ``source`` (the program as it was written)."""
    parts: list[str] = []
    if error.line is not None and source is not None:
        lines = source.replace("\r\n", "\n").split("\n")
        column = max(1, error.column or 1)
        parts.append(f"{filename}:{error.line}:{column}")
        if 1 <= error.line <= len(lines):
            text, caret = _window(lines[error.line - 1], column)
            parts += [text, caret, ""]
        else:
            parts.append("")
    stack = (error.stack or "").strip()
    head = f"{error.name}: {error.message}"
    if not stack.startswith(head):
        stack = "\n".join(filter(None, [head, *_frames(stack)]))
    parts.append(stack.replace("program.js:", f"{filename}:"))
    if error.hint:
        parts.append(f"hint: {error.hint}")
    return "\n".join(parts)


def _frames(stack: str) -> list[str]:
    return [line for line in stack.splitlines() if line.lstrip().startswith("at ")]


def _window(line: str, column: int) -> tuple[str, str]:
    """The source line (cut around ``column`` when long) and the caret line under it.
    Tabs stay tabs in the caret's indentation, so the caret lines up."""
    start = 0
    if len(line) > _MAX_SHOWN:
        start = max(0, min(column - 1 - _MAX_SHOWN // 2, len(line) - _MAX_SHOWN))
    shown = line[start : start + _MAX_SHOWN]
    lead = "…" if start > 0 else ""
    tail = "…" if start + _MAX_SHOWN < len(line) else ""
    before = shown[: max(0, column - 1 - start)]
    pad = "".join("\t" if ch == "\t" else " " for ch in before)
    return f"{lead}{shown}{tail}", f"{' ' * len(lead)}{pad}^"
