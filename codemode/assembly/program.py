"""What a program host (``codemode.ToolHost``, ``interpreter run``, the batch worker)
runs programs with: its tools and their context, built whole; each program's delegate
over them is ``codemode.host.program_delegate.RegistryDelegate``.

Unlike a model session there is no provider, harness or session file: only the tool
set, the workspace, the sandbox session and, for a dry run, the overlay that the
writing tools record their changes in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.sandbox.unconfined import Unconfined
from codemode.tools.context import ToolContext
from codemode.tools.store.recovery import recover_at_start

if TYPE_CHECKING:
    from codemode.hooks.engine import HookEngine
    from codemode.sandbox.approvals.approval import Approver
    from codemode.sandbox.protocols import Sandbox
    from codemode.sandbox.session import SandboxSession
    from codemode.sandbox.settings import SandboxSettings
    from codemode.tools.dry_run import DryRun
    from codemode.tools.pipeline import Interceptor
    from codemode.tools.registry import ToolRegistry


@dataclass(frozen=True)
class ProgramParts:
    registry: ToolRegistry  # what programs call (the dry-run wrapper in a dry run)
    context: ToolContext
    dry_run: DryRun | None


def program_parts(
    workspace: str | Path,
    registry: ToolRegistry | None = None,
    *,
    sandbox: SandboxSettings | SandboxSession | Mapping[str, Any] | None = None,
    approver: Approver | None = None,
    dry_run: bool = False,
    interceptors: Iterable[Interceptor] = (),
    hooks: HookEngine | None = None,
) -> ProgramParts:
    """The tools (the built-ins unless ``registry``) and the context a program host
    runs programs with. ``sandbox``: settings (or a dict of them) for a new sandbox
    session rooted at ``workspace``, or a session to use as it is. ``interceptors``
    join the pipeline of a copy of ``registry`` (the caller's stays as it was), and so
    do ``hooks`` (``codemode.hooks``: every call a program makes is hooked).

    First of all, a write killed partway in ``workspace`` is rolled back and said on
    stderr (``codemode.tools.store.recovery``): no program starts from a half-patched
    workspace."""
    from codemode.tools.builtin import builtin_registry

    root = Path(workspace).resolve()
    recover_at_start(root)
    tools = registry if registry is not None else builtin_registry()
    session = None
    if sandbox is not None:
        from codemode.sandbox.session import SandboxSession

        # (not prewarmed: `interpreter run` and batch workers start their programs at
        # once, with nothing to overlap a warm-up with; an embedder may call
        # ``host.context.sandbox.prewarm()``)
        session = (
            sandbox
            if isinstance(sandbox, SandboxSession)
            else SandboxSession(root, sandbox, approver=approver)
        )
    added = list(interceptors)
    if added or hooks is not None:
        tools = tools.copy() if registry is not None else tools
        for interceptor in added:
            tools.use(interceptor)
    if hooks is not None:
        from codemode.hooks.tool_calls import install

        install(tools, hooks, session)
    changes = None
    if dry_run:
        from codemode.tools.dry_run import DryRun
        from codemode.tools.dry_run_gate import dry_run_registry

        tools = dry_run_registry(tools)
        changes = DryRun()
    # without a sandbox session, commands run as they are (``Unconfined``)
    box: Sandbox = session if session is not None else Unconfined(root, [])
    context = ToolContext(workspace=root, sandbox=box, dry_run=changes)
    return ProgramParts(tools, context, changes)
