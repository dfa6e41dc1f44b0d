"""The seams of the sandbox: what the rest of codemode calls, and what plugs in.

- ``Sandbox``: what a tool asks of the session's sandbox — run a shell command, may this
  path be written, may this outside tool run, ask about a write outside the roots. Every
  ``ToolContext`` holds one, so a tool never checks for "no sandbox":
  ``session.SandboxSession`` confines (execpolicy → approval → bubblewrap or Landlock)
  and ``unconfined.Unconfined`` (an embedder's ``ToolContext`` without a sandbox) runs
  commands as they are, credentials withheld, and lets the file tools write in the
  workspace and its extra roots.
- ``Check`` (in ``execpolicy/verdicts.py``, beside the facts and verdicts it takes and
  gives): one per-command check of the execpolicy: the facts about one simple command in
  (``CommandFacts``), the verdicts it adds out.

Only annotations are imported here, so importing this module costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from codemode.sandbox.approvals.approval import Approver
    from codemode.sandbox.server.pidfd_process import ChildProcess

__all__ = ["Sandbox"]


class Sandbox(Protocol):
    """The one door between the tools and the machine (``ToolContext.sandbox``)."""

    workspace: Path
    # who is asked when something needs approval; None: nobody (it is then refused)
    approver: Approver | None

    @property
    def sandbox_mode(self) -> str:
        """``read-only``, ``workspace-write`` or ``danger-full-access`` (named in refusals)."""
        ...

    @property
    def approval_policy(self) -> str:
        """``untrusted``, ``on-request`` or ``never``."""
        ...

    async def spawn(
        self,
        command: str,
        *,
        cwd: Path,
        env: Mapping[str, str],
        output_fd: int,
        tool: str | None = None,
        program: str | None = None,
    ) -> ChildProcess:
        """Start the shell command line ``command`` (policy, approval and confinement as
        the sandbox has them) in a new session, stdin /dev/null, stdout and stderr to
        ``output_fd``; raises ToolError saying why it may not run. ``tool`` and
        ``program`` name who asks (an approval request shows them)."""
        ...

    def after_command(self, proc: ChildProcess) -> list[str]:
        """Once ``proc`` has exited: lines saying what the sandbox put back."""
        ...

    def explain_refusals(self, output: str) -> list[str]:
        """Lines saying why, for a write the kernel refused whose message names none."""
        ...

    def writable_roots(self) -> list[Path] | None:
        """Where the file tools may write: None = anywhere, [] = nowhere."""
        ...

    def check_writable(self, path: Path, shown: str | Path) -> Path:
        """``path`` if the file tools may write it; raises ToolError saying why not."""
        ...

    async def authorize_tool(
        self, name: str, trust: str, args: Any, *, program: str | None = None
    ) -> None:
        """Let a call to the outside tool ``name`` (an MCP server's, of ``trust``)
        through, or raise ToolError saying what refused it."""
        ...

    async def approve_write(self, tool: str, path: Path, why: str) -> bool:
        """Ask whether ``tool`` may write ``path`` outside the writable roots (``why``).
        False when nobody may be asked; raises ToolError when the person declines;
        "always" makes the file's folder writable for the rest of the session."""
        ...

    def close(self) -> None: ...
