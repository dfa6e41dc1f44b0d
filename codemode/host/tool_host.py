"""``ToolHost``: runs code-mode programs in a workspace against the built-in tools and
the embedder's own (``codemode.host`` hands it out; docs/embedding.md is the
embedder's page: defaults, limits, cells, delegated calls and the model-facing tool).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from codemode.assembly.program import ProgramParts, program_parts
from codemode.host.delegate import DelegatedProgram, Dispatch
from codemode.host.model_tool import ModelTool
from codemode.host.program_delegate import RegistryDelegate
from codemode.js_runtime.models import ExecEvent, ExecResult, Limits
from codemode.js_runtime.outcome import Completed, Outcome
from codemode.js_runtime.session import CodeSession
from codemode.sandbox.session import SandboxSession
from codemode.tools.context import ToolError
from codemode.tools.registry import ToolFn, ToolRegistry

if TYPE_CHECKING:
    from codemode.hooks.engine import HookEngine
    from codemode.js_runtime.delegate import ToolNames
    from codemode.sandbox.approvals.approval import Approver
    from codemode.sandbox.settings import SandboxSettings
    from codemode.tools.dry_run import DryRun
    from codemode.tools.pipeline import Interceptor

EventSink = Callable[[ExecEvent], None]
_MODES = ("read-only", "workspace-write", "danger-full-access")


@dataclass(frozen=True)
class _WithGlobals:
    """The host's tools (``ToolNames``), and its globals as the JavaScript each
    program's fresh isolate runs before it (one line): for a host running in a shared
    session, which must keep nothing of one host's for the next."""

    tools: ToolNames
    globals: dict[str, Any]

    def flat_names(self) -> list[str]:
        return self.tools.flat_names()

    def namespaces(self) -> dict[str, dict[str, str]]:
        return self.tools.namespaces()

    def program_setup(self) -> str:
        # As the runtime defines a session's globals: writable, not enumerable.
        return " ".join(
            f"Object.defineProperty(globalThis, {json.dumps(name)}, "
            f"{{value: JSON.parse({json.dumps(json.dumps(value))}), writable: true}});"
            for name, value in self.globals.items()
        )


def _program_sink(on_event: EventSink | None) -> Callable[[str, ExecEvent], None] | None:
    """A program's events for its caller's sink: console output and calls, not the
    runtime's own start and finish of the cell."""
    if on_event is None:
        return None

    def sink(_cell_id: str, event: ExecEvent) -> None:
        if event.type not in ("cell.started", "cell.finished"):
            on_event(event)

    return sink


# What a command refused for want of an approver tells a ToolHost's caller to do.
HOST_APPROVAL_REMEDY = (
    "Pass ToolHost(approver=...) to decide such commands, or "
    "ToolHost(sandbox={'approval_policy': 'never'}) to let them run inside the sandbox."
)


def _sandbox_arg(
    sandbox: SandboxSettings | SandboxSession | Mapping[str, Any] | str | None,
) -> SandboxSettings | SandboxSession | Mapping[str, Any]:
    """``None``: the sandbox ``interpreter run`` has (workspace-write, the execpolicy,
    no one to approve a ``prompt`` command: refused); a mode's name: that mode."""
    if sandbox is None:
        return {}
    if isinstance(sandbox, str):
        if sandbox not in _MODES:
            raise ValueError(f"sandbox={sandbox!r}: choose one of {', '.join(_MODES)}")
        return {"sandbox_mode": sandbox}
    return sandbox


