"""What the two wire protocols share: tools as Codex defines them, content items,
outcomes, and the delegate a session hands nested tool calls and notifications to.

The records are ``NamedTuple``s, not dataclasses: the host's start, which Codex waits
for, made each dataclass for several times what a named tuple costs (the host's
records together were a tenth of it).
"""

from __future__ import annotations

import re
from typing import Any, Literal, NamedTuple, Protocol

DEFAULT_YIELD_MS = 10_000  # Codex's exec description: "Defaults to 10000 ms"
DEFAULT_MAX_OUTPUT_TOKENS = 10_000
ImageDetail = Literal["auto", "low", "high", "original"]


class ToolSpec(NamedTuple):
    """One nested tool as the client enabled it for an exec."""

    name: str  # what Codex calls it (and what the program sees, normalised)
    tool_name: str
    namespace: str | None = None
    description: str = ""
    freeform: bool = False
    # As the client sent them (the framed protocol: a JSON value; gRPC: the JSON text,
    # undecoded); the runtime reads neither.
    input_schema: Any = None
    output_schema: Any = None

    @property
    def global_name(self) -> str:
        return normalize_identifier(self.name)


def normalize_identifier(name: str) -> str:
    """The JavaScript identifier a tool is reached by: ``tools.<identifier>`` (Codex's rule:
    every character outside ``[A-Za-z0-9_$]``, and a leading digit, becomes ``_``)."""
    ident = re.sub(r"[^A-Za-z0-9_$]", "_", name)
    if ident[:1].isdigit():
        ident = "_" + ident[1:]
    return ident or "_"


class TextItem(NamedTuple):
    text: str


class ImageItem(NamedTuple):
    image_url: str
    detail: ImageDetail | None = None


ContentItem = TextItem | ImageItem


class Outcome(NamedTuple):
    """One observation of a cell: it yielded (still running), completed, or was terminated."""

    kind: Literal["yielded", "completed", "terminated"]
    cell_id: str
    items: list[ContentItem]
    error_text: str | None = None
    duration_ns: int = 0


class NestedCall(NamedTuple):
    """A tool call a program made, for the client to run."""

    cell_id: str
    execution_id: str
    runtime_call_id: str
    sequence: int
    tool: ToolSpec
    input: Any


class ToolFailed(Exception):
    """The client ran the tool and it failed; the message goes to the program."""


class Delegate(Protocol):
    """Where a session's nested tool calls and notifications go (the client)."""

    async def call_tool(self, call: NestedCall) -> Any:
        """The tool's result (JSON); raises ``ToolFailed``."""
        ...

    def notify(self, cell_id: str, execution_id: str, call_id: str, text: str) -> None: ...

    def cell_closed(self, cell_id: str, execution_id: str, final_sequence: int) -> None: ...
