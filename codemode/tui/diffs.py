"""A file change as the terminal shows it: a unified diff, cut short, coloured."""

from __future__ import annotations

import difflib

from rich.text import Text

DIFF_LINES = 60  # lines of a diff shown under a file change


def unified_diff(path: str, before: str, after: str, max_lines: int = DIFF_LINES) -> str:
    """A unified diff of one file, cut to ``max_lines`` lines."""
    lines = list(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{path}" if before else "/dev/null",
            tofile=f"b/{path}",
        )
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines[:max_lines])
    if len(lines) > max_lines:
        text += f"… {len(lines) - max_lines} more diff lines\n"
    return text


def diff_renderable(diff: str) -> Text:
    """A unified diff with added lines green and removed lines red."""
    text = Text()
    for line in diff.rstrip("\n").splitlines():
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        else:
            style = ""
        text.append(line + "\n", style=style)
    text.rstrip()
    return text
