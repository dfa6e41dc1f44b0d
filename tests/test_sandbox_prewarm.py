"""``SandboxSession.prewarm``: what the first command would wait for is done beforehand,
in the background, without changing what the first command decides or reports."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from codemode.sandbox.session import SandboxSession
from codemode.sandbox.settings import SandboxSettings
from codemode.tools import ToolContext, builtin_registry


def _wait_for(condition, seconds: float = 30.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_prewarm_loads_the_rules_before_any_command(tmp_path: Path) -> None:
    s = SandboxSession(tmp_path, SandboxSettings(approval_policy="never"))
    try:
        assert s.gate._policy is None
        s.prewarm()  # no running loop: the thread only
        assert _wait_for(lambda: s.gate._policy is not None)
        assert s._prestarting is None
    finally:
        s.close()


async def test_a_broken_rules_file_still_fails_the_first_command_after_prewarm(
    tmp_path: Path,
) -> None:
    rules = tmp_path / "broken.rules"
    rules.write_text("prefix_rule(pattern = [\n")  # never closed
    s = SandboxSession(tmp_path, SandboxSettings(approval_policy="never", rules=[rules]))
    try:
        s.prewarm()
        time.sleep(0.5)  # let the warm-up fail first
        with pytest.raises(Exception, match="cannot load the execpolicy rules"):
            await builtin_registry().invoke(
                "shell", {"command": "echo hi"}, ToolContext(workspace=tmp_path, sandbox=s)
            )
    finally:
        s.close()


async def test_in_a_running_loop_the_rules_load_once_the_loop_waits(tmp_path: Path) -> None:
    """What is left of building the session (and the first model request) goes first:
    the rules and the parser load once the event loop waits, not before."""
    import asyncio

    s = SandboxSession(tmp_path, SandboxSettings(approval_policy="never"))
    try:
        s.prewarm()
        time.sleep(0.5)  # the session still being built: the loop has not waited yet
        assert s.gate._policy is None
        await asyncio.sleep(0)
        assert await asyncio.to_thread(_wait_for, lambda: s.gate._policy is not None)
    finally:
        s.close()
