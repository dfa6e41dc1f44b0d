"""The isolate tool host: JavaScript programs run against Python tools.

``Bridge`` runs programs; ``Engine`` is the seam to the two backends (quickjs-ng, the
default, and V8 through mini-racer), which are imported only when chosen.
"""

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
