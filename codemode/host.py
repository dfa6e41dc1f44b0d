"""The embedding API: a tool host that runs JavaScript against Python tools.

host = ToolHost("path/to/repo")

@host.tool
async def word_count(text: str) -> int:
    "Count the words in a text."
    return len(text.split())

result = await host.execute("return await tools.word_count({text: 'a b c'})")
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from codemode.assembly.program import program_parts
from codemode.js_runtime.bridge import Bridge, EventSink
from codemode.js_runtime.models import ExecResult, Limits
from codemode.tools.registry import ToolFn, ToolRegistry

if TYPE_CHECKING:
    from codemode.hooks.engine import HookEngine
    from codemode.sandbox.approval import Approver
    from codemode.sandbox.session import SandboxSession
    from codemode.sandbox.settings import SandboxSettings
    from codemode.tools.dry_run import DryRun
    from codemode.tools.pipeline import Interceptor


class ToolHost:
    """Runs code-mode programs in a workspace with the built-in tools plus your own.

    ``engine`` is "quickjs" (default) or "v8"; ``persistent=True`` keeps globals
    between ``execute`` calls. A host belongs to the event loop that first uses it.

    ``sandbox`` (``SandboxSettings``, a dict of its fields, or a ``SandboxSession``) turns on the
    execpolicy, approvals (through ``approver``) and confinement for every command the
    tools start. Without it commands run unconfined and unchecked, as the embedding
    process itself would run them; file tools still write only inside the workspace.

    ``dry_run=True`` writes no file: the writing tools record their changes in
    ``host.dry_run`` (``changed_paths``, ``diff``) and the reading tools see them.

    ``interceptors`` (each ``async (call, next) -> result``, ``codemode.tools.pipeline``)
    see every tool call the policy lets through, in order, and may refuse, change or
    answer it; they are added to a copy of ``registry``.

    ``hooks`` (a ``codemode.hooks.engine.HookEngine``, e.g. ``program_hooks(cwd).engine``
    from ``codemode.hooks.loading``) runs the user's PreToolUse, PostToolUse and
    PermissionRequest hooks on every call a program makes (docs/hooks.md).
    """

    def __init__(
        self,
        workspace: str | Path = ".",
        *,
        engine: str = "quickjs",
        limits: Limits | None = None,
        persistent: bool = False,
        registry: ToolRegistry | None = None,
        globals: dict[str, Any] | None = None,
        sandbox: SandboxSettings | SandboxSession | Mapping[str, Any] | None = None,
        approver: Approver | None = None,
        dry_run: bool = False,
        interceptors: Iterable[Interceptor] = (),
        hooks: HookEngine | None = None,
    ) -> None:
        parts = program_parts(
            workspace,
            registry,
            sandbox=sandbox,
            approver=approver,
            dry_run=dry_run,
            interceptors=interceptors,
            hooks=hooks,
        )
        self.registry = parts.registry
        self.context = parts.context
        self.dry_run: DryRun | None = parts.dry_run
        self._bridge = Bridge(
            self.registry.dispatch(self.context),
            self.registry,
            engine=engine,
            limits=limits,
            persistent=persistent,
            globals=globals,
        )

    @property
    def workspace(self) -> Path:
        return self.context.workspace

    @overload
    def tool(
        self, fn: ToolFn, *, name: str | None = None, description: str | None = None
    ) -> ToolFn: ...

    @overload
    def tool(
        self, fn: None = None, *, name: str | None = None, description: str | None = None
    ) -> Callable[[ToolFn], ToolFn]: ...

    def tool(
        self,
        fn: ToolFn | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> ToolFn | Callable[[ToolFn], ToolFn]:
        """Decorator: expose an async function to programs as ``tools.<name>``."""
        if fn is None:
            return self.registry.tool(name=name, description=description)
        return self.registry.tool(fn, name=name, description=description)

    async def execute(
        self, code: str, *, on_event: EventSink | None = None, limits: Limits | None = None
    ) -> ExecResult:
        """Run one program; never raises for a failing program (see ``ExecResult.error``)."""
        # Its calls carry the program: approval requests show the program making them.
        dispatch = self.registry.dispatch(self.context, program=code)
        return await self._bridge.execute(
            code, on_event=on_event, limits=limits, dispatch=dispatch
        )

    def typescript(self) -> str:
        """TypeScript declarations of the tools, as given to a model in code mode."""
        from codemode.tools.typescript import typescript_declarations

        return typescript_declarations(self.registry)

    def close(self) -> None:
        self._bridge.close()
        if self.context.sandbox is not None:
            self.context.sandbox.close()

    def __enter__(self) -> ToolHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
