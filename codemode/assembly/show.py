"""A harness as the model sees it, for ``interpreter harness show``: with the tools a
session of it is assembled with (``assembly.toolset``), so it lives in the composition
root, above the harnesses."""

from __future__ import annotations

import platform
import shutil
from datetime import date
from pathlib import Path
from typing import Any

from codemode.harnesses.base import Dialect, PromptEnv


def describe_harness(name: str, dialect: Dialect, cwd: Path) -> dict[str, Any]:
    """The rendered prompt and the tools offered (function schemas; in code mode the
    ``exec`` tool, whose description carries the TypeScript declarations)."""
    from codemode.assembly.toolset import session_tools
    from codemode.harnesses.catalog import get_harness

    harness = get_harness(name, dialect)
    registry = session_tools(None, harness, cwd, []).registry  # as a session has them
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
        from codemode.tools.surfaces import declarations

        shown["typescript"] = declarations(registry)
    return shown
