"""Tool results reach the program whole, whichever way the engine is handed them: V8
takes results that fit its inbox through shared memory (one script compiled once) and
larger ones through a script of their own; QuickJS always through a call."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.host.program_delegate import RegistryDelegate
from codemode.js_runtime import CodeSession, Completed, Limits
from codemode.tools.context import ToolContext
from codemode.tools.registry import ToolRegistry

# From what fits the V8 inbox (256 KB of UTF-16 JSON) to several times more.
SIZES = [0, 1, 1000, 130_000, 131_060, 131_100, 400_000]


def _session(engine: str, tmp_path: Path) -> CodeSession:
    reg = ToolRegistry()

    @reg.tool
    async def echo(text: str) -> dict:
        """Gives the text back."""
        return {"text": text}

    return CodeSession(
        RegistryDelegate(reg, ToolContext(tmp_path)),
        tools=reg,
        engine=engine,
        limits=Limits(timeout_s=60, memory_mb=128),
    )


@pytest.mark.parametrize("engine", ["quickjs", "v8"])
async def test_results_of_every_size_arrive_whole(engine: str, tmp_path: Path) -> None:
    session = _session(engine, tmp_path)
    try:
        for size in SIZES:
            # Non-ASCII, a character outside the BMP and the JSON escapes, repeated.
            program = (
                f"const unit = 'é😀\"\\\\\\n<x';\n"
                f"const sent = unit.repeat({size} / 8 | 0).padEnd({size}, 'z');\n"
                "const got = await tools.echo({text: sent});\n"
                "const again = await tools.echo({text: 'short'});\n"
                "return [got.text === sent, got.text.length, again.text];"
            )
            outcome = await session.execute(program)
            assert isinstance(outcome, Completed)
            assert outcome.result.ok, outcome.result.error
            assert outcome.result.value == [True, size, "short"], size
    finally:
        await session.close()
