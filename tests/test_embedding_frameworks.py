"""The model-facing tool in a real framework: examples/pydantic_ai_agent.py driven by
pydantic-ai's own FunctionModel (a model that answers from a Python function), with
the program running in a real isolate against the example's tool."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="pydantic-ai-slim (the test extras) is not installed")

from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

PROGRAM = """
const tickets = await tools.list_tickets();
const cart = tickets.filter(t => t.title.includes("Cart"));
console.log(`${cart.length} of ${tickets.length} open tickets mention the cart`);
return cart.map(t => t.id);
"""


@pytest.fixture
def example() -> Any:
    sys.path.insert(0, str(EXAMPLES))
    try:
        import pydantic_ai_agent

        yield pydantic_ai_agent
    finally:
        sys.path.remove(str(EXAMPLES))


async def test_pydantic_ai_agent_runs_a_program(example: Any, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts[-1]
        if isinstance(last, ToolReturnPart):
            seen["tool_return"] = last.content
            return ModelResponse(parts=[TextPart(f"done: {last.content}")])
        (tool,) = info.function_tools
        seen["tool"] = tool
        return ModelResponse(parts=[ToolCallPart(tool.name, {"code": PROGRAM})])

    agent, host = example.build(str(tmp_path), FunctionModel(model))
    with host:
        result = await agent.run("Which open tickets mention the cart?")
    tool = seen["tool"]
    assert tool.name == "execute"
    assert "list_tickets(args?: ListTicketsArgs): Promise<Record<string, unknown>[]>;" in (
        tool.description
    )
    assert tool.parameters_json_schema["required"] == ["code"]
    text = seen["tool_return"]
    assert text.startswith(
        "2 of 2 open tickets mention the cart\n[return value]\n[\n 1,\n 3\n]\n[1 tool call,"
    )
    assert result.output.startswith("done: 2 of 2 open tickets")


async def test_a_failing_program_reads_as_an_error_the_model_can_fix(
    example: Any, tmp_path: Path
) -> None:
    returns: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts[-1]
        if isinstance(last, ToolReturnPart):
            returns.append(last.content)
            return ModelResponse(parts=[TextPart("gave up")])
        code = "const t = await tools.list_tickets();\nreturn t.map(x => x.titel.length)"
        return ModelResponse(parts=[ToolCallPart("execute", {"code": code})])

    agent, host = example.build(str(tmp_path), FunctionModel(model))
    with host:
        await agent.run("lengths?")
    (text,) = returns
    assert "[error]" in text and "TypeError" in text
    assert "x.titel.length" in text  # the line of the program, shown where it failed
