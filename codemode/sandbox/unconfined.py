"""The sandbox of a ``ToolContext`` made without one (an embedder's, a benchmark's).

Commands run as they are, unchecked (no execpolicy, no approval, no confinement), but
without credentials in their environment; outside tools run; the file tools write in
the workspace and the context's extra roots, never in their protected parts
(``paths.write_refusal``). Nobody is asked anything: a write outside the roots is
refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.sandbox.env import scrub_environment
from codemode.sandbox.shell_command import shell_argv
from codemode.tool_terms.errors import ToolError

if TYPE_CHECKING:
    from codemode.sandbox.approvals.approval import Approver
    from codemode.sandbox.server.pidfd_process import ChildProcess


class Unconfined:
    """A ``protocols.Sandbox`` that confines nothing. ``extra_roots`` is the context's
    own list (``ToolContext.writable_roots``): what is added to it later counts."""

    sandbox_mode = "danger-full-access"  # for commands; the file tools keep to the roots
    approval_policy = "never"  # nobody is asked

    def __init__(self, workspace: Path, extra_roots: list[Path]) -> None:
        self.workspace = workspace
        self.extra_roots = extra_roots
        self.approver: Approver | None = None

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
        return await asyncio.create_subprocess_exec(
            *shell_argv(command),
            cwd=cwd,
            env=scrub_environment(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=output_fd,
            stderr=output_fd,
            start_new_session=True,
        )

    def after_command(self, proc: ChildProcess) -> list[str]:
        return []

    def explain_refusals(self, output: str) -> list[str]:
        return []

    def writable_roots(self) -> list[Path]:
        return [self.workspace, *self.extra_roots]

    def check_writable(self, path: Path, shown: str | Path) -> Path:
        # lazy: the protected-path tables load with the first write, not with every context
        from codemode.sandbox.protection.paths import write_refusal

        reason = write_refusal(path, self.writable_roots())
        if reason == "outside the writable roots":
            raise ToolError(f"refusing to write outside the workspace: {shown}")
        if reason is not None:
            raise ToolError(f"refusing to write {shown}: {reason}")
        return path

    async def authorize_tool(
        self, name: str, trust: str, args: Any, *, program: str | None = None
    ) -> None:
        return None  # no sandbox, no policy: an outside tool runs like any other

    async def approve_write(self, tool: str, path: Path, why: str) -> bool:
        return False  # nobody to ask

    def close(self) -> None:
        return None
