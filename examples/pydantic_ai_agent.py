"""Code mode in a pydantic-ai agent: the model writes one JavaScript program instead of
one tool call per step.

    pip install 'codemode[agent]' pydantic-ai-slim[openai]
    python examples/pydantic_ai_agent.py WORKSPACE "How many open tickets mention 'cart'?"

``ToolHost.model_tool()`` gives the tool whole (name, description with the TypeScript
declarations, JSON schema, handler); ``Tool.from_schema`` hands it to pydantic-ai as is.
The model defaults to ``openai:gpt-4o-mini`` (set ``OPENAI_API_KEY``); the tests run this
file with pydantic-ai's own ``FunctionModel``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from pydantic_ai import Agent, Tool

from codemode import ToolHost

TICKETS = [
    {"id": 1, "title": "Cart total is off by one cent", "open": True},
    {"id": 2, "title": "Receipt misses the currency", "open": False},
    {"id": 3, "title": "Cart forgets items after login", "open": True},
]


def code_mode_tool(host: ToolHost) -> Tool[None]:
    """The host as one pydantic-ai tool."""
    tool = host.model_tool()
    return Tool.from_schema(
        tool.handler, name=tool.name, description=tool.description, json_schema=tool.parameters
    )


def build(workspace: str, model: Any = "openai:gpt-4o-mini") -> tuple[Agent[None, str], ToolHost]:
    host = ToolHost(workspace)  # sandboxed: workspace-write, no network

    @host.tool
    def list_tickets(open_only: bool = True) -> list[dict[str, Any]]:
        """Tickets from the tracker."""
        return [t for t in TICKETS if t["open"] or not open_only]

    agent = Agent(
        model,
        tools=[code_mode_tool(host)],
        instructions="Answer by writing one program for the execute tool.",
    )
    return agent, host


async def main(workspace: str, question: str) -> int:
    agent, host = build(workspace)
    with host:
        result = await agent.run(question)
    print(result.output)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2])))
