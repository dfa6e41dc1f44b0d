"""What a model is offered for one tool (``ToolSpec``), whichever wire carries it.

The tools build these from their definitions (``codemode.tools.surfaces``) and the
providers send them: a term both speak, so the tools import nothing of a provider and a
provider nothing of a tool.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class FreeformSpec(BaseModel):
    """A tool whose input is raw text rather than JSON (Responses "custom" tools).

    Wires without freeform tools offer the tool as a function taking one string
    property named ``field``; the agent unwraps it the same way either way.
    """

    field: str = "input"
    # A lark grammar constraining the text, where the wire supports one.
    grammar: str | None = None


class ToolSpec(BaseModel):
    name: str
    description: str
    # JSON Schema of the arguments object (also the fallback shape of a freeform tool).
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    freeform: FreeformSpec | None = None


def function_parameters(spec: ToolSpec) -> dict[str, Any]:
    """The JSON schema a tool is offered with on a wire without freeform tools."""
    if spec.freeform is None:
        return spec.parameters
    field = spec.freeform.field
    return {
        "type": "object",
        "properties": {field: {"type": "string", "description": f"The {field} text."}},
        "required": [field],
        "additionalProperties": False,
    }
