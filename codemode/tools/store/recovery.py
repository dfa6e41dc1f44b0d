"""The one call every entry point that opens a workspace makes first: roll back what a
patch or write killed partway (kill -9, a crash, a lost terminal) left there, and say so.

The file tools also recover before their next write (``DiskStore``), but a reader gets
there first: without this call a program, a model or a batch copy would start from a
half-patched workspace and could turn the mix into the new state. So ``interpreter``,
``exec`` and ACP sessions (``codemode.assembly.session``), ``interpreter run``,
``ToolHost`` and batch workers (``codemode.assembly.program``), the batch driver (every
repository, before any is copied or shipped) and ``mcp-server`` call
``recover_at_start`` before anything reads the workspace. The journal itself, and what
rolling back does to each path, is ``codemode.tools.store.journal``'s; a publish killed
partway (``interpreter run --branch``) is finished or undone after it
(``publish_marker``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path

from codemode.terminal.control_chars import visible
from codemode.tool_terms.errors import ToolError
from codemode.tools.store import journal, publish_marker

log = logging.getLogger(__name__)


def to_stderr(line: str) -> None:
    """One line on stderr, control characters shown: a journal names paths a program
    chose."""
    sys.stderr.write(visible(line) + "\n")
    sys.stderr.flush()


def recover_at_start(workspace: str | Path, say: Callable[[str], None] = to_stderr) -> list[str]:
    """Roll back every write killed partway in ``workspace``; ``say`` each line of what
    was done (default: stderr) and return them. Costs one ``listdir`` when nothing was
    left. Never raises: a rollback that fails is said too (the next file-tool write
    tries again), and the entry point goes on."""
    try:
        lines = journal.recover(Path(workspace))
        # then a publish killed partway, decided by what those files now hold
        lines += publish_marker.recover(Path(workspace))
    except (OSError, ToolError) as exc:
        log.info("recovery in %s failed: %s", workspace, exc)
        lines = [
            f"codemode: could not roll back an interrupted write in {workspace} ({exc}); "
            "the next file write there tries again."
        ]
    for line in lines:
        say(line)
    return lines


__all__ = ["recover_at_start", "to_stderr"]
