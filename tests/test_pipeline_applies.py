"""Interceptors that act on some tools' calls only (``Pipeline.use(..., applies=...)``):
the calls of other tools skip them, decided once per tool object, and a tool replaced
under the same name is decided again (the trust policy is never skipped for it). Real
registries, sandbox sessions and files."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from codemode.sandbox.session import SandboxSession
from codemode.sandbox.settings import SandboxSettings
from codemode.tools import ToolContext, ToolError
from codemode.tools.base import Tool, define_tool
from codemode.tools.pipeline import Call, Next
from codemode.tools.registry import ToolRegistry


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "codemode-home"
    monkeypatch.setenv("CODEMODE_HOME", str(h))
    return h


def _echo() -> Tool:
    async def echo(text: str) -> str:
        """Echo the text."""
        return text

    return define_tool(echo)


async def test_an_interceptor_meets_only_the_calls_of_the_tools_it_applies_to(
    tmp_path: Path,
) -> None:
    seen: list[str] = []
    asked: list[str] = []

    async def loud(call: Call, next_: Next) -> Any:
        seen.append(call.name)
        return str(await next_(call)).upper()

    def applies(tool: Tool) -> bool:
        asked.append(tool.name)
        return tool.description == "Echo the text."

    registry = ToolRegistry([_echo()])

    @registry.tool
    async def quiet(text: str) -> str:
        """Echo, untouched by `loud`."""
        return text

    registry.use(loud, applies=applies)
    ctx = ToolContext(workspace=tmp_path)
    for _ in range(3):
        assert await registry.invoke("echo", {"text": "a"}, ctx) == "A"
        assert await registry.invoke("quiet", {"text": "b"}, ctx) == "b"
    assert seen == ["echo"] * 3
    assert sorted(asked) == ["echo", "quiet"]  # once per tool, not per call

    # A name no tool has meets every interceptor, then the refusal naming the nearest.
    with pytest.raises(ToolError, match=r"tools\.ech is not a tool — did you mean tools\.echo"):
        await registry.invoke("ech", {}, ctx)
    assert seen[-1] == "ech"

    # Replaced under the same name by a tool it does not apply to: decided again.
    quiet_tool = registry.get("quiet")
    assert quiet_tool is not None
    registry.add(dataclasses.replace(quiet_tool, name="echo"))
    assert await registry.invoke("echo", {"text": "c"}, ctx) == "c"
    assert seen[-1] == "ech"
    assert sorted(asked) == ["echo", "echo", "quiet"]


async def test_a_host_tool_replaced_by_an_untrusted_one_of_the_same_name_is_refused(
    tmp_path: Path,
) -> None:
    registry = ToolRegistry([_echo()])
    strict = ToolContext(workspace=tmp_path, sandbox=SandboxSession(
        tmp_path, SandboxSettings(sandbox_mode="read-only")))
    # Trusted as host code: the trust policy has nothing to decide, the call runs.
    assert await registry.invoke("echo", {"text": "hi"}, strict) == "hi"
    host_tool = registry.get("echo")
    assert host_tool is not None
    registry.add(dataclasses.replace(host_tool, trust="untrusted"))
    with pytest.raises(ToolError, match="is refused: the sandbox mode is read-only"):
        await registry.invoke("echo", {"text": "hi"}, strict)
    # A copy of the registry keeps the policy for it too.
    with pytest.raises(ToolError, match="is refused: the sandbox mode is read-only"):
        await registry.copy().invoke("echo", {"text": "hi"}, strict)


async def test_a_plain_shell_command_skips_nothing_a_patch_needs(tmp_path: Path) -> None:
    """The patch route applies to the shell (a tool taking a ``command``): a patch sent
    through it is still applied, and the other built-ins never meet the route."""
    from codemode.tools import builtin_registry

    registry = builtin_registry()
    ctx = ToolContext(workspace=tmp_path)
    patch = "*** Begin Patch\n*** Add File: new.txt\n+made\n*** End Patch\n"
    await registry.invoke("shell", {"command": f"apply_patch <<'EOF'\n{patch}EOF"}, ctx)
    assert (tmp_path / "new.txt").read_text() == "made\n"
    chain = registry.pipeline.composed(registry.get("read_file"), registry._last)
    shell_chain = registry.pipeline.composed(registry.get("shell"), registry._last)
    assert chain is registry._last  # no interceptor has anything to do for read_file
    assert shell_chain is not registry._last
