"""What the two wire protocols share: tools as Codex defines them, content items, and
the failure of a tool the client ran. (Outcomes are the runtime's, ``js_runtime.outcome``;
each exec's delegate is an ``execution.CodexExecution``.)

The records are ``NamedTuple``s, not dataclasses: the host's start, which Codex waits
for, made each dataclass for several times what a named tuple costs (the host's
records together were a tenth of it).
"""

from __future__ import annotations

import re
from typing import Any, Literal, NamedTuple

DEFAULT_YIELD_MS = 10_000  # Codex's exec description: "Defaults to 10000 ms"
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


class LimitMarker(TextItem):
    """The text item that says where a report's bounded output dropped its middle
    (``bounded_output.py``); truncation keeps it in its place (``truncation.py``)."""

    __slots__ = ()


class ImageItem(NamedTuple):
    image_url: str
    detail: ImageDetail | None = None


ContentItem = TextItem | ImageItem


class ToolFailed(Exception):
    """The client ran the tool and it failed; the message goes to the program."""