class ToolHost:
    """Runs code-mode programs in a workspace with the built-in tools plus your own.

    ``engine`` is "quickjs" (default) or "v8"; ``persistent=True`` keeps globals
    between ``execute`` calls. A host belongs to the event loop that first uses it.

    Sandboxed by default: every command the tools start is checked by the execpolicy
    and confined to ``workspace-write`` (writes only in the workspace, no network), as
    in ``interpreter run``; a command the rules mark ``prompt`` is refused unless an
    ``approver`` says yes. ``sandbox`` picks another: a mode's name ("read-only", or
    "danger-full-access": commands run unconfined, with the user's own rights and
    network; only the execpolicy still applies), ``SandboxSettings``
    (or a dict of its fields), or a ``SandboxSession`` to share. The file tools write
    only inside the workspace whatever the mode.

    Made, it first rolls back a patch or write that a killed process left half-done in
    the workspace, and says so on stderr (``codemode.tools.store.recovery``).

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
        sandbox: SandboxSettings | SandboxSession | Mapping[str, Any] | str | None = None,
        approver: Approver | None = None,
        dry_run: bool = False,
        interceptors: Iterable[Interceptor] = (),
        hooks: HookEngine | None = None,
    ) -> None:
        parts = program_parts(
            workspace,
            registry,
            sandbox=_sandbox_arg(sandbox),
            approver=approver,
            dry_run=dry_run,
            interceptors=interceptors,
            hooks=hooks,
        )
        if isinstance(parts.context.sandbox, SandboxSession):
            # A refusal names what a ToolHost's caller has, not the CLI's options.
            parts.context.sandbox.gate.approval_remedy = HOST_APPROVAL_REMEDY
        self._setup(parts, engine, limits, persistent, globals, None)

    @classmethod
    def from_parts(
        cls,
        parts: ProgramParts,
        *,
        engine: str = "quickjs",
        limits: Limits | None = None,
        persistent: bool = False,
        globals: dict[str, Any] | None = None,
        session: CodeSession | None = None,
    ) -> ToolHost:
        """A host over tools and a context already built (``program_parts``): how
        `interpreter run`, batch workers and `mcp-server` run their programs.
        ``session``: a code session to run in instead of one of its own (a batch
        worker's kept one, which outlives the host); its programs still get this host's
        delegate, tools and ``globals`` each (set up in each program's fresh isolate)."""
        host = cls.__new__(cls)
        host._setup(parts, engine, limits, persistent, globals, session)
        return host

    def _setup(
        self,
        parts: ProgramParts,
        engine: str,
        limits: Limits | None,
        persistent: bool,
        globals: dict[str, Any] | None,
        session: CodeSession | None,
    ) -> None:
        self.registry = parts.registry
        self.context = parts.context
        self.dry_run: DryRun | None = parts.dry_run
        self._globals = dict(globals or {})
        self._owns_session = session is None
        if session is None:
            # Each program runs with a delegate of its own (``_delegate_for``); this one
            # is for code that uses ``host.session`` directly.
            session = CodeSession(
                RegistryDelegate(self.registry, self.context),
                limits=limits,
                tools=self.registry,
                engine=engine,
                persistent=persistent,
                globals=self._globals,
            )
            self._names: ToolNames = self.registry
        else:
            # A shared session holds no globals of ours: each program sets them up.
            self._names = _WithGlobals(self.registry, self._globals)
        self._session = session
        self._limits = limits or session.limits

    @property
    def workspace(self) -> Path:
        return self.context.workspace

    @property
    def limits(self) -> Limits:
        return self._limits

    @property
    def session(self) -> CodeSession:
        """The runtime's code session the host runs its programs in."""
        return self._session

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
        """Decorator: expose a function (plain or async) to programs as ``tools.<name>``.

        Its annotations declare it (the return annotation its result); one that cannot
        be declared raises TypeError here. A plain function runs in a worker thread."""
        if fn is None:
            return self.registry.tool(name=name, description=description)
        return self.registry.tool(fn, name=name, description=description)

    async def execute(
        self, code: str, *, on_event: EventSink | None = None, limits: Limits | None = None
    ) -> ExecResult:
        """Run one program to its end (a value, an error or a limit); never raises for a
        failing program (see ``ExecResult.error``)."""
        outcome = await self.start(code, on_event=on_event, limits=limits)
        assert isinstance(outcome, Completed)  # no yield time: it ran to its end
        return outcome.result

    async def start(
        self,
        code: str,
        *,
        yield_time_ms: int | None = None,
        on_event: EventSink | None = None,
        limits: Limits | None = None,
    ) -> Outcome:
        """Run one program as a cell: ``Completed`` (``.result``) when it finishes within
        ``yield_time_ms`` (None: whenever it does), else ``Yielded`` with its output so
        far and its ``cell_id``; it goes on running, to be waited on or terminated. Its
        time limit holds across yields. A persistent host runs one program at a time
        (starting one while a cell runs raises ``codemode.js_runtime.CellBusy``)."""
        yield_time = None if yield_time_ms is None else max(yield_time_ms, 0) / 1000
        return await self._session.execute(
            code,
            self._names,
            yield_time=yield_time,
            limits=limits or self._limits,
            delegate=self._delegate_for(on_event),
        )

    async def wait(self, cell_id: str, *, yield_time_ms: int = 10_000) -> Outcome:
        """A yielded cell's new output as soon as there is some (``Yielded``), or its
        result once it finishes (``Completed``); after ``yield_time_ms`` with nothing
        new, ``Yielded`` with no output. An unknown (or finished) cell raises
        ``codemode.js_runtime.UnknownCell``."""
        return await self._session.wait(cell_id, max(yield_time_ms, 0) / 1000)

    async def terminate(self, cell_id: str) -> Outcome:
        """Stop a yielded cell now: ``Terminated``, with the output it had not handed
        back (``Completed`` if it finished first)."""
        return await self._session.terminate(cell_id)

    def delegate(
        self, code: str, *, on_event: EventSink | None = None, limits: Limits | None = None
    ) -> DelegatedProgram:
        """Start a program whose tool calls the caller runs: iterate the returned
        program for each ``PendingCall`` and answer it (``codemode.host.delegate``)."""

        def check(name: str, args: object) -> None:
            tool = self.registry.get(name)
            if tool is None:
                hint = self.registry.closest(name)
                suffix = f" — did you mean tools.{hint}?" if hint else ""
                raise ToolError(f"tools.{name} is not a tool{suffix}")
            tool.validate(args)

        async def run(dispatch: Dispatch) -> ExecResult:
            outcome = await self._session.execute(
                code,
                self._names,
                limits=limits or self._limits,
                delegate=self._delegate_for(on_event, dispatch),
            )
            assert isinstance(outcome, Completed)  # no yield time: it ran to its end
            return outcome.result

        return DelegatedProgram(run, check)

    def _delegate_for(
        self, on_event: EventSink | None, calls: Dispatch | None = None
    ) -> RegistryDelegate:
        """One program's delegate: its calls down the registry's path with its
        provenance (or to ``calls``, the caller that runs them), its events to
        ``on_event``."""
        return RegistryDelegate(self.registry, self.context, _program_sink(on_event), calls=calls)

    def model_tool(self, name: str = "execute") -> ModelTool:
        """This host as one tool for a model (``codemode.host.model_tool``): its handler
        runs the program to completion and returns the outcome as text."""
        from codemode.harnesses.render import render_exec_result
        from codemode.mcp.description import execute_description

        async def handler(code: str) -> str:
            return render_exec_result(await self.execute(code), code)

        description = execute_description(
            self.registry, self.workspace, declarations=self.typescript().strip()
        )
        return ModelTool(name=name, description=description, handler=handler)

    def typescript(self) -> str:
        """TypeScript declarations of the tools, as given to a model in code mode."""
        from codemode.tools.typescript import typescript_declarations

        return typescript_declarations(self.registry, argv="argv" in self._globals)

    def close(self) -> None:
        """Stop every cell (without waiting for them: ``aclose`` does) and the workers
        (of a session of its own: a shared one is its owner's to close)."""
        if self._owns_session:
            self._session.close_now()
        self.context.sandbox.close()

    async def aclose(self) -> None:
        """Stop every cell, waiting until each has, then the workers (as ``close``)."""
        if self._owns_session:
            await self._session.close()
        self.context.sandbox.close()

    def __enter__(self) -> ToolHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ToolHost:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
