"""Which tool, and which code-mode program, a subprocess is started for.

Kept apart from ``approval.py`` (and free of heavy imports) because the tool registry
sets it on every call.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_program: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "codemode_program", default=None
)
_tool: contextvars.ContextVar[str | None] = contextvars.ContextVar("codemode_tool", default=None)


@contextlib.contextmanager
def program_context(source: str | None) -> Iterator[None]:
    """Mark tool calls made inside this block as coming from the program ``source``."""
    # Restore by value, not by token: the bridge may start a call's coroutine in one
    # context and finish it in another (eager tool starts).
    previous = _program.get()
    _program.set(source)
    try:
        yield
    finally:
        _program.set(previous)


def current_program() -> str | None:
    return _program.get()


@contextlib.contextmanager
def tool_call(name: str) -> Iterator[None]:
    """Mark subprocesses started inside this block as started by tool ``name``."""
    previous = _tool.get()
    _tool.set(name)
    try:
        yield
    finally:
        _tool.set(previous)


def current_tool() -> str:
    return _tool.get() or "shell"
