"""``python -m codemode.launch serve SOCKET PID``: the warm server of `interpreter`
commands (``codemode.warm.start.serve``), given what commands import and how one runs.
"""

from __future__ import annotations

import os
import sys


def _prepare() -> None:
    """What every command would import, imported once by the server."""
    import importlib

    from codemode.cli.root import load_command_modules

    load_command_modules()
    for name in _HEAVY:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # a lean install: the command that needs it says so


# Imported by commands inside their functions (so a cold `--help` stays fast).
_HEAVY = (
    "asyncio", "httpx", "pydantic", "rich.console", "prompt_toolkit",
    "codemode.host", "codemode.assembly", "codemode.agent", "codemode.js_runtime.session",
    "codemode.js_runtime.worker_process", "codemode.batch", "codemode.commands",
    "codemode.mcp", "codemode.acp", "codemode.doctor", "codemode.codex_host.server",
    "codemode.codex_host.start", "codemode.sandbox", "codemode.tools",
    "codemode.providers", "codemode.harnesses", "codemode.config", "mcp",
)  # fmt: skip


def _run(args: list[str]) -> int:
    from codemode.cli import main as cold

    cold(args)
    return 0


def main(argv: list[str]) -> int:
    from codemode.warm import start

    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python -m codemode.launch serve SOCKET PID", file=sys.stderr)
        return 2
    idle = float(os.environ.get(start.IDLE_ENV, "0") or 0)
    return start.serve(argv[0], int(argv[1]), _prepare, _run, idle)
