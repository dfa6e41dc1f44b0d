"""The code-mode runtime: JavaScript programs run against tools someone else runs.

Its one API is ``CodeSession`` (``session.py``, whose docstring states it): opened
with ``Limits``, it runs programs as cells, each with a ``Delegate`` of its own (how
that program's nested tool calls and notifications leave the runtime) and a yield rule
(``YieldWhen``), each ``execute``/``wait``/``terminate`` ending in
one ``Outcome``: ``Completed``, ``Yielded`` or ``Terminated``. Programs run in engine
worker processes (``worker.py``) holding a quickjs-ng (the default) or V8 isolate.
This package imports nothing from the rest of codemode but the ``tool_terms`` leaf.
Names load on first use: the worker imports this package's engine modules and must
not pay for the session's imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codemode.js_runtime.cells import YieldWhen
    from codemode.js_runtime.delegate import Delegate, NestedCall, ToolError, ToolNames, ToolSet
    from codemode.js_runtime.engine import ENGINES, Engine
    from codemode.js_runtime.models import (
        ExecError,
        ExecEvent,
        ExecResult,
        HostEvent,
        Limits,
        LogEntry,
        LogEvent,
        ToolCallFinished,
        ToolCallRecord,
        ToolCallStarted,
    )
    from codemode.js_runtime.outcome import (
        AlreadyWaiting,
        CellBusy,
        Completed,
        Outcome,
        Terminated,
        UnknownCell,
        Yielded,
    )
    from codemode.js_runtime.session import CodeSession

_HOMES = {
    "CodeSession": "session",
    "YieldWhen": "cells",
    "ENGINES": "engine",
    "Engine": "engine",
    **dict.fromkeys(("Delegate", "NestedCall", "ToolError", "ToolNames", "ToolSet"), "delegate"),
    **dict.fromkeys(
        ("AlreadyWaiting", "CellBusy", "Completed", "Outcome", "Terminated", "UnknownCell",
         "Yielded"),
        "outcome",
    ),
}

__all__ = [
    "ENGINES",
    "AlreadyWaiting",
    "CellBusy",
    "CodeSession",
    "Completed",
    "Delegate",
    "Engine",
    "ExecError",
    "ExecEvent",
    "ExecResult",
    "HostEvent",
    "Limits",
    "LogEntry",
    "LogEvent",
    "NestedCall",
    "Outcome",
    "Terminated",
    "ToolCallFinished",
    "ToolCallRecord",
    "ToolCallStarted",
    "ToolError",
    "ToolNames",
    "ToolSet",
    "UnknownCell",
    "YieldWhen",
    "Yielded",
]


def __getattr__(name: str) -> Any:
    # lazy: names load on first use (the session loads the engine pool)
    if name in __all__:
        import importlib

        module = importlib.import_module(f"codemode.js_runtime.{_HOMES.get(name, 'models')}")
        return getattr(module, name)
    raise AttributeError(f"module 'codemode.js_runtime' has no attribute {name!r}")
