"""Cutting long text in the middle: the one way output is shortened everywhere.

The start of a program's (or a command's) output says what it set out to do and the
end says how it finished; the middle of a runaway loop is what a reader can spare.
"""

from __future__ import annotations


def marker(count: int, what: str = "") -> str:
    """``[... 120 characters elided ...]``, or ``... characters of WHAT elided ...``."""
    of = f" of {what}" if what else ""
    return f"[... {count} characters{of} elided ...]"


def join_elided(head: str, count: int, tail: str, what: str = "") -> str:
    """``head``, the marker for ``count`` characters on a line of its own, ``tail``."""
    sep = "" if not head or head.endswith("\n") else "\n"
    return f"{head}{sep}{marker(count, what)}\n{tail}"


def elide_middle(text: str, limit: int, what: str = "") -> tuple[str, bool]:
    """``text`` cut to about ``limit`` characters, head and tail kept; and whether it
    was cut."""
    if len(text) <= limit:
        return text, False
    tail = limit // 2
    head = limit - tail
    return join_elided(text[:head], len(text) - head - tail, text[len(text) - tail :], what), True
