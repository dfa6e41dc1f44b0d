"""Data at the runtime's boundary: limits in, events out, one result per program."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

LimitName = Literal["timeout", "memory", "tool_calls"]


class _Model(BaseModel):
    # Built on first validation, not at import, to keep `interpreter run` start-up low.
    model_config = ConfigDict(defer_build=True)


class Limits(_Model):
    """Per-program limits. A limit stops the program; the host stays usable."""

    timeout_s: float = Field(30.0, gt=0, description="Wall-clock budget for one program.")
    memory_mb: int = Field(256, gt=0, description="Isolate heap cap.")
    max_tool_calls: int = Field(1000, gt=0, description="Tool calls allowed per program.")
    output_chars: int = Field(
        50_000, gt=0, description="Console output kept; beyond it the head and tail survive."
    )


class LogEntry(_Model):
    level: Literal["log", "info", "warn", "error", "debug", "elided"]
    text: str


@dataclass(slots=True)
class ToolCallRecord:
    """One tool call a program made, as shown in ``--json`` and session logs.

    A plain dataclass, not a pydantic model: it is created and updated on the hot path
    of every call, and pydantic still validates and serialises it inside ExecResult.
    """

    id: int
    name: str
    args: Any
    ok: bool | None = None  # None while running, or when the program stopped first
    duration_ms: float | None = None
    error: str | None = None


class ExecError(_Model):
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


class ExecResult(_Model):
    """The outcome of one program."""

    ok: bool
    value: Any = None
    output: str = ""
    logs: list[LogEntry] = Field(default_factory=list)
    output_truncated: bool = False
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    error: ExecError | None = None
    duration_ms: float = 0.0
    engine: str = ""
    # True when a limit forced a fresh isolate, so persistent globals were lost.
    isolate_reset: bool = False


class LogEvent(_Model):
    type: Literal["log"] = "log"
    level: str
    text: str


class ToolCallStarted(_Model):
    type: Literal["tool_call.started"] = "tool_call.started"
    call: ToolCallRecord


class ToolCallFinished(_Model):
    type: Literal["tool_call.finished"] = "tool_call.finished"
    call: ToolCallRecord


ExecEvent = LogEvent | ToolCallStarted | ToolCallFinished
