"""The `interpreter` and `i` console scripts: warm where a server can be had, else cold.

Standard library only until it knows which: with warm starts on (the default;
``CODEMODE_WARM=0`` or ``warm = false`` in the config file turns them off) a command is
handed to this user's warm server
(``codemode.warm``), which runs it in a process forked with everything imported;
without one (or when the server refuses) the command runs here, cold, as it always did
(``codemode.cli.main``). docs/warm.md is the user's page.

``python -m codemode.launch serve SOCKET PID`` is the server itself (``serve.py``,
started by ``codemode.warm.start``; not for people to run).
"""

from __future__ import annotations

import os
import sys

# The commands served warm: every command but the interactive session (no command, or
# a prompt) and `resume` (also interactive), which keep their terminal session and job
# control as a cold process has them, and `warm` itself.
# tests/test_warm_boundaries.py holds this to codemode.cli.root.COMMAND_MODULES.
WARM_COMMANDS = frozenset({
    "acp", "apply-patch", "code-mode-host", "doctor", "eval", "exec", "harness", "hooks",
    "mcp", "mcp-server", "models", "policy", "providers", "run", "sessions", "skills",
    "tools",
})  # fmt: skip


def main() -> None:
    argv = sys.argv
    if argv[1:2] and argv[1] in WARM_COMMANDS:
        from codemode.warm import place

        if place.enabled():
            status = _warm(argv)
            if status is not None:
                sys.stdout.flush()
                os._exit(status & 0xFF)  # nothing of ours to tear down
    if argv[1:2] == ["code-mode-host"]:
        from codemode.launch.host import serve_host

        serve_host(argv[1:])  # returns only where click must read the options
    from codemode.cli import main as cold

    cold()


def _warm(argv: list[str]) -> int | None:
    from codemode.warm import client

    try:
        return client.run(argv)
    except KeyboardInterrupt:  # Ctrl-C before the server took the command
        print("interrupted", file=sys.stderr)
        return 130
