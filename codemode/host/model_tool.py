"""A ToolHost as one tool a model calls: what a framework needs to offer it.

``ToolHost.model_tool()`` gives the name, the description (what the tool does and the
TypeScript declarations of every ``tools.*``), the JSON schema of its one argument and
an async handler that runs the program and returns its outcome as the text a model
reads: the same description ``mcp-server`` offers and the same rendering the agent
gives its own model (``render_exec_result``), so no framework writes them again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

CODE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "The JavaScript program to run."}},
    "required": ["code"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class ModelTool:
    """A model-facing tool: hand ``name``, ``description`` and ``parameters`` to the
    model, and call ``handler(code)`` (or the tool itself) with the program it wrote."""

    name: str
    description: str
    handler: Callable[[str], Awaitable[str]]
    parameters: dict[str, Any] = field(default_factory=lambda: dict(CODE_PARAMETERS))

    async def __call__(self, code: str) -> str:
        return await self.handler(code)

    def function_schema(self) -> dict[str, Any]:
        """The tool as an OpenAI-style function definition (``{"type": "function", ...}``)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }
