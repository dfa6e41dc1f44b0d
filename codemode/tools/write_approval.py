"""Asking the user about a file write outside the writable roots.

The store refuses such a write (``OutsideRoots``); ``write_file`` and ``edit`` then put
it to the user through the session's one approval path, the sandbox's approver
(``SandboxSession.approver``: the terminal, or the editor over ACP), as commands are.
Only that refusal is ever asked about: a protected path (``.git``, ``.codemode`` at any
depth, even outside the roots; the host's git and codemode settings), a read-only
sandbox or an approval policy of ``never`` stays a refusal. "once" lets this one write
through; "always" makes the file's directory a writable root for the rest of the
session.
"""

from __future__ import annotations

import os
from pathlib import Path

from codemode.tools.context import ToolContext
from codemode.tools.fs import guard
from codemode.tools.store import OutsideRoots


def _never_offered(path: Path) -> bool:
    """Whether ``path`` is protected wherever it lies: a ``.git`` or ``.codemode`` part
    (as named, or with symlinks resolved), or the host's git or codemode settings."""
    from codemode.sandbox.protection.own_paths import file_refusal

    real = Path(os.path.realpath(path))
    return (
        guard.write_refusal(path.parts[1:]) is not None
        or guard.write_refusal(real.parts[1:]) is not None
        or file_refusal(real, Path(os.path.abspath(path))) is not None
    )


async def approve_outside_write(
    ctx: ToolContext, tool: str, path: Path, refusal: OutsideRoots
) -> Path:
    """The directory the user let ``tool`` write ``path`` in (the grant to pass to the
    store's ``write``); raises ``refusal`` (or a ToolError saying the user declined)."""
    if _never_offered(path) or not await ctx.sandbox.approve_write(tool, path, str(refusal)):
        raise refusal
    return path.parent
