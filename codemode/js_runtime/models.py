"""Data at the runtime's boundary: limits in, events out, one result per program.

These are stdlib dataclasses rather than pydantic models: importing pydantic costs
more than the rest of `interpreter run hello.js` together, and none of this data
comes from outside. Pydantic still reads and writes them where a schema is wanted
(``pydantic.TypeAdapter(ExecResult)``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

LimitName = Literal["timeout", "memory", "tool_calls"]

# The memory cap an agent session gives its programs' isolates (assembly/session.py).
AGENT_MEMORY_MB = 512


@dataclass(frozen=True)
class Limits:
    """Per-program limits. A limit stops the program; the host stays usable."""

    timeout_s: float = 30.0  # wall-clock budget for one program, measured outside it
    memory_mb: int = 256  # isolate heap cap (and, beside it, the worker's OS memory cap)
    max_tool_calls: int = 1000  # tool calls allowed per program
    # Console output kept, and the return value's size; beyond it head and tail survive.
    output_chars: int = 50_000

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Limits.{f.name} must be a positive number, got {value!r}")


@dataclass(slots=True)
class LogEntry:
    level: Literal["log", "info", "warn", "error", "debug", "elided"]
    text: str


@dataclass(slots=True)
class ToolCallRecord:
    """One tool call a program made, as shown in ``--json`` and session logs."""

    id: int
    name: str
    args: Any  # None once finished, for calls past 16 Mi characters of them (nested.py)
    ok: bool | None = None  # None while running, or when the program stopped first
    duration_ms: float | None = None
    error: str | None = None


@dataclass
class ExecError:
    """Why a program did not finish normally, located in the program's own source."""

    kind: Literal["syntax", "runtime", "limit", "internal"]
    name: str
    message: str
    line: int | None = None
    column: int | None = None
    stack: str | None = None
    hint: str | None = None
    limit: LimitName | None = None

    def one_line(self) -> str:
        """``SyntaxError at 3:14: unexpected token`` — the form the CLI prints."""
        where = f" at {self.line}:{self.column}" if self.line is not None else ""
        hint = f" ({self.hint})" if self.hint else ""
        return f"{self.name}{where}: {self.message}{hint}"


@dataclass
class ExecResult:
    """The outcome of one program."""

    ok: bool
    value: Any = None
    output: str = ""
    logs: list[LogEntry] = field(default_factory=list)
    output_truncated: bool = False
    value_truncated: bool = False  # the value is then text: its head and tail
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    error: ExecError | None = None
    duration_ms: float = 0.0
    engine: str = ""
    # True when a limit forced a fresh isolate, so persistent globals were lost.
    isolate_reset: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, default=str)


@dataclass(slots=True)
class LogEvent:
    level: str
    text: str
    type: Literal["log"] = "log"


@dataclass(slots=True)
class HostEvent:
    """A program's message to its host on the typed channel a host's setup script takes
    from the prelude (``__cm.hostChannel()``, a function of ``(kind, data)``): the
    runtime gives ``kind`` no meaning; it is not console output and not counted as such."""

    kind: str
    data: str
    type: Literal["host"] = "host"


@dataclass(slots=True)
class ToolCallStarted:
    call: ToolCallRecord
    type: Literal["tool_call.started"] = "tool_call.started"


@dataclass(slots=True)
class ToolCallFinished:
    call: ToolCallRecord
    type: Literal["tool_call.finished"] = "tool_call.finished"


@dataclass(slots=True)
class CellStarted:
    """A program began as cell ``cell_id`` (sent before any of its calls)."""

    source: str
    type: Literal["cell.started"] = "cell.started"


@dataclass(slots=True)
class CellFinished:
    """The program ran to its end (value, error or limit): sent whether or not anyone
    waits on the cell; not sent for a cell that was terminated or closed."""

    result: ExecResult
    type: Literal["cell.finished"] = "cell.finished"


ExecEvent = (
    CellStarted | CellFinished | LogEvent | HostEvent | ToolCallStarted | ToolCallFinished
)
