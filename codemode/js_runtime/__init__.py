"""The isolate tool host: JavaScript programs run against Python tools.

``Bridge`` runs programs, each in an engine worker process (``worker.py``) holding a
quickjs-ng (the default) or V8 isolate. Names load on first use: the worker imports
this package's engine modules and must not pay for the bridge's imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codemode.js_runtime.bridge import Bridge
    from codemode.js_runtime.engine import ENGINES, Engine
    from codemode.js_runtime.models import (
        ExecError,
        ExecEvent,
        ExecResult,
        Limits,
        LogEntry,
        LogEvent,
        ToolCallFinished,
        ToolCallRecord,
        ToolCallStarted,
    )

__all__ = [
    "ENGINES",
    "Bridge",
    "Engine",
    "ExecError",
    "ExecEvent",
    "ExecResult",
    "Limits",
    "LogEntry",
    "LogEvent",
    "ToolCallFinished",
    "ToolCallRecord",
    "ToolCallStarted",
]


def __getattr__(name: str) -> Any:
    if name == "Bridge":
        # lazy: names load on first use (the bridge loads the engine pool)
        from codemode.js_runtime.bridge import Bridge

        return Bridge
    if name in ("ENGINES", "Engine"):
        # lazy: names load on first use (the bridge loads the engine pool)
        from codemode.js_runtime import engine

        return getattr(engine, name)
    if name in __all__:
        # lazy: names load on first use (the bridge loads the engine pool)
        from codemode.js_runtime import models

        return getattr(models, name)
    raise AttributeError(f"module 'codemode.js_runtime' has no attribute {name!r}")
