"""A harness as the model sees it, for ``interpreter harness show``."""

from __future__ import annotations

import platform
import shutil
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.harnesses.base import Dialect, PromptEnv

if TYPE_CHECKING:
    from codemode.tools.registry import ToolRegistry


def describe_harness(
    name: str, dialect: Dialect, cwd: Path, tools: ToolRegistry
) -> dict[str, Any]:
    """The rendered prompt and the tools offered (function schemas; in code mode the
    ``exec`` tool, whose description carries the TypeScript declarations). ``tools`` is
    what a session has (``agent.build.session_registry()``): the caller builds it, so
    this module stays below the composition root."""
    from codemode.harnesses.catalog import get_harness

    harness = get_harness(name, dialect)
    registry = harness.registry(tools)
    specs = harness.tool_specs(registry)
    env = PromptEnv(
        cwd=str(cwd),
        date=date.today().isoformat(),
        platform=f"{platform.system()} {platform.machine()}",
        shell="bash" if shutil.which("bash") else "sh",
        sandbox_mode="workspace-write",
        approval_policy="on-request",
    )
    shown: dict[str, Any] = {
        "name": harness.name,
        "dialect": dialect,
        "instructions": harness.instructions(env),
        "tools": [
            {"name": s.name, "description": s.description, "parameters": s.parameters}
            for s in specs
        ],
        "tool_names": registry.names(),
    }
    table = getattr(harness, "table", None)
    if table is not None and table.wire:
        shown["wire"] = table.wire  # the wire the emulated agent's models are served on
    if not specs:
        # Text-parsed harness: its commands, as the argument shapes they parse into.
        from codemode.harnesses.adapters import AdapterTool

        shown["commands"] = [
            {"name": t.name, "description": t.description, "parameters": t.table.parameters}
            for t in registry
            if isinstance(t, AdapterTool) and t.table is not None
        ]
    if dialect == "code":
        from codemode.tools.typescript import typescript_declarations

        shown["typescript"] = typescript_declarations(registry)
    return shown
