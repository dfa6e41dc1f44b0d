"""What a classic-dialect tool call sends back to the model is bounded whatever the
tool returns (an MCP server or an embedder's tool can return any size): the start and
the end kept, the middle marked, as for a command's output."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from codemode.agent.runner import ToolRunner
from codemode.harnesses.calls import run_classic_call
from codemode.providers.base import ToolCall
from codemode.tools.context import ToolContext
from codemode.tools.registry import ToolRegistry
from codemode.tools.shell import MAX_OUTPUT_CHARS


async def test_a_huge_tool_result_reaches_the_model_cut_in_the_middle(tmp_path: Path) -> None:
    registry = ToolRegistry()

    @registry.tool
    async def flood(n: int) -> str:
        """Return n characters."""
        return "HEAD" + "x" * n + "TAIL"

    @registry.tool
    async def fail_loudly(n: int) -> str:
        """Fail with an n-character message."""
        raise RuntimeError("E" * n)

    events: list[BaseModel] = []
    runner = ToolRunner(registry, ToolContext(workspace=tmp_path), events.append)
    call = ToolCall(id="c1", name="flood", arguments='{"n": 3000000}')
    outcome = await run_classic_call(call, runner, lambda name, args, value: str(value))
    assert len(outcome.content) < MAX_OUTPUT_CHARS + 200
    assert outcome.content.startswith("HEAD") and outcome.content.endswith("TAIL")
    assert "characters elided" in outcome.content
    small = await run_classic_call(
        ToolCall(id="c2", name="flood", arguments='{"n": 10}'), runner,
        lambda name, args, value: str(value),
    )  # fmt: skip
    assert small.content == "HEAD" + "x" * 10 + "TAIL"
    failed = await run_classic_call(
        ToolCall(id="c3", name="fail_loudly", arguments='{"n": 3000000}'), runner,
        lambda name, args, value: str(value),
    )  # fmt: skip
    assert failed.is_error and len(failed.content) < MAX_OUTPUT_CHARS + 200
